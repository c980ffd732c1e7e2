"""Issue 3: bad input never hurts the broker. Each kind of bad input is fired at a running broker; then
a normal client still works and nothing acknowledged was lost."""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from eoslog.protocol import codec, messages
from eoslog.protocol.codec import RequestHeader
from eoslog.records.builder import build_batch
from eoslog.records.batch import Record
from tests.interop.clients import consume_confluent, produce_confluent
from tests.interop.test_clients import create_topics

pytestmark = pytest.mark.interop


def connect(bootstrap) -> socket.socket:
    host, port = bootstrap.split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def round_trip(sock, api_key, version, request, correlation_id=1):
    frame = codec.encode_request(RequestHeader(api_key, version, correlation_id, "bad-input-test"), request)
    sock.sendall(frame)
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return codec.decode_response(api_key, version, recv_exactly(sock, size))


def recv_exactly(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by broker")
        data += chunk
    return bytes(data)


def assert_closed_by_broker(sock, timeout=10):
    sock.settimeout(timeout)
    try:
        data = sock.recv(1024)
    except ConnectionResetError:
        return
    assert data == b"", f"expected the broker to hang up, got {data[:40]!r}"


def produce_request(topic, partition, records, acks=-1):
    P = messages.ProduceRequest
    return P(transactional_id=None, acks=acks, timeout_ms=10_000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=records)])
    ])


def good_batch(values):
    return build_batch([Record(offset_delta=i, timestamp_delta=0, key=None, value=v, headers=())
                        for i, v in enumerate(values)], base_timestamp=int(time.time() * 1000))


def test_bad_input_is_refused_and_the_broker_keeps_serving(broker_process):
    bootstrap = broker_process.bootstrap
    topic = "bad-input"
    create_topics(bootstrap, [topic], partitions=2)
    acknowledged = [(f"k{i}".encode(), f"acked-{i}".encode(), [], 1_000 + i) for i in range(2000)]
    produce_confluent(bootstrap, topic, acknowledged)

    # 1. an oversize frame: the broker hangs up without reading 2 GB
    sock = connect(bootstrap)
    sock.sendall(struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 64)
    assert_closed_by_broker(sock)

    # 2. an unparsable request (a Metadata header followed by garbage)
    sock = connect(bootstrap)
    body = struct.pack(">hhih", 3, 12, 7, -1) + b"\xff" * 13
    sock.sendall(struct.pack(">i", len(body)) + body)
    assert_closed_by_broker(sock)

    # 3. an unknown api key
    sock = connect(bootstrap)
    body = struct.pack(">hhih", 9999, 0, 8, -1)
    sock.sendall(struct.pack(">i", len(body)) + body)
    assert_closed_by_broker(sock)

    # 4. a corrupt batch: CORRUPT_MESSAGE for that partition only, the other partition is appended
    sock = connect(bootstrap)
    corrupt = bytearray(good_batch([b"will-not-land"]))
    corrupt[-1] ^= 0xFF  # flips a byte under the CRC
    P = messages.ProduceRequest
    request = P(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[P.TopicProduceData(name=topic, partition_data=[
        P.PartitionProduceData(index=0, records=bytes(corrupt)),
        P.PartitionProduceData(index=1, records=good_batch([b"lands-fine"])),
    ])])
    response = round_trip(sock, 0, 9, request)
    codes = {p.index: p.error_code for p in response.responses[0].partition_responses}
    assert codes == {0: 2, 1: 0}  # CORRUPT_MESSAGE, NONE

    # 5. too large: MESSAGE_TOO_LARGE (default max.message.bytes is 1048588)
    big = good_batch([random.randbytes(1_200_000)])
    response = round_trip(sock, 0, 9, produce_request(topic, 0, big), correlation_id=2)
    assert response.responses[0].partition_responses[0].error_code == 10

    # 6. bad topic names: INVALID_TOPIC_EXCEPTION from Metadata auto-creation and from CreateTopics
    M = messages.MetadataRequest
    response = round_trip(sock, 3, 12, M(topics=[M.MetadataRequestTopic(name="bad topic/name")],
                                          allow_auto_topic_creation=True), correlation_id=3)
    assert response.topics[0].error_code == 17
    C = messages.CreateTopicsRequest
    response = round_trip(sock, 19, 7, C(topics=[C.CreatableTopic(name="x" * 300, num_partitions=1,
                                                                    replication_factor=1)], timeout_ms=5000),
                          correlation_id=4)
    assert response.topics[0].error_code == 17
    sock.close()

    # 7. random garbage frames, many connections
    rng = random.Random(1234)
    for _ in range(200):
        sock = connect(bootstrap)
        junk = rng.randbytes(rng.randrange(0, 300))
        try:
            sock.sendall(struct.pack(">i", len(junk)) + junk)
            sock.settimeout(0.2)
            sock.recv(100)
        except (ConnectionError, socket.timeout, OSError):
            pass
        finally:
            sock.close()

    # A normal client still works, and nothing acknowledged was lost.
    produce_confluent(bootstrap, topic, [(b"after", b"after-garbage", [], 5_000)])
    read = consume_confluent(bootstrap, topic, 2, len(acknowledged) + 2)
    values = {m.value for m in read}
    assert {v for _, v, _, _ in acknowledged} <= values
    assert b"lands-fine" in values and b"after-garbage" in values
    assert b"will-not-land" not in values
