"""Issue 3: a client that stops reading cannot make the broker buffer responses without bound."""

from __future__ import annotations

import socket
import time

import pytest

from eoslog.protocol import codec, messages
from eoslog.protocol.codec import RequestHeader
from tests.interop.clients import produce_confluent
from tests.interop.test_clients import create_topics

pytestmark = pytest.mark.interop


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def fetch_request(topic: str, max_bytes: int):
    F = messages.FetchRequest
    return F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
             session_id=0, session_epoch=-1,
             topics=[F.FetchTopic(topic=topic, partitions=[
                 F.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                                  partition_max_bytes=max_bytes)])],
             forgotten_topics_data=[], rack_id="")


def test_a_client_that_stops_reading_is_not_buffered_without_bound(broker_process):
    bootstrap = broker_process.bootstrap
    topic = "backpressure"
    create_topics(bootstrap, [topic], partitions=1)
    produce_confluent(bootstrap, topic, [(None, b"v" * 100_000, [], 1_000 + i) for i in range(100)])  # ~10 MB

    pid = broker_process.process.pid
    before = rss_bytes(pid)
    host, port = bootstrap.split(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    frame = codec.encode_request(RequestHeader(1, 11, 1, "stalled"), fetch_request(topic, 10_000_000))
    # 300 fetches of ~10 MB each (3 GB of responses) in ~30 KB of requests; we never read a byte.
    sock.sendall(frame * 300)
    peak = before
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # watch the broker's memory while it has all it could want
        peak = max(peak, rss_bytes(pid))
        time.sleep(0.05)
    growth = peak - before
    assert growth < 200 * 1024 * 1024, f"broker grew by {growth / 2**20:.0f} MiB for a stalled client"

    # Other clients are unaffected.
    produce_confluent(bootstrap, topic, [(None, b"after", [], 5_000)])
    sock.close()
