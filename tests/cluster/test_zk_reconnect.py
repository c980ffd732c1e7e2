"""A ZooKeeper client that lost its server tries again at least every second or so, however long the
server has been away (cluster/zk/reconnect.py), and so keeps its session across a slow restart.

kazoo's own retry doubles its sleep each time: 12 s after the server went away the client waits 3.8 s
or more between tries, soon longer than a session. A restarted server gives each session its whole
timeout from the moment it serves, so such a client may come back too late and find its session expired
(what made test_zk_incremental_view.py fail after its ZooKeeper restart on a loaded machine).

While the server is away its port is ours: the test accepts and closes each connection attempt (what a
server that is still loading its data does) and measures the longest silence between attempts."""

from __future__ import annotations

import itertools
import socket
import time

from kazoo.client import KazooState

from eoslog.cluster.zk.client import ZooKeeper
from eoslog.testing.wait import wait_until

# Observed for 12 s, kazoo's default retry is silent for more than 3 s at least once (its first six
# sleeps add up to 8.9 s at most, the seventh is 3.8 s at least); ours never sleeps more than 1.4 s.
WATCH_S = 12.0
LONGEST_SILENCE_S = 2.5


def attempts_while_away(host: str, port: int, seconds: float) -> list[float]:
    """The times at which a client connected to ``host:port`` during ``seconds``, from the start."""
    times = [0.0]
    start = time.monotonic()
    with socket.create_server((host, port)) as server:
        server.settimeout(0.05)
        while (now := time.monotonic() - start) < seconds:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.close()
            times.append(now)
    return [*times, seconds]


def test_a_client_tries_again_every_second_and_keeps_its_session_across_a_slow_restart(zookeeper):
    (node,) = zookeeper.nodes
    client = ZooKeeper(zookeeper.connect_string, 10_000)
    client.start()
    try:
        session = client.client.client_id
        node.kill()
        times = attempts_while_away(node.host, node.client_port, WATCH_S)
        silences = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert max(silences) <= LONGEST_SILENCE_S, f"attempts at {[round(t, 2) for t in times]}"

        node.start()
        node.wait_ready()
        wait_until(lambda: client.client.state == KazooState.CONNECTED, 5, "the client back")
        assert client.client.client_id == session  # the same session, not a new one after an expiry
        assert client.client.exists("/") is not None
    finally:
        client.stop()
