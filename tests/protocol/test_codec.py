"""The public codec API: headers, errors, frames made of pieces, tagged fields only when not default."""

from __future__ import annotations

import os
import struct
import uuid

import pytest

from eoslog.log.region import FileRegion
from eoslog.protocol import (
    InvalidRequest,
    RecordsList,
    RequestHeader,
    UnknownApiKey,
    UnsupportedVersion,
    codec,
    decode_request,
    encode_request,
    encode_response,
    messages,
    wire,
)
from eoslog.protocol.errors import ErrorCode


def _header(api_key, version, correlation_id=1, client_id="c") -> bytes:
    cid = client_id.encode()
    return struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid


def test_request_header_v2_skips_tagged_fields_and_client_id_stays_non_compact():
    # ApiVersions v3 is flexible: header v2 = v1 + a tagged section (here one unknown tag, skipped).
    body = b"\x05eos1\x02v\x00"  # compact strings client_software_name/version, empty tagged section
    frame = _header(18, 3, 9, "my-client") + b"\x01\x07\x02ab" + body
    header, request = decode_request(frame)
    assert header == RequestHeader(18, 3, 9, "my-client")
    assert (request.client_software_name, request.client_software_version) == ("eos1", "v")


def test_null_client_id():
    frame = struct.pack(">hhih", 18, 0, 3, -1)
    header, _ = decode_request(frame)
    assert header.client_id is None
    assert encode_request(header, messages.ApiVersionsRequest())[4:] == frame


def test_unknown_api_key():
    with pytest.raises(UnknownApiKey) as info:
        decode_request(_header(999, 0, 5))
    assert (info.value.api_key, info.value.correlation_id) == (999, 5)
    assert isinstance(info.value, InvalidRequest) and info.value.code == ErrorCode.INVALID_REQUEST


# below the lowest version: OffsetCommit v0 and OffsetFetch v0, whose offsets Kafka 3.9 kept in ZooKeeper
# (Produce v0-v2, Fetch v0-v3 and OffsetCommit v1 are served as Kafka 3.9 served them:
# tests/protocol/test_kafka_3_9_versions.py)
@pytest.mark.parametrize("api_key,version", [(8, 0), (0, 14), (9, 0), (18, 5), (18, -1), (3, 200)])
def test_unsupported_version_carries_the_header(api_key, version):
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(_header(api_key, version, 31, "kp") + b"\x00garbage")
    error = info.value
    assert (error.api_key, error.version) == (api_key, version)
    assert error.header == RequestHeader(api_key, version, 31, "kp")
    assert error.code == ErrorCode.UNSUPPORTED_VERSION


def test_dispatcher_can_answer_a_too_new_api_versions_request():
    try:
        decode_request(_header(18, 9, 1234, "kafka-python") + b"\x00")
    except UnsupportedVersion as error:
        reply = codec.encode_api_versions_fallback(error.header.correlation_id, {18: (0, 3)})
    assert reply == bytes.fromhex("00000010" "000004d2" "0023" "00000001" "0012" "0000" "0003")


