"""Resource bounds, pure: what a frame reader holds follows the bytes received, never the size announced;
the queued.max.request.bytes pool refuses, wakes waiters and cannot deadlock; connection quotas count
per address."""

from __future__ import annotations

import struct

import pytest

from eoslog.server.framing import LARGE_START, RECEIVE_BUFFER, FrameReader, NeedMemory
from eoslog.server.limits import ConnectionQuotas, MemoryPool, parse_overrides

MB = 1_000_000


def receive(reader: FrameReader, data: bytes) -> list[bytes]:
    """Feeds ``data`` as the transport would; returns the frames completed on the way."""
    frames, position = [], 0
    while position < len(data):
        target = reader.get_buffer()
        n = min(len(target), len(data) - position)
        target[:n] = data[position : position + n]
        reader.buffer_updated(n)
        position += n
        while (frame := reader.next_frame()) is not None:
            frames.append(bytes(frame))
    return frames


def test_an_announced_100_mb_frame_costs_what_arrived_not_what_was_announced():
    pool = MemoryPool(256 * MB)
    reader = FrameReader(max_frame=100 * MB, pool=pool)
    assert receive(reader, struct.pack(">i", 100 * MB) + b"x" * 1000) == []
    assert reader.holding <= LARGE_START and pool.used == reader.holding
    # It grows with the bytes that arrive, by doubling, never past them by more than twice.
    receive(reader, b"y" * 500_000)
    assert 500_000 < reader.holding <= 2 * 501_000 and pool.used == reader.holding


def test_a_large_frame_arrives_whole_and_gives_its_memory_back():
    pool = MemoryPool(10 * MB)
    reader = FrameReader(max_frame=10 * MB, pool=pool)
    payload = bytes(range(256)) * 4000  # ~1 MB: several doublings
    frames = receive(reader, struct.pack(">i", len(payload)) + payload)
    assert frames == [payload]
    assert pool.used == 0 and reader.holding == 0


def test_an_idle_reader_holds_no_buffer():
    reader = FrameReader(max_frame=1000)
    assert reader.holding == 0
    assert receive(reader, struct.pack(">i", 3) + b"abc") == [b"abc"]
    assert reader.holding == 0  # dropped once every byte was taken
    receive(reader, struct.pack(">i", 3) + b"a")  # half a frame keeps its small buffer
    assert reader.holding == RECEIVE_BUFFER


def test_a_refused_frame_waits_and_is_woken_when_memory_comes_back():
    pool = MemoryPool(200_000)
    first, second = FrameReader(1 * MB, pool=pool), FrameReader(1 * MB, pool=pool)
    receive(first, struct.pack(">i", 150_000) + b"a" * 100_000)  # reserves 128 KiB after one doubling
    assert pool.used == 2 * LARGE_START
    head = struct.pack(">i", 150_000) + b"b" * 100
    target = second.get_buffer()
    target[: len(head)] = head
    second.buffer_updated(len(head))
    # Holding 128 KiB of 200 KB, first is the oldest frame; second's 64 KiB does not fit: it waits.
    pool.capacity = 2 * LARGE_START + 100
    with pytest.raises(NeedMemory):
        second.next_frame()
    woken = []
    pool.wait(lambda: woken.append("second"))
    assert receive(first, b"a" * 50_000) == [b"a" * 150_000]  # first completes, gives memory back
    assert woken == ["second"] and pool.used == 0
    assert second.next_frame() is None and pool.used == LARGE_START  # now it fits


def test_the_oldest_frame_always_grows_so_two_half_frames_cannot_deadlock():
    pool = MemoryPool(3 * LARGE_START)
    old, young = FrameReader(1 * MB, pool=pool), FrameReader(1 * MB, pool=pool)
    receive(old, struct.pack(">i", 400_000) + b"o" * 60_000)
    receive(young, struct.pack(">i", 400_000) + b"y" * 60_000)
    assert pool.used == 2 * LARGE_START
    receive(old, b"o" * 10_000)  # old doubles to 128 KiB: the pool is now full
    with pytest.raises(NeedMemory):
        receive(young, b"y" * 10_000)  # young may not grow past the budget...
    # ...but old, the oldest frame in progress, may: it completes, and young can go on.
    assert receive(old, b"o" * 330_000) == [b"o" * 400_000]
    assert young.next_frame() is None and pool.used <= 3 * LARGE_START


def test_closing_a_reader_mid_frame_gives_everything_back():
    pool = MemoryPool(10 * MB)
    reader = FrameReader(10 * MB, pool=pool)
    receive(reader, struct.pack(">i", 5 * MB) + b"z" * 300_000)
    assert pool.used > 0
    reader.close()
    assert pool.used == 0 and reader.holding == 0
    other = FrameReader(10 * MB, pool=pool)  # the closed frame is no longer "the oldest"
    receive(other, struct.pack(">i", 5 * MB) + b"z" * 10)
    assert pool.used == LARGE_START


def test_connection_quotas_count_per_address_with_overrides():
    quotas = ConnectionQuotas(max_connections=4, max_per_ip=2, per_ip_overrides={"10.0.0.9": 3})
    assert quotas.admit("10.0.0.1") is None and quotas.admit("10.0.0.1") is None
    assert "max.connections.per.ip=2" in quotas.admit("10.0.0.1")
    assert [quotas.admit("10.0.0.9") for _ in range(2)] == [None, None]
    assert "max.connections=4" in quotas.admit("10.0.0.9")  # its override allows 3, the total is reached
    quotas.release("10.0.0.1")
    assert quotas.admit("10.0.0.9") is None and quotas.total == 4
    assert quotas.by_ip == {"10.0.0.1": 1, "10.0.0.9": 3}


def test_overrides_parse_kafkas_format_and_refuse_garbage():
    assert parse_overrides("127.0.0.1:200, ::1:5") == {"127.0.0.1": 200, "::1": 5}
    assert parse_overrides("") == {}
    for bad in ("127.0.0.1", "127.0.0.1:x", ":3"):
        with pytest.raises(ValueError):
            parse_overrides(bad)


def test_the_limits_are_kafka_properties_checked_when_read():
    from eoslog.server.config import DEFAULT_QUEUED_MAX_REQUEST_BYTES, BrokerConfig, ConfigError

    config = BrokerConfig()
    assert config.request_memory_capacity == DEFAULT_QUEUED_MAX_REQUEST_BYTES
    config.apply_properties({"socket.request.max.bytes": str(300 * MB)})
    assert config.request_memory_capacity == 300 * MB  # one request of the largest size always fits
    config.apply_properties({"queued.max.request.bytes": "-1", "max.connections": "100",
                             "max.connections.per.ip": "10", "max.connections.per.ip.overrides": "127.0.0.1:50",
                             "connections.max.idle.ms": "60000"})
    assert config.request_memory_capacity == -1
    assert (config.max_connections, config.max_connections_per_ip, config.connections_max_idle_ms) == (100, 10, 60000)
    assert config.max_connections_per_ip_overrides == {"127.0.0.1": 50}
    config.apply_properties({"queued.max.request.bytes": str(MB)})
    with pytest.raises(ConfigError, match="below socket.request.max.bytes"):
        config.request_memory_capacity  # noqa: B018 - the check runs when the broker reads it
    for name, value in (("queued.max.request.bytes", "0"), ("max.connections", "0"),
                        ("max.connections.per.ip.overrides", "nohost"), ("connections.max.idle.ms", "5")):
        with pytest.raises(ConfigError):
            BrokerConfig().apply_properties({name: value})
