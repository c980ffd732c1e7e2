"""``ZooKeeper.read_view(previous)`` reads again only the znodes whose watches fired, and still ends at
the same view as reading everything, through every kind of change a cluster makes: brokers coming and
going, the controller, topics created, grown, reconfigured and deleted, partition states created and
changed, an assignment nobody can read, and a lost connection (kazoo drops every watch then).

A real ZooKeeper; one client reads incrementally, another writes, a third reads everything to compare."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from eoslog.cluster.zk import layout
from eoslog.cluster.zk.client import ZooKeeper
from eoslog.cluster.zk.layout import (
    BrokerRegistration,
    ClusterView,
    Endpoint,
    PartitionState,
    TopicAssignment,
)
from eoslog.cluster.zk.reconnect import connection_retry
from eoslog.testing.wait import wait_until

CHROOT = "/incremental"


@contextlib.contextmanager
def zk_client(connect: str) -> Iterator[ZooKeeper]:
    client = ZooKeeper(connect, 10_000)
    client.start()
    try:
        yield client
    finally:
        client.stop()


class Reader:
    """Reads incrementally; counts the znodes each read asks for."""

    def __init__(self, zk: ZooKeeper) -> None:
        self.zk = zk
        self.view: ClusterView | None = None
        self.requests = 0
        self.changed = threading.Event()
        zk.on_change = self.changed.set
        for name in ("get", "get_async", "exists", "exists_async", "get_children"):
            self._count(name)

    def _count(self, name: str) -> None:
        original = getattr(self.zk.client, name)

        def counted(*args, **kwargs):
            self.requests += 1
            return original(*args, **kwargs)

        setattr(self.zk.client, name, counted)

    def read(self) -> ClusterView:
        self.changed.clear()
        self.requests = 0
        self.view = self.zk.read_view(self.view)
        return self.view


def converges(reader: Reader, full: ZooKeeper, what: str, session_may_expire: bool = False) -> ClusterView:
    """Incremental reads until the reader's view is the full one (changes may take several watch events;
    a read while the reader reconnects fails, and the next one tries again, as the broker's view loop does).
    ``session_may_expire``: across a ZooKeeper restart, where a session can be lost (see the test)."""

    def same() -> ClusterView | None:
        try:
            return reader.read() == full.read_view() and reader.view
        except ConnectionLoss:
            return None
        except SessionExpiredError:
            if not session_may_expire:
                raise
            return None

    return wait_until(same, 20, what)


def drain(reader: Reader, writer: KazooClient) -> None:
    """Reads every change already made. Watch events of earlier writes may still be on their way after
    the views agree; ZooKeeper sends a session's events in the order of the writes and kazoo runs the
    watchers one after another, so once a watch on a later write has run, every earlier one has too."""
    seen = threading.Event()
    reader.zk.client.exists("/barrier", watch=lambda event: seen.set())
    writer.create("/barrier")
    assert seen.wait(10)
    reader.read()


def state(leader: int, epoch: int) -> bytes:
    return PartitionState(leader, epoch, (leader,), 1, -1).encode()


def test_reading_only_what_changed_ends_at_the_full_view(zookeeper):
    connect = zookeeper.connect_string_with_chroot(CHROOT)
    with zk_client(connect) as incremental, zk_client(connect) as full:
        # Tries again as the clients under test do: kazoo's own sleeps grow past a restart's session.
        writer = KazooClient(hosts=connect, connection_retry=connection_retry(10))
        writer.start()
        try:
            reader = Reader(incremental)
            assert reader.read() == full.read_view() == ClusterView()

            registration = BrokerRegistration(1, (Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),))
            writer.create(layout.broker_path(1), registration.encode(), ephemeral=True)
            assert 1 in converges(reader, full, "a registered broker").brokers
            writer.create(layout.CONTROLLER, layout.encode_controller(1), ephemeral=True)
            assert converges(reader, full, "the controller").controller_id == 1

            wide = TopicAssignment("wide", uuid.uuid4(), {p: (1,) for p in range(12)})
            writer.create(layout.topic_config_path("wide"), layout.encode_topic_config({}), makepath=True)
            writer.create(layout.topic_path("wide"), wide.encode())
            assert converges(reader, full, "a new topic").topics["wide"] == wide
            for partition in range(12):
                writer.create(layout.partition_state_path("wide", partition), state(1, 0), makepath=True)
            assert len(converges(reader, full, "its partitions' states").states) == 12

            # One state changes: one read (and its watch), not one per partition.
            drain(reader, writer)
            reader.changed.clear()
            writer.set(layout.partition_state_path("wide", 7), state(1, 1))
            assert reader.changed.wait(10)
            view = reader.read()
            assert view.states[("wide", 7)].leader_epoch == 1
            assert reader.requests == 1
            assert view == full.read_view()

            writer.set(layout.topic_config_path("wide"), layout.encode_topic_config({"retention.ms": "1000"}))
            assert converges(reader, full, "a config change").configs["wide"] == {"retention.ms": "1000"}
            grown = TopicAssignment("wide", wide.topic_id, {p: (1,) for p in range(16)})
            writer.set(layout.topic_path("wide"), grown.encode())
            converges(reader, full, "a grown topic")
            for partition in range(12, 16):
                writer.create(layout.partition_state_path("wide", partition), state(1, 0), makepath=True)
            assert len(converges(reader, full, "the new partitions' states").states) == 16

            writer.create(layout.topic_path("garbage"), b"not json")
            assert "garbage" in converges(reader, full, "an unreadable topic").unreadable_topics
            writer.delete(layout.topic_path("garbage"))
            assert "garbage" not in converges(reader, full, "the unreadable topic gone").unreadable_topics

            writer.delete(layout.topic_path("wide"), recursive=True)
            assert converges(reader, full, "a deleted topic").states == {}
            writer.delete(layout.CONTROLLER)
            assert converges(reader, full, "no controller").controller_id == -1

            # A connection that breaks loses every watch (kazoo drops them and tells each watcher): the next
            # read reads everything, which sets them again, so a change after the reconnection is seen.
            writer.create(layout.topic_path("after"), TopicAssignment("after", uuid.uuid4(), {0: (1,)}).encode())
            assert "after" in converges(reader, full, "a topic before the reconnection").topics
            # Debian's ZooKeeper 3.8.0 may cost a client its session here (ZOOKEEPER-5051): a connection it
            # closes while starting, before its database exists, throws in the close and stays open, so a
            # client whose handshake went there waits out kazoo's handshake timeout (the whole session
            # timeout) while the restarted server's session clock runs; it then finds its session expired
            # and starts a new one, which the broker survives too (a lost session: read everything again).
            zookeeper.nodes[0].restart()
            converges(reader, full, "the reconnection", session_may_expire=True)
            writer.retry(writer.create, layout.partition_state_path("after", 0), state(1, 0), makepath=True)
            assert ("after", 0) in converges(reader, full, "a change after the reconnection").states
        finally:
            writer.stop()
