"""Wire bytes of the share-group client APIs (KIP-932, Kafka 4.2): ShareGroupHeartbeat (76),
ShareGroupDescribe (77), ShareFetch (78) and ShareAcknowledge (79).

No client here speaks these APIs yet, so each frame is written out by hand from Kafka's specs, field by
field: every version served is flexible, so strings and arrays are compact (uvarint length + 1, 0 for
null), each struct ends with its tagged-field section (00 when empty), and request headers are v2 (the
client id stays a plain int16-length string), response headers v1. The codec must read each frame as
the spec means it and write the same object back byte for byte; distinct values in neighbouring fields
make a wrong field order or type fail.
"""

from __future__ import annotations

import uuid

import pytest

from eoslog.protocol import RequestHeader, codec, messages
from eoslog.records.builder import SimpleRecord, build_batch

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC = TOPIC_ID.hex


def _sized(hex_text: str) -> bytes:
    body = bytes.fromhex(hex_text.replace(" ", ""))
    return len(body).to_bytes(4, "big") + body


def _request_header(api_key: int, version: int) -> str:
    # api key, api version, correlation id 7, client id "c" (int16 length), empty header tag section
    return f"{api_key:04x} {version:04x} 00000007 0001 63 00"


RESPONSE_HEADER = "00000007 00"  # correlation id 7, empty header tag section


def _check_request(frame: bytes, expected) -> None:
    header, request = codec.decode_request(frame[4:])
    assert header == RequestHeader(type(expected).API_KEY, header.api_version, 7, "c")
    assert request == expected
    assert codec.encode_request(header, expected) == frame


def _response_frame(api_key: int, version: int, response) -> bytes:
    return b"".join(bytes(p) for p in codec.encode_response(RequestHeader(api_key, version, 7, "c"), response))


def _check_response(api_key: int, version: int, frame: bytes, expected) -> None:
    assert _response_frame(api_key, version, expected) == frame
    correlation_id, decoded = codec.decode_response_frame(api_key, version, frame[4:])
    assert correlation_id == 7 and decoded == expected


# ShareGroupHeartbeat (76) ---------------------------------------------------------------------------

def test_share_group_heartbeat_v1_request_joins():
    frame = _sized(
        _request_header(76, 1)
        + "02 67"  # GroupId "g"
        + "03 6d31"  # MemberId "m1"
        + "00000000"  # MemberEpoch 0: join
        + "00"  # RackId null
        + "02 02 74"  # SubscribedTopicNames ["t"]
        + "00")  # tagged fields
    _check_request(frame, messages.ShareGroupHeartbeatRequest(
        group_id="g", member_id="m1", member_epoch=0, rack_id=None, subscribed_topic_names=["t"]))


def test_share_group_heartbeat_v1_response_with_and_without_an_assignment():
    m = messages.ShareGroupHeartbeatResponse
    assigned = m(throttle_time_ms=0, error_code=0, error_message=None, member_id="m1", member_epoch=5,
                 heartbeat_interval_ms=5000, assignment=m.Assignment(topic_partitions=[
                     m.TopicPartitions(topic_id=TOPIC_ID, partitions=[0, 1])]))
    head = (RESPONSE_HEADER
            + "00000000"  # ThrottleTimeMs
            + "0000"  # ErrorCode
            + "00"  # ErrorMessage null
            + "03 6d31"  # MemberId "m1"
            + "00000005"  # MemberEpoch 5
            + "00001388")  # HeartbeatIntervalMs 5000
    frame = _sized(head
                   + "01"  # Assignment present (a nullable struct is preceded by an int8: 1, or -1 for null)
                   + "02" + TOPIC + "03 00000000 00000001 00"  # TopicPartitions: 1 topic, partitions [0, 1], tags
                   + "00"  # the assignment's tags
                   + "00")  # tagged fields
    _check_response(76, 1, frame, assigned)
    assigned.assignment = None
    _check_response(76, 1, _sized(head + "ff" + "00"), assigned)


# ShareGroupDescribe (77) ----------------------------------------------------------------------------

def test_share_group_describe_v1_request():
    frame = _sized(_request_header(77, 1) + "02 02 67" + "01" + "00")  # GroupIds ["g"], include operations
    _check_request(frame, messages.ShareGroupDescribeRequest(group_ids=["g"], include_authorized_operations=True))


