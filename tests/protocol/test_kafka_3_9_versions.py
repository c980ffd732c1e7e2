"""Versions Kafka 4.0 removed (KIP-896) that eoslog serves as Kafka 3.9 did (issue 41, item 6;
docs/clients.md): the list is explicit, the wire layout of each is Kafka 3.9's, and the handler answers
as Kafka 3.9's did."""

from __future__ import annotations

import struct

import pytest

from eoslog import api
from eoslog.api.list_offsets import EARLIEST, LATEST, legacy_offsets
from eoslog.protocol import codec, messages, schema
from eoslog.records import legacy
from eoslog.records.batch import decode_batches
from eoslog.records.builder import build_simple
from eoslog.records.compression import CompressionType
from eoslog.records.control import ControlType, build_control_batch

# Kafka 4.x's lowest version of each API (its ApiVersions), and the lower one eoslog serves instead.
KAFKA_4_LOWEST = {0: 3, 1: 4, 2: 1, 8: 2}
SERVED_LOWER = {0: 0, 1: 0, 2: 0, 8: 1}


def test_only_the_listed_versions_go_below_kafka_4():
    assert schema.KAFKA_39_LOWEST_VERSIONS == {
        "ListOffsetsRequest": 0, "ListOffsetsResponse": 0, "FetchRequest": 0, "FetchResponse": 0,
        "ProduceRequest": 0, "ProduceResponse": 0, "OffsetCommitRequest": 1, "OffsetCommitResponse": 1}
    for key, lowest in SERVED_LOWER.items():
        assert schema.request_spec(key).valid_versions.low == schema.response_spec(key).valid_versions.low == lowest
        assert lowest < KAFKA_4_LOWEST[key]
    served = {key: low for key, low, _ in api.APIS.values()}
    assert {key: served[key] for key in SERVED_LOWER} == SERVED_LOWER


def test_list_offsets_v0_wire_layout():
    """A v0 request as Kafka's protocol guide lays it out (what Sarama and librdkafka's 0.9 fallback send):
    ReplicaId, [Topic [Partition Timestamp MaxNumOffsets]]; the response's OldStyleOffsets array."""
    topic = b"lag"
    body = (struct.pack(">i", -1) + struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic
            + struct.pack(">i", 1) + struct.pack(">iqi", 3, -1, 1))
    client = b"sarama"
    frame = struct.pack(">hhih", 2, 0, 7, len(client)) + client + body
    header, request = codec.decode_request(frame)
    assert (header.api_key, header.api_version) == (2, 0)
    (wanted,) = request.topics[0].partitions
    assert (request.replica_id, request.topics[0].name) == (-1, "lag")
    assert (wanted.partition_index, wanted.timestamp, wanted.max_num_offsets) == (3, -1, 1)

    r = messages.ListOffsetsResponse
    response = r(topics=[r.ListOffsetsTopicResponse(name="lag", partitions=[r.ListOffsetsPartitionResponse(
        partition_index=3, error_code=0, old_style_offsets=[42, 0])])])
    encoded = b"".join(bytes(p) for p in codec.encode_response(header, response))
    assert encoded[4:] == (struct.pack(">i", 7) + struct.pack(">i", 1) + struct.pack(">h", 3) + b"lag"
                           + struct.pack(">i", 1) + struct.pack(">ih", 3, 0) + struct.pack(">iqq", 2, 42, 0))


def test_legacy_offsets_as_kafka_3_9_computes_them():
    # three segments (base, bytes, file time), the active one holding data; log end 30, high watermark 30
    segments = [(0, 100, 1_000), (10, 100, 2_000), (20, 50, 3_000)]

    def offsets(timestamp, count=1, high_watermark=30, log_start=0, of=segments):
        return legacy_offsets(of, log_start, 30, high_watermark, timestamp, count, 9_000)

    assert offsets(LATEST) == [30]
    assert offsets(LATEST, 10) == [30, 20, 10, 0]
    assert offsets(EARLIEST) == [0]
    assert offsets(EARLIEST, 10) == [0]
    assert offsets(EARLIEST, log_start=4) == [4]  # no lower than the log start
    assert offsets(2_500, 10) == [10, 0]  # segments whose files are no newer than the time
    assert offsets(500) == []
    assert offsets(LATEST, 0) == []
    assert offsets(LATEST, 2, high_watermark=25) == [25, 20]  # a consumer never sees past the watermark
    assert legacy_offsets([(0, 0, 1_000)], 0, 0, 0, LATEST, 1, 9_000) == [0]  # an empty log


def _messages(data: bytes) -> list:
    from kafka.record.memory_records import MemoryRecords

    records, found = MemoryRecords(data), []
    while (batch := records.next_batch()) is not None:
        found += [(batch.magic, m.offset, m.timestamp, m.timestamp_type, m.key, m.value, m.validate_crc())
                  for m in batch]
    return found


def test_old_message_sets_convert_up_to_one_v2_batch():
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    for magic, compression in ((0, 0), (0, 1), (1, 0), (1, 1)):  # none and gzip
        builder = LegacyRecordBatchBuilder(magic, compression, 1 << 20)
        for i in range(3):
            builder.append(i, 1_700_000_000_000 + i, b"k%d" % i if i else None, b"v%d" % i)
        data = bytes(builder.build())
        assert legacy.magic_of(data) == magic
        (batch,) = decode_batches(legacy.up_convert(data))
        timestamps = [1_700_000_000_000 + i for i in range(3)] if magic else [-1] * 3
        assert [(r.offset, r.timestamp, r.key, r.value) for r in batch.absolute_records()] == [
            (i, timestamps[i], b"k%d" % i if i else None, b"v%d" % i) for i in range(3)], (magic, compression)
    with pytest.raises(ValueError):
        legacy.up_convert(bytes(LegacyRecordBatchBuilder(1, 0, 1 << 20).build()))  # nothing in it
    damaged = bytearray(bytes(_one_message()))
    damaged[-1] ^= 0xFF
    with pytest.raises(ValueError, match="CRC"):
        legacy.up_convert(bytes(damaged))


def _one_message() -> bytes:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    builder.append(0, 5, b"k", b"v")
    return bytes(builder.build())


def test_v2_batches_convert_down_to_the_clients_format():
    data = (build_simple([(b"a", b"1"), (None, b"2")], base_offset=10, base_timestamp=1_000)
            + build_control_batch(ControlType.COMMIT, 9, 0, 0, base_offset=12)
            + build_simple([(b"c", b"3", [("h", b"x")])], base_offset=13, base_timestamp=2_000,
                           compression=CompressionType.GZIP, timestamp_type=1))
    assert legacy.magic_of(data) == 2
    assert _messages(legacy.down_convert(data, 0)) == [
        (0, 10, None, None, b"a", b"1", True), (0, 11, None, None, None, b"2", True),
        (0, 13, None, None, b"c", b"3", True)]  # no control record, no headers
    assert _messages(legacy.down_convert(data, 1)) == [
        (1, 10, 1_000, 0, b"a", b"1", True), (1, 11, 1_000, 0, None, b"2", True),
        (1, 13, 2_000, 1, b"c", b"3", True)]  # LogAppendTime kept in magic 1
