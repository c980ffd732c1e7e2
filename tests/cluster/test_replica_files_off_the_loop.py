"""A cluster broker applies a large topic change without stopping its event loop
(docs/benchmarks.md, "A 1,000-partition topic on a cluster"):

- new replicas' files are made in a worker thread, and CreateTopics answers only once this broker's own
  replicas are open and its leaders take writes;
- a new leader's epoch entry (``leader-epoch-checkpoint``) is written and made durable in a worker
  thread, and the replica takes no write before it is durable;
- the controller writes a new topic's partition states in one ZooKeeper transaction, and a batch that
  fails as a whole (one state moved meanwhile) is written again one state at a time.

A real ZooKeeper, a real cluster-mode broker in this process (so the test can hold a worker thread at a
gate instead of timing it), and real clients over TCP."""

from __future__ import annotations

import os
import threading
import uuid

from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kazoo.client import KazooClient

from eoslog.client.connection import BrokerConnection
from eoslog.cluster import replica_manager
from eoslog.cluster.zk import layout
from eoslog.cluster.zk.client import ZooKeeper
from eoslog.cluster.zk.layout import PartitionState, TopicAssignment
from eoslog.log.leader_epoch import LeaderEpochCache
from eoslog.log.manager import LogDirectory
from eoslog.protocol import messages
from eoslog.testing.embedded import EmbeddedBroker

LOOP_THREAD = "eoslog-embedded"  # EmbeddedBroker's event-loop thread
API_VERSIONS = 18


class Gate:
    """Holds calls of ``owner.name`` whose first argument ``matches`` until opened, noting their threads;
    ``armed`` False lets calls through."""

    def __init__(self, monkeypatch, owner, name: str, matches, armed: bool = True) -> None:
        self.armed = armed
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.threads: list[str] = []
        self.calls: list[tuple] = []
        original = getattr(owner, name)

        def held(*args):
            self.calls.append(args)
            if self.armed and matches(args):
                self.threads.append(threading.current_thread().name)
                self.entered.set()
                assert self.opened.wait(60), "the test never opened the gate"
            return original(*args)

        monkeypatch.setattr(owner, name, held)


def cluster_broker(zookeeper, data_dir) -> EmbeddedBroker:
    return EmbeddedBroker(data_dir, properties={
        "broker.id": "1", "zookeeper.connect": zookeeper.connect_string_with_chroot("/files"),
        "default.replication.factor": "1", "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"})


def answers_api_versions(bootstrap: str) -> bool:
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        return wire.request(API_VERSIONS, 0, messages.ApiVersionsRequest()).error_code == 0
    finally:
        wire.close()


