"""The transaction-group APIs on the wire: our specs (protocol/extensions/*.json) load beside Kafka's, the
generated codec -- used by the broker and by the Spark sink's client alike -- round-trips them, and its bytes
are the layout docs/spark.md documents."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.protocol import codec, messages, schema
from eoslog.protocol.codec import RequestHeader
from eoslog.protocol.errors import InvalidRequest
from eoslog.protocol.wire import Malformed

KEYS = {0x7E00: "CommitTransactionGroup", 0x7E01: "DescribeTransactionGroups", 0x7E02: "AbortTransactionsByPrefix",
        0x7E03: "ListTransactionGroups"}
text = st.text(max_size=30)
i64 = st.integers(-(2**63), 2**63 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)
Member = messages.CommitTransactionGroupRequest.GroupMember
MemberResult = messages.CommitTransactionGroupResponse.MemberResult
DescribedGroup = messages.DescribeTransactionGroupsResponse.DescribedGroup


def test_specs_load_beside_kafkas():
    from tests.coordinator.transaction.test_checkback_wire import SPEC_NAMES as CHECK_BACK_SPECS
    from tests.share.test_share_txn_wire import SPEC_NAMES as SHARE_TXN_SPECS

    assert set(schema.extension_spec_names()) == {f"{n}{k}" for n in KEYS.values() for k in ("Request", "Response")
                                                  } | CHECK_BACK_SPECS | SHARE_TXN_SPECS
    assert not set(schema.extension_spec_names()) & set(schema.spec_names())
    api_keys = schema.api_keys()
    for key, name in KEYS.items():
        assert api_keys[key] == name
        for spec in (schema.request_spec(key), schema.response_spec(key)):
            assert str(spec.valid_versions) == "0-0" and str(spec.flexible_versions) == "none"
        assert schema.request_header_version(key, 0) == 1 and schema.response_header_version(key, 0) == 0
    assert api_keys[0] == "Produce"  # Kafka's are all still there


def _request_round_trip(api_key: int, request):
    frame = bytes(codec.encode_request(RequestHeader(api_key, 0, 42, "spark"), request))
    header, decoded = codec.decode_request(frame[4:])
    assert header == RequestHeader(api_key, 0, 42, "spark")
    return frame[4:], decoded


def _response_round_trip(api_key: int, response):
    frame = b"".join(bytes(p) for p in codec.encode_response(RequestHeader(api_key, 0, 7, None), response))
    assert frame[4:8] == struct.pack(">i", 7)
    assert codec.decode_response(api_key, 0, frame[4:]) == response
    return frame[8:]


members = st.lists(st.builds(Member, transactional_id=text, producer_id=i64, producer_epoch=i16), max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text, i64, st.none() | text, members)
def test_commit_request_round_trips(group, sequence, prefix, ms):
    request = messages.CommitTransactionGroupRequest(group_name=group, sequence=sequence, abort_prefix=prefix,
                                                     transactions=ms)
    _, decoded = _request_round_trip(0x7E00, request)
    assert decoded == request


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(i16, st.booleans(), i64, st.lists(st.builds(MemberResult, transactional_id=text, error_code=i16), max_size=4),
       i32, st.integers(0, 2**31 - 1))
def test_commit_response_round_trips(code, already, last, results, aborted, throttle):
    _response_round_trip(0x7E00, messages.CommitTransactionGroupResponse(
        throttle_time_ms=throttle, error_code=code, already_committed=already, last_committed_sequence=last,
        transactions=results, aborted_by_prefix=aborted))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(text, max_size=4), st.lists(st.builds(DescribedGroup, group_name=text, error_code=i16,
                                                      last_committed_sequence=i64, last_commit_timestamp_ms=i64),
                                            max_size=4))
def test_describe_round_trips(names, groups):
    _, decoded = _request_round_trip(0x7E01, messages.DescribeTransactionGroupsRequest(group_names=names))
    assert decoded.group_names == names
    _response_round_trip(0x7E01, messages.DescribeTransactionGroupsResponse(throttle_time_ms=0, groups=groups))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(text, i16, st.lists(text, max_size=4))
def test_abort_round_trips(prefix, code, aborted):
    _, decoded = _request_round_trip(0x7E02, messages.AbortTransactionsByPrefixRequest(prefix=prefix))
    assert decoded.prefix == prefix
    _response_round_trip(0x7E02, messages.AbortTransactionsByPrefixResponse(error_code=code, aborted=aborted))


ListedGroup = messages.ListTransactionGroupsResponse.ListedGroup
ListedMember = ListedGroup.ListedMember
listed_groups = st.lists(st.builds(
    ListedGroup, group_name=text, state=st.sampled_from(["PrepareCommit", "CompleteCommit"]),
    decision_in_flight=st.booleans(), last_committed_sequence=i64, last_commit_timestamp_ms=i64,
    members=st.lists(st.builds(ListedMember, transactional_id=text, producer_id=i64, producer_epoch=i16),
                     max_size=3)), max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(text, max_size=3), i16, st.lists(text, max_size=2), listed_groups)
def test_list_round_trips(states, code, unknown, groups):
    _, decoded = _request_round_trip(0x7E03, messages.ListTransactionGroupsRequest(states_filter=states))
    assert decoded.states_filter == states
    _response_round_trip(0x7E03, messages.ListTransactionGroupsResponse(
        throttle_time_ms=0, error_code=code, unknown_state_filters=unknown, groups=groups))


def test_list_response_bytes_as_documented():
    """docs/spark.md's layout: INT32 throttle, INT16 error, ARRAY(STRING) unknown states, ARRAY of (STRING
    group, STRING state, BOOL in flight, INT64 sequence, INT64 timestamp, ARRAY of (STRING id, INT64
    producer id, INT16 epoch))."""
    body = _response_round_trip(0x7E03, messages.ListTransactionGroupsResponse(
        throttle_time_ms=0, error_code=0, unknown_state_filters=["x"], groups=[ListedGroup(
            group_name="g", state="CompleteCommit", decision_in_flight=False, last_committed_sequence=3,
            last_commit_timestamp_ms=1000, members=[ListedMember(transactional_id="t", producer_id=9,
                                                                 producer_epoch=2)])]))
    assert body == (struct.pack(">ihi", 0, 0, 1) + struct.pack(">h", 1) + b"x" + struct.pack(">i", 1)
                    + struct.pack(">h", 1) + b"g" + struct.pack(">h", 14) + b"CompleteCommit" + b"\x00"
                    + struct.pack(">qq", 3, 1000) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t"
                    + struct.pack(">qh", 9, 2))


def test_commit_request_bytes_as_documented():
    """docs/spark.md's layout: STRING group, INT64 sequence, NULLABLE_STRING prefix, ARRAY of (STRING id,
    INT64 producer id, INT16 epoch); after request header v1."""
    frame, _ = _request_round_trip(0x7E00, messages.CommitTransactionGroupRequest(
        group_name="g", sequence=5, abort_prefix=None,
        transactions=[Member(transactional_id="t", producer_id=9, producer_epoch=2)]))
    header = struct.pack(">hhih", 0x7E00, 0, 42, 5) + b"spark"
    assert frame == header + (struct.pack(">h", 1) + b"g" + struct.pack(">q", 5) + struct.pack(">h", -1)
                              + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">qh", 9, 2))


def test_abort_response_bytes_as_documented():
    body = _response_round_trip(0x7E02, messages.AbortTransactionsByPrefixResponse(
        throttle_time_ms=0, error_code=0, aborted=["a", "bc"]))
    assert body == struct.pack(">ihi", 0, 0, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">h", 2) + b"bc"


@pytest.mark.parametrize("body", [b"", b"\x00\x05ab", b"\x00\x01g" + b"\x00" * 3])
def test_truncated_request_is_refused_as_invalid(body):
    """The broker answers a truncated body with INVALID_REQUEST (codec.decode_request's one error)."""
    header = struct.pack(">hhih", 0x7E00, 0, 1, -1)
    with pytest.raises(InvalidRequest):
        codec.decode_request(header + body)


def test_truncated_or_overlong_response_is_malformed():
    """The sink's client never takes a short or overlong answer for a valid one."""
    body = _response_round_trip(0x7E02, messages.AbortTransactionsByPrefixResponse(aborted=["abc"]))
    frame = struct.pack(">i", 7) + body
    for bad in (frame[:-1], frame + b"\x00"):
        with pytest.raises(Malformed):
            codec.decode_response(0x7E02, 0, bad)


def test_defaults_mean_unknown():
    assert messages.CommitTransactionGroupRequest().abort_prefix is None
    assert messages.CommitTransactionGroupResponse().last_committed_sequence == -1
    described = DescribedGroup()
    assert (described.last_committed_sequence, described.last_commit_timestamp_ms) == (-1, -1)
