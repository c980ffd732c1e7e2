"""acks=all Produce waiting for its group-commit round, on the wire (api/produce.py's future, the
dispatcher's chain, the connection's batched sends): nothing is answered while the round that covers it
has not returned, a wait that outlives the request's timeout is answered REQUEST_TIMED_OUT, and pipelined
responses keep request order even when a later request (acks=1) is ready first. The round is held by
gating the syncfs call inside the embedded broker (the flush path the single node uses by default)."""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.log import syncfs as syncfs_module
from eoslog.protocol import codec, messages
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.skipif(not syncfs_module.available(), reason="needs syncfs that reports errors (Linux >= 5.8)")

Data = messages.ProduceRequest.TopicProduceData


@pytest.fixture
def held_rounds(monkeypatch):
    """An Event: syncfs rounds block until it is set (it is set at teardown, so the broker can close)."""
    release = threading.Event()
    real = syncfs_module.syncfs

    def gated(fd):
        assert release.wait(60), "the test never released the round"
        real(fd)

    monkeypatch.setattr(syncfs_module, "syncfs", gated)
    yield release
    release.set()


def _produce(correlation_id: int, partition: int, acks: int, timeout_ms: int) -> bytes:
    request = messages.ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        Data(name="t", partition_data=[Data.PartitionProduceData(
            index=partition, records=build_batch([SimpleRecord(None, b"v%d" % correlation_id)]))])])
    return codec.encode_request(codec.RequestHeader(0, 9, correlation_id, "acks-wait-test"), request)


def _read_response(sock: socket.socket):
    def read(n):
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return bytes(data)

    size = struct.unpack(">i", read(4))[0]
    correlation_id, response = codec.decode_response_frame(0, 9, read(size))
    partition = response.responses[0].partition_responses[0]
    return correlation_id, partition.error_code, partition.base_offset


def _nothing_arrives(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b"x"  # False unless a byte arrived (never b"x": a size)
    except TimeoutError:
        return True
    finally:
        sock.settimeout(30)


def test_pipelined_answers_wait_for_their_round_and_keep_request_order(held_rounds):
    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", 3, 1)])["t"].result(30)
        host, port = broker.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            # acks=all, then acks=1 (answerable at once), then acks=all: all wait for the held round
            sock.sendall(_produce(1, 0, -1, 30000) + _produce(2, 1, 1, 30000) + _produce(3, 2, -1, 30000))
            assert _nothing_arrives(sock, 0.5), "answered before the round covering it returned"
            hw = broker.call(lambda: [broker.broker.registry.partition("t", i).high_watermark for i in range(3)])
            assert hw == [0, 0, 0]
            held_rounds.set()
            assert [_read_response(sock) for _ in range(3)] == [(1, 0, 0), (2, 0, 0), (3, 0, 0)]


def test_a_wait_longer_than_the_request_timeout_is_answered_request_timed_out(held_rounds):
    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", 3, 1)])["t"].result(30)
        host, port = broker.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(_produce(1, 0, -1, 300) + _produce(2, 1, 1, 30000))
            assert _read_response(sock) == (1, ErrorCode.REQUEST_TIMED_OUT, 0)
            assert _read_response(sock) == (2, 0, 0)
            held_rounds.set()
            sock.sendall(_produce(3, 0, -1, 30000))  # the round was only late: the log goes on
            assert _read_response(sock) == (3, 0, 1)


def test_a_failed_flush_answers_every_waiting_request_with_a_storage_error(monkeypatch):
    """The acks=all waits are callbacks on the partition (Partition.on_high_watermark): a failed fsync
    must reach each of them, and only those of the partition whose file could not be synced."""
    real_syncfs, real_fsync = syncfs_module.syncfs, os.fsync
    gate = threading.Event()

    def failing_syncfs(fd):
        assert gate.wait(60), "the test never released the round"
        raise OSError(errno.EIO, "injected syncfs failure")  # the round falls back to per-file fsyncs

    def fsync(fd):
        if "/t-0/" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.EIO, "injected fsync failure")
        real_fsync(fd)

    monkeypatch.setattr(syncfs_module, "syncfs", failing_syncfs)
    monkeypatch.setattr(os, "fsync", fsync)
    try:
        with EmbeddedBroker() as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("t", 2, 1)])["t"].result(30)
            host, port = broker.bootstrap.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=30) as sock:
                sock.sendall(_produce(1, 0, -1, 30000) + _produce(2, 1, -1, 30000) + _produce(3, 0, -1, 30000))
                assert _nothing_arrives(sock, 0.3), "answered before the round covering it returned"
                gate.set()
                answers = [_read_response(sock) for _ in range(3)]
            assert [(c, code) for c, code, _ in answers] == [
                (1, ErrorCode.KAFKA_STORAGE_ERROR), (2, 0), (3, ErrorCode.KAFKA_STORAGE_ERROR)]
            monkeypatch.setattr(os, "fsync", real_fsync)  # the broker closes its other logs normally
    finally:
        gate.set()
        monkeypatch.setattr(syncfs_module, "syncfs", real_syncfs)
