"""The transaction-group APIs on the wire: our specs (protocol/extensions/*.json) load beside Kafka's,
round-trip through the generated codec, and agree byte for byte with the Spark sink's hand-written
client codec (eoslog.spark.txn_group_protocol)."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.protocol import codec, messages, schema
from eoslog.protocol.codec import RequestHeader
from eoslog.spark import txn_group_protocol as proto

KEYS = {0x7E00: "CommitTransactionGroup", 0x7E01: "DescribeTransactionGroups", 0x7E02: "AbortTransactionsByPrefix"}
text = st.text(max_size=30)
i64 = st.integers(-(2**63), 2**63 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)


def test_specs_load_beside_kafkas():
    assert set(schema.extension_spec_names()) == {f"{n}{k}" for n in KEYS.values() for k in ("Request", "Response")}
    assert not set(schema.extension_spec_names()) & set(schema.spec_names())
    api_keys = schema.api_keys()
    for key, name in KEYS.items():
        assert api_keys[key] == name
        for spec in (schema.request_spec(key), schema.response_spec(key)):
            assert str(spec.valid_versions) == "0-0" and str(spec.flexible_versions) == "none"
        assert schema.request_header_version(key, 0) == 1 and schema.response_header_version(key, 0) == 0
    assert api_keys[0] == "Produce"  # Kafka's are all still there


def _request_frame(api_key: int, body: bytes, correlation_id: int = 42, client_id: bytes = b"spark") -> bytes:
    return struct.pack(">hhih", api_key, 0, correlation_id, len(client_id)) + client_id + body


members = st.lists(st.builds(proto.TxnMember, text, i64, i16), max_size=4).map(tuple)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.builds(proto.CommitRequest, text, i64, st.none() | text, members))
def test_commit_request_bytes_agree(request):
    body = proto.encode_commit_request(request)
    header, decoded = codec.decode_request(_request_frame(0x7E00, body))
    assert header == RequestHeader(0x7E00, 0, 42, "spark")
    assert (decoded.group_name, decoded.sequence, decoded.abort_prefix) == (
        request.group_name, request.sequence, request.abort_prefix)
    assert [proto.TxnMember(m.transactional_id, m.producer_id, m.producer_epoch)
            for m in decoded.transactions] == list(request.members)
    ours = codec.encode_request(header, decoded)
    assert bytes(ours)[4:] == _request_frame(0x7E00, body)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.builds(proto.CommitResponse, i16, st.booleans(), i64, st.lists(st.tuples(text, i16), max_size=4).map(tuple),
                 st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**31 - 1)))
def test_commit_response_bytes_agree(response):
    ours = messages.CommitTransactionGroupResponse(
        throttle_time_ms=response.throttle_time_ms, error_code=response.error_code,
        already_committed=response.already_committed, last_committed_sequence=response.last_committed_sequence,
        transactions=[messages.CommitTransactionGroupResponse.MemberResult(transactional_id=t, error_code=c)
                      for t, c in response.member_errors],
        aborted_by_prefix=response.aborted_by_prefix)
    frame = b"".join(bytes(p) for p in codec.encode_response(RequestHeader(0x7E00, 0, 7, None), ours))
    assert frame[4:8] == struct.pack(">i", 7)
    assert frame[8:] == proto.encode_commit_response(response)
    assert proto.decode_commit_response(frame[8:]) == response
    assert codec.decode_response(0x7E00, 0, frame[4:]) == ours


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(text, max_size=4), st.lists(st.builds(proto.GroupDescription, text, i16, i64, i64), max_size=4))
def test_describe_bytes_agree(names, groups):
    _, decoded = codec.decode_request(_request_frame(0x7E01, proto.encode_describe_request(names)))
    assert decoded.group_names == names
    ours = messages.DescribeTransactionGroupsResponse(throttle_time_ms=0, groups=[
        messages.DescribeTransactionGroupsResponse.DescribedGroup(
            group_name=g.group_name, error_code=g.error_code, last_committed_sequence=g.last_committed_sequence,
            last_commit_timestamp_ms=g.last_commit_timestamp_ms) for g in groups])
    frame = b"".join(bytes(p) for p in codec.encode_response(RequestHeader(0x7E01, 0, 7, None), ours))
    assert frame[8:] == proto.encode_describe_response(groups)
    assert proto.decode_describe_response(frame[8:]) == groups


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(text, st.builds(proto.AbortResponse, i16, st.lists(text, max_size=4).map(tuple), st.integers(0, 2**31 - 1)))
def test_abort_bytes_agree(prefix, response):
    _, decoded = codec.decode_request(_request_frame(0x7E02, proto.encode_abort_request(prefix)))
    assert decoded.prefix == prefix
    ours = messages.AbortTransactionsByPrefixResponse(throttle_time_ms=response.throttle_time_ms,
                                                      error_code=response.error_code, aborted=list(response.aborted))
    frame = b"".join(bytes(p) for p in codec.encode_response(RequestHeader(0x7E02, 0, 7, None), ours))
    assert frame[8:] == proto.encode_abort_response(response)
    assert proto.decode_abort_response(frame[8:]) == response


def test_defaults_mean_unknown():
    assert messages.CommitTransactionGroupRequest().abort_prefix is None
    assert messages.CommitTransactionGroupResponse().last_committed_sequence == -1
    described = messages.DescribeTransactionGroupsResponse.DescribedGroup()
    assert (described.last_committed_sequence, described.last_commit_timestamp_ms) == (-1, -1)
