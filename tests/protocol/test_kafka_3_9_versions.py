"""Versions Kafka 4.0 removed (KIP-896) that eoslog serves as Kafka 3.9 did (issue 41, item 6;
docs/clients.md): the list is explicit, the wire layout of each is Kafka 3.9's, and the handler answers
as Kafka 3.9's did."""

from __future__ import annotations

import struct

from eoslog import api
from eoslog.api.list_offsets import EARLIEST, LATEST, legacy_offsets
from eoslog.protocol import codec, messages, schema

# Kafka 4.x's lowest version of each API (its ApiVersions), and the lower one eoslog serves instead.
KAFKA_4_LOWEST = {2: 1}
SERVED_LOWER = {2: 0}


def test_only_the_listed_versions_go_below_kafka_4():
    assert schema.KAFKA_39_LOWEST_VERSIONS == {"ListOffsetsRequest": 0, "ListOffsetsResponse": 0}
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
