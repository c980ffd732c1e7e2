"""The ZooKeeper harness (eoslog/tools/local/zookeeper.py) against Debian's real server, driven by kazoo:
what the cluster tests rely on when they kill, pause and restart ZooKeeper."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from eoslog.testing.wait import wait_until
from eoslog.testing.zookeeper import ZooKeeperEnsemble, ZooKeeperUnavailable, four_letter_word


@contextlib.contextmanager
def kazoo(hosts: str, session_timeout: float = 10.0) -> Iterator[KazooClient]:
    # Retries bounded in time, not in count: an election takes a few ticks.
    retry = {"max_tries": -1, "deadline": 30, "max_delay": 0.5}
    client = KazooClient(hosts=hosts, timeout=session_timeout, connection_retry=dict(retry),
                         command_retry=dict(retry))
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()



def test_single_node_serves_kazoo_reads_and_writes(zookeeper):
    (node,) = zookeeper.nodes
    assert zookeeper.connect_string == f"127.0.0.1:{node.client_port}"
    assert four_letter_word(node.client_port, b"ruok") == b"imok"
    assert node.mode() == "standalone" and zookeeper.leader() is node
    with kazoo(zookeeper.connect_string) as client:
        client.create("/harness/value", b"v1", makepath=True)
        client.set("/harness/value", b"v2")
        data, stat = client.get("/harness/value")
        assert (data, stat.version) == (b"v2", 1)
    # A chroot is a prefix of every path the client sees.
    with kazoo(zookeeper.connect_string_with_chroot("/harness")) as client:
        assert client.get("/value")[0] == b"v2"
    # The server listens on loopback only (clientPortAddress).
    assert "clientPortAddress=127.0.0.1" in (node.directory / "zoo.cfg").read_text()


def test_ephemeral_znode_disappears_when_its_session_closes(zookeeper):
    with kazoo(zookeeper.connect_string) as observer:
        with kazoo(zookeeper.connect_string) as owner:
            owner.create("/owned", b"", ephemeral=True)
            gone = threading.Event()
            assert observer.exists("/owned", watch=lambda event: gone.set()) is not None
            assert observer.get("/owned")[1].ephemeralOwner == owner.client_id[0]
        # Closing the owner's session (not a timeout) deletes its ephemerals at once.
        assert gone.wait(10), "no watch event for the ephemeral znode"
        assert observer.exists("/owned") is None


def test_pause_stops_answers_and_resume_keeps_the_session(zookeeper):
    node = zookeeper.nodes[0]
    with kazoo(zookeeper.connect_string, session_timeout=20) as client:
        client.create("/mine", b"", ephemeral=True)
        session_id = client.client_id[0]
        node.pause()
        try:
            # The kernel still accepts the connection, but the stopped JVM never answers.
            with pytest.raises(OSError):
                four_letter_word(node.client_port, b"ruok", timeout=1.0)
            assert node.is_running and not node.ready()
        finally:
            node.resume()
        node.wait_ready(30)
        # A pause shorter than the session timeout loses nothing: same session, its ephemeral still there.
        wait_until(lambda: client.connected, 30, "kazoo connected again")
        assert client.client_id[0] == session_id
        assert client.retry(client.exists, "/mine").ephemeralOwner == session_id


def test_restart_keeps_data_and_port(zookeeper):
    node = zookeeper.nodes[0]
    port = node.client_port
    with kazoo(zookeeper.connect_string) as client:
        client.create("/durable", b"kept")
    node.kill()
    assert not node.is_running and node.mode() is None
    node.restart()
    assert node.client_port == port and node.mode() == "standalone"
    with kazoo(zookeeper.connect_string) as client:
        assert client.get("/durable")[0] == b"kept"


def test_a_start_that_fails_raises_with_the_servers_log(tmp_path):
    ensemble = ZooKeeperEnsemble(tmp_path, nodes=1)
    node = ensemble.nodes[0]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", node.client_port))
        taken.listen()
        with pytest.raises(ZooKeeperUnavailable) as failure:
            ensemble.start(timeout=30)
    assert "Address already in use" in str(failure.value)
    assert not node.is_running


def test_three_node_ensemble_survives_losing_its_leader_and_the_member_rejoins(zookeeper_ensemble):
    ensemble = zookeeper_ensemble(3)
    assert sorted(node.mode() for node in ensemble.nodes) == ["follower", "follower", "leader"]
    assert len(ensemble.connect_string.split(",")) == 3
    with kazoo(ensemble.connect_string) as client:
        client.create("/before", b"1")
        # SIGKILL the leader: the two left elect a new one and keep a quorum.
        lost = ensemble.leader()
        lost.kill()
        survivors = [node for node in ensemble.nodes if node is not lost]
        wait_until(lambda: sorted(n.mode() or "" for n in survivors) == ["follower", "leader"], 30,
                   "a new leader among the two survivors")
        client.retry(client.create, "/during", b"2")
        assert client.retry(client.get, "/during")[0] == b"2"
        # Back on the same ports and data: it joins the new leader as a follower and catches up.
        lost.restart()
        assert lost.mode() == "follower"
        assert ensemble.leader() in survivors
    with kazoo(lost.connect_string) as direct:
        direct.sync("/")
        assert direct.get("/during")[0] == b"2" and direct.get("/before")[0] == b"1"


def test_ensemble_keeps_writing_while_a_follower_is_paused(zookeeper_ensemble):
    ensemble = zookeeper_ensemble(3)
    follower = next(node for node in ensemble.nodes if node.mode() == "follower")
    others = ",".join(node.connect_string for node in ensemble.nodes if node is not follower)
    with kazoo(others) as client:
        follower.pause()
        try:
            assert follower.mode() is None
            for i in range(5):
                client.retry(client.create, f"/while-paused-{i}", b"")
        finally:
            follower.resume()
    follower.wait_ready(30)
    assert follower.mode() == "follower"
    with kazoo(follower.connect_string) as direct:
        direct.sync("/")
        assert {f"while-paused-{i}" for i in range(5)} <= set(direct.get_children("/"))
