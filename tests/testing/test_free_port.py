"""free_port(): ports for servers that bind later must not be taken by a client connection or by another
pytest-xdist worker in between (eoslog/tools/local/process.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from eoslog.tools.local import process

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/sys/net/ipv4/ip_local_port_range"),
                                reason="the port slices read Linux's ephemeral range")


def _ephemeral_from() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as ranges:
        return int(ranges.read().split()[0])


def _ports_in_worker(worker: str, count: int, how_many: int) -> list[int]:
    script = ("from eoslog.testing.process import free_port; "
              f"print(' '.join(str(free_port()) for _ in range({how_many})))")
    env = {**os.environ, "PYTEST_XDIST_WORKER": worker, "PYTEST_XDIST_WORKER_COUNT": str(count)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    return [int(port) for port in out.stdout.split()]


def test_ports_lie_below_the_ephemeral_range_and_each_worker_has_its_own():
    ephemeral_from = _ephemeral_from()
    first = _ports_in_worker("gw0", 2, 50)
    second = _ports_in_worker("gw1", 2, 50)
    assert all(port < ephemeral_from for port in first + second)
    # gw0's slice is the lower half of the ports below the ephemeral range, gw1's the upper.
    assert max(first) < min(second)
    assert len(set(first)) == len(set(second)) == 50


def test_a_process_never_hands_out_a_port_twice_and_skips_a_port_in_use(monkeypatch):
    monkeypatch.setattr(process, "_port_cursor", None)
    first = process.free_port()
    taken = process._port_cursor  # the port the next call would try first
    with socket.socket() as held:
        try:
            held.bind(("127.0.0.1", taken))
            held.listen()
        except OSError:
            pass  # something else holds it already, which is just as good
        following = [process.free_port() for _ in range(20)]
    assert first not in following
    assert taken not in following
    assert len(set(following)) == 20
    for port in following:  # every port handed out was free to bind
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_client_connection_never_takes_a_picked_port():
    # The kernel gives connections local ports from the ephemeral range only: a picked port, not yet
    # bound, cannot become the local port of a connection made meanwhile.
    ephemeral_from = _ephemeral_from()
    with socket.create_server(("127.0.0.1", 0)) as server:
        clients = [socket.create_connection(server.getsockname()) for _ in range(50)]
        try:
            assert all(client.getsockname()[1] >= ephemeral_from for client in clients)
            assert process.free_port() < ephemeral_from
        finally:
            for client in clients:
                client.close()
