"""The wire of issue 37 step 6's two extension APIs (protocol/extensions/): AddSharePartitionsToTxn (0x7E20)
and ShareAcknowledgeTxn (0x7E21) load beside Kafka's specs, are advertised by ApiVersions, and round-trip
(flexible v0, the member id nullable)."""

from __future__ import annotations

import struct
import uuid

from hypothesis import given
from hypothesis import strategies as st

from eoslog.api import APIS
from eoslog.protocol import codec, messages, schema
from eoslog.protocol.codec import RequestHeader

KEYS = {0x7E20: "AddSharePartitionsToTxn", 0x7E21: "ShareAcknowledgeTxn"}
SPEC_NAMES = {f"{name}{kind}" for name in KEYS.values() for kind in ("Request", "Response")}
uuids = st.uuids()
i64, i32, i16 = (st.integers(-(2**b), 2**b - 1) for b in (63, 31, 15))


def test_specs_load_and_are_advertised():
    assert SPEC_NAMES <= set(schema.extension_spec_names())
    for key, name in KEYS.items():
        assert schema.api_keys()[key] == name
        assert str(schema.request_spec(key).flexible_versions) == "0+"
        assert schema.request_header_version(key, 0) == 2 and schema.response_header_version(key, 0) == 1
    assert {key for key, _, _ in APIS.values()} >= set(KEYS)


def _round_trip(api_key: int, request, response) -> None:
    frame = bytes(codec.encode_request(RequestHeader(api_key, 0, 42, "c"), request))
    assert codec.decode_request(frame[4:])[1] == request
    frame = b"".join(bytes(p) for p in codec.encode_response(RequestHeader(api_key, 0, 7, None), response))
    assert frame[4:8] == struct.pack(">i", 7)
    assert codec.decode_response(api_key, 0, frame[4:]) == response


@given(st.text(max_size=20), i64, i16, st.lists(st.tuples(uuids, st.lists(i32, max_size=3)), max_size=3), i16)
def test_add_share_partitions_to_txn_round_trips(group, producer_id, epoch, topics, code):
    R = messages.AddSharePartitionsToTxnRequest
    _round_trip(0x7E20, R(transactional_id="t", producer_id=producer_id, producer_epoch=epoch, group_id=group,
                          topics=[R.SharePartitionsTopic(topic_id=t, partitions=ps) for t, ps in topics]),
                messages.AddSharePartitionsToTxnResponse(throttle_time_ms=0, error_code=code))


@given(st.none() | st.text(max_size=20), i64, i16, i32,
       st.lists(st.tuples(i64, i64, st.lists(st.integers(0, 3), max_size=3)), max_size=3), i16)
def test_share_acknowledge_txn_round_trips(member_id, producer_id, epoch, timeout, batches, code):
    R, A = messages.ShareAcknowledgeTxnRequest, messages.ShareAcknowledgeTxnResponse
    topic_id = uuid.uuid4()
    _round_trip(0x7E21, R(group_id="g", member_id=member_id, transactional_id="t", producer_id=producer_id,
                          producer_epoch=epoch, transaction_timeout_ms=timeout, topics=[R.AcknowledgeTopic(
                              topic_id=topic_id, partitions=[R.AcknowledgePartition(
                                  partition_index=0, acknowledgement_batches=[
                                      R.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=ts)
                                      for f, la, ts in batches])])]),
                A(throttle_time_ms=0, error_code=0, error_message=None, responses=[A.TopicResponse(
                    topic_id=topic_id, partitions=[A.PartitionResponse(
                        partition_index=0, error_code=code, error_message=None,
                        current_leader=A.LeaderIdAndEpoch(leader_id=1, leader_epoch=2))])]))