def test_share_group_describe_v1_response():
    m = messages.ShareGroupDescribeResponse
    member = m.Member(member_id="m1", rack_id=None, member_epoch=3, client_id="c", client_host="/127.0.0.1",
                      subscribed_topic_names=["t"], assignment=m.Assignment(topic_partitions=[
                          m.TopicPartitions(topic_id=TOPIC_ID, topic_name="t", partitions=[0])]))
    response = m(throttle_time_ms=0, groups=[m.DescribedGroup(
        error_code=0, error_message=None, group_id="g", group_state="Stable", group_epoch=3, assignment_epoch=2,
        assignor_name="simple", members=[member], authorized_operations=-(2**31))])
    frame = _sized(
        RESPONSE_HEADER
        + "00000000"  # ThrottleTimeMs
        + "02"  # 1 group
        + "0000 00 02 67"  # ErrorCode, ErrorMessage null, GroupId "g"
        + "07 537461626c65"  # GroupState "Stable"
        + "00000003 00000002"  # GroupEpoch 3, AssignmentEpoch 2
        + "07 73696d706c65"  # AssignorName "simple"
        + "02"  # 1 member
        + "03 6d31 00 00000003"  # MemberId "m1", RackId null, MemberEpoch 3
        + "02 63 0b 2f3132372e302e302e31"  # ClientId "c", ClientHost "/127.0.0.1"
        + "02 02 74"  # SubscribedTopicNames ["t"]
        + "02" + TOPIC + "02 74 02 00000000 00"  # Assignment (not nullable: no marker): 1 topic "t", [0]
        + "00"  # the assignment's tags
        + "00"  # the member's tags
        + "80000000"  # AuthorizedOperations INT32_MIN: not asked for
        + "00"  # the group's tags
        + "00")  # tagged fields
    _check_response(77, 1, frame, response)


# ShareFetch (78) ------------------------------------------------------------------------------------

def _share_fetch_request() -> messages.ShareFetchRequest:
    m = messages.ShareFetchRequest
    return m(group_id="g", member_id="m1", share_session_epoch=1, max_wait_ms=500, min_bytes=1,
             max_bytes=0x7FFFFFFF, max_records=400, batch_size=100, share_acquire_mode=1, is_renew_ack=False,
             topics=[m.FetchTopic(topic_id=TOPIC_ID, partitions=[m.FetchPartition(
                 partition_index=0, acknowledgement_batches=[m.AcknowledgementBatch(
                     first_offset=10, last_offset=12, acknowledge_types=[1, 2, 3])])])],
             forgotten_topics_data=[m.ForgottenTopic(topic_id=TOPIC_ID, partitions=[4])])


def _share_fetch_request_hex(version: int) -> str:
    return (_request_header(78, version)
            + "02 67"  # GroupId "g" (nullable)
            + "03 6d31"  # MemberId "m1"
            + "00000001"  # ShareSessionEpoch 1
            + "000001f4"  # MaxWaitMs 500
            + "00000001"  # MinBytes 1
            + "7fffffff"  # MaxBytes
            + "00000190"  # MaxRecords 400 (v1+)
            + "00000064"  # BatchSize 100 (v1+)
            + ("01" "00" if version >= 2 else "")  # ShareAcquireMode 1 record-limit, IsRenewAck false (v2+)
            + "02" + TOPIC  # 1 topic
            + "02 00000000"  # 1 partition: index 0
            + "02 000000000000000a 000000000000000c"  # 1 acknowledgement batch: offsets 10..12
            + "04 01 02 03"  # AcknowledgeTypes [accept, release, reject]
            + "00 00 00"  # tags of the batch, the partition, the topic
            + "02" + TOPIC + "02 00000004 00"  # ForgottenTopicsData: 1 topic, partitions [4], tags
            + "00")  # tagged fields


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_request(version):
    request = _share_fetch_request()
    if version == 1:  # v1 has neither: a decoded v1 request keeps their defaults
        request.share_acquire_mode, request.is_renew_ack = 0, False
    frame = _sized(_share_fetch_request_hex(version))
    _check_request(frame, request)


def test_share_fetch_v2_request_renewing_locks():
    m = messages.ShareFetchRequest
    request = m(group_id="g", member_id="m1", share_session_epoch=2, max_wait_ms=0, min_bytes=0, max_bytes=0,
                max_records=0, batch_size=0, share_acquire_mode=0, is_renew_ack=True,
                topics=[m.FetchTopic(topic_id=TOPIC_ID, partitions=[m.FetchPartition(
                    partition_index=0, acknowledgement_batches=[m.AcknowledgementBatch(
                        first_offset=7, last_offset=7, acknowledge_types=[4])])])])
    frame = _sized(_request_header(78, 2) + "02 67 03 6d31 00000002" + "00000000" * 5 + "00 01"
                   + "02" + TOPIC + "02 00000000 02 0000000000000007 0000000000000007 02 04 00 00 00"
                   + "01 00")  # no forgotten topics, tagged fields
    _check_request(frame, request)