def produce_and_read(embedded: EmbeddedBroker, topic: str, partition: int, value: bytes) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": embedded.bootstrap, "enable.idempotence": True})
    delivered = []
    producer.produce(topic, value, partition=partition, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None]
    consumer = Consumer({"bootstrap.servers": embedded.bootstrap, "group.id": "files", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    try:
        message = consumer.poll(10)
        assert message is not None and message.error() is None and message.value() == value
    finally:
        consumer.close()


def test_new_replicas_are_made_off_the_loop_and_created_topics_answer_once_they_are_served(monkeypatch, zookeeper,
                                                                                            tmp_path):
    gate = Gate(monkeypatch, LogDirectory, "make_logs", lambda args: args[1] == "wide", armed=False)
    with cluster_broker(zookeeper, tmp_path / "data") as embedded:
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
        gate.armed = True
        created = admin.create_topics([NewTopic("wide", 40, 1)], request_timeout=90)["wide"]
        assert gate.entered.wait(30), "the broker never made the new replicas' logs"
        # Held in a worker thread: the loop serves, the topic is in ZooKeeper, its leader is this broker,
        # and still CreateTopics has not answered, since a produce here could not be served yet.
        assert answers_api_versions(embedded.bootstrap)
        assert embedded.broker.cluster.view.topics["wide"].partition_count == 40
        assert not created.done()
        assert gate.threads and LOOP_THREAD not in gate.threads
        gate.opened.set()
        created.result(30)
        produce_and_read(embedded, "wide", 39, b"in the last new partition")

        gate.opened.clear()
        gate.entered.clear()
        grown = admin.create_partitions([NewPartitions("wide", 60)], request_timeout=90)["wide"]
        assert gate.entered.wait(30)
        assert answers_api_versions(embedded.bootstrap)
        assert not grown.done()
        gate.opened.set()
        grown.result(30)
        produce_and_read(embedded, "wide", 59, b"in a partition added later")

        admin.delete_topics(["wide"], request_timeout=90)["wide"].result(30)
        data_dir = embedded.config.data_dir
        assert not any(name.startswith("wide-") and not name.endswith("-delete") for name in os.listdir(data_dir))
    assert LOOP_THREAD not in gate.threads


def test_a_new_leader_takes_writes_only_once_its_epoch_entry_is_durable(monkeypatch, zookeeper, tmp_path):
    gate = Gate(monkeypatch, replica_manager, "make_durable",
                lambda args: any("fenced-0" in str(path) for path in args[0]))
    directory = tmp_path / "data" / "fenced-0"
    with cluster_broker(zookeeper, tmp_path / "data") as embedded:
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
        created = admin.create_topics([NewTopic("fenced", 1, 1)], request_timeout=90)["fenced"]
        assert gate.entered.wait(30), "the new leader's epoch entry was never made durable"
        # Written (by the worker thread, before its sync) but not yet durable: leader, not writable.
        assert LeaderEpochCache.open(directory).entries == [(0, 0)]
        registry = embedded.broker.registry
        assert registry.cluster.replicas.is_leader("fenced", 0)
        assert registry.partitions[("fenced", 0)].writable is False
        assert not created.done()
        assert LOOP_THREAD not in gate.threads
        gate.opened.set()
        created.result(30)
        assert registry.partitions[("fenced", 0)].writable is True
        produce_and_read(embedded, "fenced", 0, b"after the epoch was durable")
    assert [str(directory / "leader-epoch-checkpoint")] in [[str(p) for p in args[0]] for args in gate.calls]


def test_the_controller_writes_a_topics_states_in_one_transaction_and_falls_back_one_by_one(zookeeper):
    connect = zookeeper.connect_string_with_chroot("/states")
    zk = ZooKeeper(connect, 10_000)
    zk.start()
    raw = KazooClient(hosts=connect)
    raw.start()
    try:
        zk.client.ensure_path(layout.BROKER_TOPICS)
        won = zk.try_become_controller(1)
        assert won is not None
        _, epoch_version = won
        zk.create_topic(TopicAssignment("t", uuid.uuid4(), {p: (1,) for p in range(12)}), {})
        new = [("t", p, PartitionState(1, 0, (1,), 1, -1)) for p in range(12)]
        assert zk.write_states_as_controller(new, epoch_version) == [True] * 12
        stats = [raw.get(layout.partition_state_path("t", p))[1] for p in range(12)]
        assert len({stat.czxid for stat in stats}) == 1  # one transaction made them all

        # One state moved since it was read (a leader's ISR write): the batch fails as a whole, and each
        # write then gets its own outcome.
        raw.set(layout.partition_state_path("t", 5), PartitionState(1, 0, (1,), 1, 0).encode())
        moved = [("t", p, PartitionState(1, 1, (1,), 1, 0)) for p in (4, 5, 6)]
        assert zk.write_states_as_controller(moved, epoch_version) == [True, False, True]
        assert [raw.get(layout.partition_state_path("t", p))[1].version for p in (4, 5, 6)] == [1, 1, 1]

        # A deleted topic's states are never written back (no znode made without its parent).
        zk.delete_topic("t")
        assert zk.write_states_as_controller(new[:3], epoch_version) == [False] * 3
        assert raw.exists(layout.topic_path("t")) is None
    finally:
        raw.stop()
        zk.stop()