@pytest.mark.parametrize("frame,message", [
    (b"", "shorter than the 10-byte header"),
    (b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x09abc", "client_id length 9"),
    (_header(0, 3) + b"\xff\xff\x00\x01\x00\x00\x00\x10\x00\x00\x00\x05", "ProduceRequest.TopicData"),
    (_header(0, 3) + b"\xff\xff\x00\x01\x00\x00\x00\x10\xff\xff\xff\xff", "null"),
    (_header(0, 9) + b"\x00", "malformed ProduceRequest v9"),
    (_header(3, 4) + b"\x00\x00\x00\x01\x00\x02\xff\xfe\x01", "malformed MetadataRequest v4.*utf-8"),
])
def test_malformed_requests_raise_invalid_request_with_a_precise_message(frame, message):
    with pytest.raises(InvalidRequest, match=message.replace("(", r"\(")) as info:
        decode_request(frame)
    assert isinstance(info.value, ValueError)


def test_trailing_bytes_after_a_complete_body_are_ignored_as_kafka_does():
    # librdkafka 2.16 sends 3 bytes past the end of a Metadata v12 body; Kafka's broker reads on.
    header, request = decode_request(_header(18, 0, 4) + b"\x00\x01\x02")
    assert header.correlation_id == 4 and request == messages.ApiVersionsRequest()


def test_records_decode_to_zero_copy_slices_of_the_frame():
    m = messages.ProduceRequest
    request = m(acks=1, timeout_ms=5, topic_data=[m.TopicProduceData(
        name="t", partition_data=[m.PartitionProduceData(index=0, records=b"R" * 100)])])
    frame = bytearray(encode_request(RequestHeader(0, 7, 1, "c"), request)[4:])
    _, decoded = decode_request(frame)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame
    frame[-1:] = b"Z"  # a view, not a copy
    assert bytes(records[-1:]) == b"Z"


def _fetch_response(records) -> messages.FetchResponse:
    m = messages.FetchResponse
    return m(responses=[m.FetchableTopicResponse(topic="t", topic_id=uuid.UUID(int=7), partitions=[
        m.PartitionData(partition_index=0, high_watermark=5, records=records)])])


def _join(pieces) -> bytes:
    out = b""
    for piece in pieces:
        if isinstance(piece, FileRegion):
            out += os.pread(piece.fd, piece.length, piece.position)
        else:
            out += bytes(piece)
    return out


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_records_list_with_file_regions_becomes_separate_pieces(tmp_path, version):
    data = os.urandom(20000)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        region_a, region_b = FileRegion(fd, 100, 8000), FileRegion(fd, 9000, 50)
        pieces_in = RecordsList([b"head", region_a, memoryview(data)[:5000], region_b])
        expected_records = b"head" + data[100:8100] + data[:5000] + data[9000:9050]
        header = RequestHeader(1, version, 3, "c")
        pieces = encode_response(header, _fetch_response(pieces_in))
        assert region_a in pieces and region_b in pieces  # passed through, never read
        assert sum(1 for p in pieces if isinstance(p, FileRegion)) == 2
        frame = _join(pieces)
        assert frame == _join(encode_response(header, _fetch_response(expected_records)))
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        decoded = codec.decode_response(1, version, frame[4:])
        assert bytes(decoded.responses[0].partitions[0].records) == expected_records
    finally:
        os.close(fd)


def test_big_records_buffer_is_not_copied_small_one_is():
    big = memoryview(bytearray(wire.INLINE_RECORDS_MAX))
    pieces = encode_response(RequestHeader(1, 12, 3, "c"), _fetch_response(big))
    assert any(p is big for p in pieces)
    small = b"s" * 10
    pieces = encode_response(RequestHeader(1, 12, 3, "c"), _fetch_response(small))
    assert len(pieces) == 1


def test_default_tagged_fields_are_not_written():
    m = messages.FetchResponse
    plain = _fetch_response(b"abc")
    defaults = _fetch_response(b"abc")
    partition = defaults.responses[0].partitions[0]
    partition.diverging_epoch = m.EpochEndOffset()  # equal to the defaults, not the same objects
    partition.current_leader = m.LeaderIdAndEpoch()
    defaults.node_endpoints = []
    for version in range(12, 17):
        header = RequestHeader(1, version, 3, "c")
        assert _join(encode_response(header, defaults)) == _join(encode_response(header, plain))
        assert _join(encode_response(header, plain)).endswith(b"abc\x00\x00\x00")  # three empty sections
    # ApiVersions v3 has tagged fields at the top level (supported features, ...): none set, none
    # written -- what librdkafka before 2.2 (kcat here) is answered with, as it cannot skip them.
    response = messages.ApiVersionsResponse(api_keys=[messages.ApiVersionsResponse.ApiVersion(
        api_key=0, min_version=3, max_version=10)])
    frame = _join(encode_response(RequestHeader(18, 3, 9, "c"), response))
    # size, correlation id (response header v0 for ApiVersions), error, 1 key, throttle, empty tags
    assert frame == bytes.fromhex("00000013" "00000009" "0000" "02" "0000000300 0a00" "00000000" "00".replace(" ", ""))


def test_api_versions_features_are_written_as_tagged_fields():
    # KIP-584 features (transaction.version, KIP-890): each set field as (tag, size, value) in tag order.
    response = messages.ApiVersionsResponse(api_keys=[messages.ApiVersionsResponse.ApiVersion(
        api_key=0, min_version=3, max_version=10)])
    response.supported_features = [messages.ApiVersionsResponse.SupportedFeatureKey(name="x", min_version=1,
                                                                                     max_version=2)]
    response.finalized_features_epoch = 5
    frame = _join(encode_response(RequestHeader(18, 3, 9, "c"), response))
    assert frame == bytes.fromhex(
        "00000027" "00000009" "0000" "02" "00000003000a00" "00000000"
        "02"  # two tagged fields
        "00" "08" "02" "0278" "0001" "0002" "00"  # tag 0 SupportedFeatures: [x 1..2]
        "01" "08" "0000000000000005")  # tag 1 FinalizedFeaturesEpoch
    assert codec.decode_response(18, 3, frame[4:]) == response


def test_tagged_fields_are_written_when_not_default():
    """KIP-951's leader hint in a Fetch v16 response, byte for byte as Kafka lays it out (tag, size,
    struct), and read back by our decoder and by kafka-python's."""
    m = messages.FetchResponse
    response = _fetch_response(b"abc")
    response.responses[0].partitions[0].error_code = 6
    response.responses[0].partitions[0].current_leader = m.LeaderIdAndEpoch(leader_id=2, leader_epoch=7)
    response.node_endpoints = [m.NodeEndpoint(node_id=2, host="h2", port=9092, rack=None)]
    frame = _join(encode_response(RequestHeader(1, 16, 3, "c"), response))
    partition_tags = "01" "01" "09" "00000002" "00000007" "00"  # 1 field: tag 1, 9 bytes, LeaderIdAndEpoch
    endpoints = "01" "00" "0e" "02" "00000002" "036832" "00002384" "00" "00"  # tag 0, 14 bytes, 1 endpoint
    assert frame.endswith(bytes.fromhex("04616263" + partition_tags + "00" + endpoints))
    decoded = codec.decode_response(1, 16, frame[4:])
    assert decoded.node_endpoints == response.node_endpoints
    assert decoded.responses[0].partitions[0].current_leader == m.LeaderIdAndEpoch(leader_id=2, leader_epoch=7)
    from kafka.protocol.consumer import FetchResponse as KpFetchResponse

    kp = KpFetchResponse.decode(frame[4 + 4 + 1:], version=16)  # after size, correlation id, header tags
    assert kp.node_endpoints[0].host == "h2"
    assert kp.responses[0].partitions[0].current_leader.leader_id == 2


def test_response_header_v1_has_an_empty_tagged_section():
    frame = _join(encode_response(RequestHeader(3, 12, 8, "c"), messages.MetadataResponse()))
    assert frame[4:9] == b"\x00\x00\x00\x08\x00"
    frame = _join(encode_response(RequestHeader(3, 8, 8, "c"), messages.MetadataResponse()))
    assert frame[4:9] == b"\x00\x00\x00\x08\x00"  # v8: throttle_time_ms (0) right after the correlation id
    assert len(frame) == 4 + 4 + 4 + 4 + 2 + 4 + 4 + 4  # corr, throttle, brokers, cluster_id null, controller, topics, authorized ops


def test_encode_response_rejects_the_wrong_message_class():
    with pytest.raises(TypeError, match="FetchResponse"):
        encode_response(RequestHeader(1, 12, 1, "c"), messages.ProduceResponse())


def test_encode_response_reports_bad_values():
    response = messages.ProduceResponse(throttle_time_ms=2**40)
    with pytest.raises(ValueError, match="ProduceResponse v9"):
        encode_response(RequestHeader(0, 9, 1, "c"), response)


def test_message_classes_follow_the_naming_rule():
    m = messages.FetchResponse
    assert m.FetchableTopicResponse.PartitionData is m.PartitionData
    assert m.PartitionData is not messages.DescribeQuorumResponse.PartitionData  # same name, other message
    assert messages.FetchRequest.FetchTopic.FetchPartition is messages.FetchRequest.FetchPartition
    assert m.PartitionData.__qualname__ == "FetchResponse.PartitionData"
    p = m.PartitionData()
    assert (p.last_stable_offset, p.log_start_offset, p.preferred_read_replica, p.records) == (-1, -1, -1, None)
    assert p.aborted_transactions == [] and p.current_leader == m.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert m().responses == [] and m().responses is not m().responses
    r = messages.ProduceRequest()
    assert r.transactional_id is None and r.topic_data == []
    assert messages.ProduceRequest.API_KEY == 0 and str(messages.ProduceRequest.VALID_VERSIONS) == "0-13"  # v0-v2: Kafka 3.9's
    assert "FetchRequest" in dir(messages)
    with pytest.raises(AttributeError):
        _ = messages.NoSuchRequest
    with pytest.raises(AttributeError):
        p.not_a_field = 1  # __slots__
    with pytest.raises(TypeError):
        m.PartitionData(3)  # keyword-only


@pytest.mark.parametrize("version", range(13))
def test_a_frozen_array_encodes_to_the_same_bytes_as_a_list_every_time(version):
    # Metadata keeps one FrozenArray per topic shape: its cached bytes must be what a plain list gives,
    # for every version, including after another version's bytes were cached on the same array.
    partition = messages.MetadataResponse.MetadataResponsePartition
    items = [partition(error_code=0, partition_index=i, leader_id=0, leader_epoch=3, replica_nodes=[0, i],
                       isr_nodes=[0], offline_replicas=[]) for i in range(5)]
    frozen = wire.FrozenArray(items)

    def encode(partitions, v):
        topic = messages.MetadataResponse.MetadataResponseTopic(
            error_code=0, name="t", topic_id=uuid.UUID(int=7), is_internal=False, partitions=partitions,
            topic_authorized_operations=-(2**31))
        response = messages.MetadataResponse(
            throttle_time_ms=0, brokers=[], cluster_id="c", controller_id=0, topics=[topic],
            cluster_authorized_operations=-(2**31), error_code=0)
        return b"".join(encode_response(RequestHeader(3, v, 5, "c"), response))

    encode(frozen, 12 if version != 12 else 0)  # another version's bytes cached first
    expected = encode(list(items), version)
    assert encode(frozen, version) == expected  # first use: encoded and kept
    assert encode(frozen, version) == expected  # second use: the kept bytes
    assert len(frozen.encoded) == 2


def test_message_classes_are_built_once_when_threads_race(monkeypatch):
    """Threads asking at once for a not-yet-built message class all get the same class (eoslog.client.checkback's
    poll thread met a second FindCoordinatorRequest class that the codec then refused)."""
    import functools
    import threading

    from eoslog.protocol import messages

    for _ in range(5):
        # A fresh cache, so the race is on a class nobody has built, and the real cache stays as it is.
        monkeypatch.setattr(messages, "_message_class", functools.cache(messages._message_class.__wrapped__))
        barrier = threading.Barrier(8)
        got = []

        def build(barrier=barrier, got=got):
            barrier.wait()
            got.append(messages.message_class("DescribeTransactionsRequest"))

        threads = [threading.Thread(target=build) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len({id(cls) for cls in got}) == 1
