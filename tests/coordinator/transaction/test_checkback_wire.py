"""The check-back APIs on the wire (docs/transactions.md, "Check-back transactions"): our specs
(protocol/extensions/*CheckBack*.json) load beside Kafka's at their private keys, and the generated codec --
used by the broker and by eoslog.client.checkback alike -- round-trips every message, with the bytes of a
BeginCheckBack request laid out as the spec says."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.protocol import codec, messages, schema
from eoslog.protocol.codec import RequestHeader

KEYS = {0x7E10: "BeginCheckBack", 0x7E11: "PollCheckBack", 0x7E12: "AnswerCheckBack", 0x7E13: "ListCheckBacks"}
SPEC_NAMES = {f"{name}{kind}" for name in KEYS.values() for kind in ("Request", "Response")}
text = st.text(max_size=30)
i64 = st.integers(-(2**63), 2**63 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)
i8 = st.integers(-128, 127)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def test_specs_load_at_their_private_keys():
    assert SPEC_NAMES <= set(schema.extension_spec_names())
    api_keys = schema.api_keys()
    for key, name in KEYS.items():
        assert api_keys[key] == name
        for spec in (schema.request_spec(key), schema.response_spec(key)):
            assert str(spec.valid_versions) == "0-0" and str(spec.flexible_versions) == "none"


def _request_round_trip(api_key: int, request) -> bytes:
    frame = bytes(codec.encode_request(RequestHeader(api_key, 0, 42, "cb"), request))
    header, decoded = codec.decode_request(frame[4:])
    assert header == RequestHeader(api_key, 0, 42, "cb") and decoded == request
    return frame[4 + 2 + 2 + 4 + 2 + 2:]  # the body, after api key, version, correlation id, client id "cb"


def _response_round_trip(api_key: int, response) -> None:
    frame = b"".join(bytes(p) for p in codec.encode_response(RequestHeader(api_key, 0, 7, None), response))
    assert frame[4:8] == struct.pack(">i", 7)
    assert codec.decode_response(api_key, 0, frame[4:]) == response


def test_begin_check_back_bytes():
    body = _request_round_trip(0x7E10, messages.BeginCheckBackRequest(
        transactional_id="t-1", producer_id=1000, producer_epoch=2, check_back_group="app"))
    assert body == b"\x00\x03t-1" + struct.pack(">qh", 1000, 2) + b"\x00\x03app"


@SETTINGS
@given(text, i64, i16, text, text, i32, i32, i8)
def test_requests_round_trip(tid, pid, epoch, group, member, number, wait, answer):
    _request_round_trip(0x7E10, messages.BeginCheckBackRequest(transactional_id=tid, producer_id=pid,
                                                               producer_epoch=epoch, check_back_group=group))
    _request_round_trip(0x7E11, messages.PollCheckBackRequest(check_back_group=group, member_id=member,
                                                              max_wait_ms=wait, max_checks=number))
    _request_round_trip(0x7E12, messages.AnswerCheckBackRequest(transactional_id=tid, producer_id=pid,
                                                                producer_epoch=epoch, check_number=number,
                                                                answer=answer))
    _request_round_trip(0x7E13, messages.ListCheckBacksRequest(check_back_groups=[group, member]))


Check = messages.PollCheckBackResponse.Check
Row = messages.ListCheckBacksResponse.CheckBackTransaction


@SETTINGS
@given(i16, st.lists(st.builds(Check, transactional_id=text, producer_id=i64, producer_epoch=i16, check_number=i32),
                     max_size=4),
       st.lists(st.builds(Row, transactional_id=text, check_back_group=text, state=text, producer_id=i64,
                          producer_epoch=i16, check_count=i32, next_check_timestamp_ms=i64,
                          abort_reason=st.none() | text), max_size=4))
def test_responses_round_trip(code, checks, rows):
    _response_round_trip(0x7E10, messages.BeginCheckBackResponse(throttle_time_ms=0, error_code=code))
    _response_round_trip(0x7E11, messages.PollCheckBackResponse(throttle_time_ms=0, error_code=code, checks=checks))
    _response_round_trip(0x7E12, messages.AnswerCheckBackResponse(throttle_time_ms=0, error_code=code))
    _response_round_trip(0x7E13, messages.ListCheckBacksResponse(throttle_time_ms=0, error_code=code,
                                                                 transactions=rows))