def _batch() -> bytes:
    return build_batch([SimpleRecord(b"k", b"v")], base_offset=10, base_timestamp=1_700_000_000_000)


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_response(version):
    m = messages.ShareFetchResponse
    batch = _batch()
    assert len(batch) < 127  # one byte of compact length
    response = m(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=30000,
                 responses=[m.ShareFetchableTopicResponse(topic_id=TOPIC_ID, partitions=[m.PartitionData(
                     partition_index=0, error_code=0, error_message=None, acknowledge_error_code=0,
                     acknowledge_error_message=None, current_leader=m.LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
                     records=batch, acquired_records=[m.AcquiredRecords(first_offset=10, last_offset=10,
                                                                          delivery_count=1)])])])
    frame = _sized(
        RESPONSE_HEADER
        + "00000000 0000 00"  # ThrottleTimeMs, ErrorCode, ErrorMessage null
        + "00007530"  # AcquisitionLockTimeoutMs 30000 (v1+)
        + "02" + TOPIC  # 1 topic
        + "02 00000000"  # 1 partition: index 0
        + "0000 00"  # ErrorCode, ErrorMessage null
        + "0000 00"  # AcknowledgeErrorCode, AcknowledgeErrorMessage null
        + "00000001 00000003 00"  # CurrentLeader: id 1, epoch 3, tags
        + f"{len(batch) + 1:02x}" + batch.hex()  # Records (compact bytes, never null from v1)
        + "02 000000000000000a 000000000000000a 0001 00"  # AcquiredRecords: 10..10, delivered once, tags
        + "00 00"  # tags of the partition, the topic
        + "01"  # NodeEndpoints: none
        + "00")  # tagged fields
    _check_response(78, version, frame, response)
    decoded = codec.decode_response(78, version, frame[4:])
    assert bytes(decoded.responses[0].partitions[0].records) == batch


def test_share_fetch_response_partition_without_records_sends_an_empty_record_set():
    """Records became non-nullable in v1: a partition whose records are left unset must go out as an empty
    set (compact length 0: 01), never as null (00), which Kafka's clients refuse to read."""
    m = messages.ShareFetchResponse
    partition = m.PartitionData(partition_index=2, error_code=6)
    assert partition.records == b""
    frame = _response_frame(78, 1, m(responses=[m.ShareFetchableTopicResponse(topic_id=TOPIC_ID,
                                                                             partitions=[partition])]))
    leader_and_records = "00000000 00000000 00" + "01" + "01"  # leader 0/0 (no -1 defaults here), empty records, none acquired
    assert frame.hex().endswith(("00000002 0006 00 0000 00" + leader_and_records + "00 00 01 00").replace(" ", ""))
    partition.records = None
    with pytest.raises(ValueError, match="null"):
        _response_frame(78, 1, m(responses=[m.ShareFetchableTopicResponse(partitions=[partition])]))


# ShareAcknowledge (79) ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 2])
def test_share_acknowledge_request(version):
    m = messages.ShareAcknowledgeRequest
    renew = version >= 2
    request = m(group_id="g", member_id="m1", share_session_epoch=2, is_renew_ack=renew,
                topics=[m.AcknowledgeTopic(topic_id=TOPIC_ID, partitions=[m.AcknowledgePartition(
                    partition_index=3, acknowledgement_batches=[m.AcknowledgementBatch(
                        first_offset=5, last_offset=6, acknowledge_types=[4, 4] if renew else [1, 3])])])])
    frame = _sized(
        _request_header(79, version)
        + "02 67 03 6d31"  # GroupId "g", MemberId "m1"
        + "00000002"  # ShareSessionEpoch 2
        + ("01" if renew else "")  # IsRenewAck (v2+)
        + "02" + TOPIC  # 1 topic
        + "02 00000003"  # 1 partition: index 3
        + "02 0000000000000005 0000000000000006"  # 1 acknowledgement batch: offsets 5..6
        + ("03 04 04" if renew else "03 01 03")  # AcknowledgeTypes, one per offset
        + "00 00 00"  # tags of the batch, the partition, the topic
        + "00")  # tagged fields
    _check_request(frame, request)


@pytest.mark.parametrize("version", [1, 2])
def test_share_acknowledge_response(version):
    m = messages.ShareAcknowledgeResponse
    response = m(throttle_time_ms=0, error_code=0, error_message=None,
                 acquisition_lock_timeout_ms=30000 if version >= 2 else 0,
                 responses=[m.ShareAcknowledgeTopicResponse(topic_id=TOPIC_ID, partitions=[m.PartitionData(
                     partition_index=3, error_code=0, error_message=None,
                     current_leader=m.LeaderIdAndEpoch(leader_id=1, leader_epoch=4))])],
                 node_endpoints=[m.NodeEndpoint(node_id=1, host="h1", port=9092, rack=None)])
    frame = _sized(
        RESPONSE_HEADER
        + "00000000 0000 00"  # ThrottleTimeMs, ErrorCode, ErrorMessage null
        + ("00007530" if version >= 2 else "")  # AcquisitionLockTimeoutMs (v2+)
        + "02" + TOPIC  # 1 topic
        + "02 00000003 0000 00"  # 1 partition: index 3, ErrorCode, ErrorMessage null
        + "00000001 00000004 00"  # CurrentLeader: id 1, epoch 4, tags
        + "00 00"  # tags of the partition, the topic
        + "02 00000001 03 6831 00002384 00 00"  # NodeEndpoints: node 1 "h1":9092, rack null, tags
        + "00")  # tagged fields
    _check_response(79, version, frame, response)
