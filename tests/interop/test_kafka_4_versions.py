"""The request versions added for what current clients send (docs/clients.md), each with request bytes
as a client encodes them (kafka-python 3.0.12's codec, generated independently from Kafka's specs),
decoded and re-encoded by ours, then sent to a real broker over TCP; and their edge cases.

DescribeTopicPartitions (75 v0): paging by partition count with a cursor. ListOffsets v8-v10: the
tiered-storage specs on a log without tiers, max timestamp of an empty partition. Fetch v13-v16: topics
by id, UNKNOWN_TOPIC_ID. Produce v13: topics by id too. Metadata v13. Telemetry (71/72) not advertised, as Kafka 4.x without a
metrics plugin."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

from eoslog import api
from eoslog.client.connection import BrokerConnection
from eoslog.protocol import codec, messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop

# DescribeTopicPartitions v0 body: topics ["audit-a", "audit-b"], ResponsePartitionLimit 1, Cursor
# ("audit-a", 1) -- kafka-python 3.0.12's DescribeTopicPartitionsRequest(...).encode(), recorded once.
DTP_BODY = bytes.fromhex("03" "08" "61756469742d61" "00" "08" "61756469742d62" "00" "00000001"
                         "01" "08" "61756469742d61" "00000001" "00" "00")
DTP = messages.DescribeTopicPartitionsRequest
DTP_REQUEST = DTP(topics=[DTP.TopicRequest(name="audit-a"), DTP.TopicRequest(name="audit-b")],
                  response_partition_limit=1, cursor=DTP.Cursor(topic_name="audit-a", partition_index=1))
TOPICS = {"audit-a": 3, "audit-b": 2, "audit-c": 1, "audit-empty": 1}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("audit")) as running:
        wire = BrokerConnection.from_bootstrap(running.bootstrap)
        c = messages.CreateTopicsRequest
        wire.request(19, 7, c(timeout_ms=10000, topics=[c.CreatableTopic(name=name, num_partitions=n, replication_factor=1)
                                                     for name, n in TOPICS.items()]))
        p = messages.ProduceRequest
        timestamps = [1000, 5000, 3000]  # max timestamp 5000 at offset 1
        for ts in timestamps:
            wire.request(0, 9, p(acks=-1, timeout_ms=10000, topic_data=[p.TopicProduceData(name="audit-a", partition_data=[
                p.PartitionProduceData(index=0, records=_batch(ts))])]))
        wire.close()
        yield running


def _batch(timestamp: int) -> bytes:
    from eoslog.records.builder import SimpleRecord, build_batch

    return build_batch([SimpleRecord(None, b"v%d" % timestamp, ())], base_timestamp=timestamp)


def call(broker, api_key: int, version: int, request):
    wire = BrokerConnection.from_bootstrap(broker.bootstrap)
    try:
        return wire.request(api_key, version, request)
    finally:
        wire.close()


def raw(broker, frame_body: bytes, api_key: int, version: int) -> bytes:
    """Sends a request body exactly as given (behind a header v2), returns the response frame."""
    client_id = b"audit"
    header = struct.pack(">hhih", api_key, version, 77, len(client_id)) + client_id + b"\x00"
    host, _, port = broker.bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(frame_body)) + header + frame_body)
        size = struct.unpack(">i", _read(sock, 4))[0]
        return _read(sock, size)


def _read(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


# ---- DescribeTopicPartitions ---------------------------------------------------------------------------


def test_describe_topic_partitions_bytes_round_trip():
    from kafka.protocol.admin import DescribeTopicPartitionsRequest as Theirs

    theirs = Theirs(topics=[Theirs.TopicRequest(name="audit-a"), Theirs.TopicRequest(name="audit-b")],
                    response_partition_limit=1, cursor=Theirs.Cursor(topic_name="audit-a", partition_index=1),
                    version=0)
    assert theirs.encode() == DTP_BODY
    decoded, end = codec.generated_decoder("request", 75, 0)(memoryview(DTP_BODY), 0, len(DTP_BODY))
    assert decoded == DTP_REQUEST and end == len(DTP_BODY)
    out = bytearray()
    codec.generated_encoder("request", 75, 0)(DTP_REQUEST, out, [])
    assert bytes(out) == DTP_BODY


def test_describe_topic_partitions_captured_request_pages_from_the_cursor(broker):
    frame = raw(broker, DTP_BODY, 75, 0)
    assert frame[:4] == struct.pack(">i", 77)
    response = codec.decode_response(75, 0, frame)
    # From the cursor: audit-a's partition 1 only (limit 1), then the cursor points at its partition 2.
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics] == [("audit-a", [1])]
    assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("audit-a", 2)
    (topic,) = response.topics
    assert topic.error_code == 0 and topic.topic_id != uuid.UUID(int=0) and not topic.is_internal
    (partition,) = topic.partitions
    assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (0, [0], [0])
    assert partition.eligible_leader_replicas == [] and partition.last_known_elr == []
    assert topic.topic_authorized_operations > 0  # no authorizer: every topic operation


def test_describe_topic_partitions_walk_with_limit_one_visits_every_partition_once(broker):
    seen, cursor, calls = [], None, 0
    while True:
        response = call(broker, 75, 0, DTP(topics=[], response_partition_limit=1, cursor=cursor))
        calls += 1
        seen += [(t.name, p.partition_index) for t in response.topics for p in t.partitions]
        if response.next_cursor is None:
            break
        cursor = DTP.Cursor(topic_name=response.next_cursor.topic_name,
                            partition_index=response.next_cursor.partition_index)
    expected = [(name, i) for name in sorted(TOPICS) for i in range(TOPICS[name])]
    assert [s for s in seen if s[0].startswith("audit-")] == expected
    assert calls >= len(expected)


def test_describe_topic_partitions_errors(broker):
    response = call(broker, 75, 0, DTP(topics=[DTP.TopicRequest(name="audit-nope"), DTP.TopicRequest(name="bad/name"),
                                               DTP.TopicRequest(name="audit-c")]))
    assert [(t.name, t.error_code, t.topic_id) for t in response.topics] == [
        ("audit-c", 0, response.topics[0].topic_id),
        ("audit-nope", int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), uuid.UUID(int=0)),
        ("bad/name", int(ErrorCode.INVALID_TOPIC_EXCEPTION), uuid.UUID(int=0)),
    ]
    assert response.next_cursor is None
    # A cursor on a topic the request does not name: the whole request is invalid (Kafka's answer).
    refused = call(broker, 75, 0, DTP(topics=[DTP.TopicRequest(name="audit-c")],
                                      cursor=DTP.Cursor(topic_name="audit-b", partition_index=0)))
    assert [(t.name, t.error_code) for t in refused.topics] == [("audit-c", int(ErrorCode.INVALID_REQUEST))]


def test_describe_topic_partitions_limit_used_up_exactly_points_at_the_next_topic(broker):
    response = call(broker, 75, 0, DTP(topics=[DTP.TopicRequest(name="audit-b"), DTP.TopicRequest(name="audit-c")],
                                       response_partition_limit=2))
    assert [(t.name, len(t.partitions)) for t in response.topics] == [("audit-b", 2)]
    assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("audit-c", 0)


# ---- ListOffsets v8-v10 ------------------------------------------------------------------------------


def list_offsets(broker, version: int, topic: str, timestamps: list[int]) -> list[tuple[int, int, int, int]]:
    m = messages.ListOffsetsRequest
    response = call(broker, 2, version, m(replica_id=-1, isolation_level=1, timeout_ms=1000, topics=[m.ListOffsetsTopic(
        name=topic, partitions=[m.ListOffsetsPartition(partition_index=0, timestamp=t) for t in timestamps])]))
    return [(p.error_code, p.timestamp, p.offset, p.leader_epoch) for p in response.topics[0].partitions]


def test_list_offsets_v10_special_timestamps(broker):
    latest, earliest, max_ts, earliest_local, latest_tiered = list_offsets(broker, 10, "audit-a", [-1, -2, -3, -4, -5])
    assert latest == (0, -1, 3, 0) and earliest == (0, -1, 0, 0)
    assert max_ts == (0, 5000, 1, 0)
    assert earliest_local == earliest  # the whole log is local
    assert latest_tiered == (0, -1, -1, -1)  # nothing tiered: Kafka's answer without remote storage


def test_list_offsets_max_timestamp_of_an_empty_partition(broker):
    for version in (7, 10):
        assert list_offsets(broker, version, "audit-empty", [-3]) == [(0, -1, -1, -1)]


# ---- Fetch v13-v16 (topic ids) and Metadata v13 -------------------------------------------------------


def topic_ids(broker) -> dict[str, uuid.UUID]:
    m = messages.MetadataRequest
    response = call(broker, 3, 13, m(topics=None, allow_auto_topic_creation=False))
    assert response.error_code == 0
    return {t.name: t.topic_id for t in response.topics}


@pytest.mark.parametrize("version", [13, 16, 18])
def test_fetch_by_topic_id(broker, version):
    ids = topic_ids(broker)
    unknown = uuid.uuid4()
    f = messages.FetchRequest
    response = call(broker, 1, version, f(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        f.FetchTopic(topic_id=ids["audit-a"], partitions=[f.FetchPartition(partition=0, fetch_offset=1,
                                                                            partition_max_bytes=1 << 20)]),
        f.FetchTopic(topic_id=unknown, partitions=[f.FetchPartition(partition=0, partition_max_bytes=1 << 20)])]))
    known, missing = response.responses
    assert known.topic_id == ids["audit-a"] and missing.topic_id == unknown
    assert known.partitions[0].error_code == 0 and known.partitions[0].high_watermark == 3
    assert b"v5000" in bytes(known.partitions[0].records) and b"v1000" not in bytes(known.partitions[0].records)
    assert missing.partitions[0].error_code == int(ErrorCode.UNKNOWN_TOPIC_ID)
    assert response.node_endpoints == []  # nothing refused as NOT_LEADER: no endpoints


def test_produce_v13_by_topic_id(broker):
    ids = topic_ids(broker)
    unknown = uuid.uuid4()
    p = messages.ProduceRequest
    response = call(broker, 0, 13, p(acks=-1, timeout_ms=10000, topic_data=[
        p.TopicProduceData(topic_id=ids["audit-c"], partition_data=[p.PartitionProduceData(index=0, records=_batch(7))]),
        p.TopicProduceData(topic_id=unknown, partition_data=[p.PartitionProduceData(index=0, records=_batch(8))])]))
    known, missing = response.responses
    assert known.topic_id == ids["audit-c"] and missing.topic_id == unknown
    assert (known.partition_responses[0].error_code, known.partition_responses[0].base_offset) == (0, 0)
    assert missing.partition_responses[0].error_code == int(ErrorCode.UNKNOWN_TOPIC_ID)
    f = messages.FetchRequest
    fetched = call(broker, 1, 18, f(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        f.FetchTopic(topic_id=ids["audit-c"], partitions=[f.FetchPartition(partition=0, partition_max_bytes=1 << 20)])]))
    (partition,) = fetched.responses[0].partitions
    assert partition.high_watermark == 1 and b"v7" in bytes(partition.records)


# ---- What is advertised --------------------------------------------------------------------------------


def test_advertised_versions_of_the_audited_apis(broker):
    """The contract with clients (docs/clients.md): changed deliberately, never by accident."""
    response = call(broker, 18, 3, messages.ApiVersionsRequest(client_software_name="audit",
                                                                client_software_version="1"))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == api.supported_versions()
    assert {key: advertised[key] for key in (0, 1, 2, 3, 75)} == {
        0: (0, 13), 1: (0, 18), 2: (0, 10), 3: (0, 13), 75: (0, 0)}  # v0: Kafka 3.9's (issue 41)
    # KIP-714 telemetry: Kafka 4.x advertises it only with a client-telemetry plugin; we have none.
    assert 71 not in advertised and 72 not in advertised
    # KIP-890 part 2: transaction.version 2 is finalized (docs/transactions.md, "Transaction version 2").
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("transaction.version", 1, 2)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("transaction.version", 2, 2)]
    assert response.finalized_features_epoch == 1
