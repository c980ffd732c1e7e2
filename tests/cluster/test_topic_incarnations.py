"""A topic deleted and made again while a cluster broker's views coalesce (issue 41, item 7).

A broker learns of topic changes from ZooKeeper views, and several changes may reach it as one view: on a
3-broker cluster, the brokers that did not serve the DeleteTopics may never see the topic absent, only
the same name with a new topic id. Two things went wrong there:

- the replica made for the deleted topic stayed open as the new topic's, with the deleted topic's
  records, until the broker restarted;
- a view applied while a worker thread made one topic's new replicas asked again for the replicas of
  the other topics of the same batch, and the second attempt failed ("opening 1 new replica(s) ...
  failed ... already exists"), logged just before the first attempt's "opened 1 new replica(s)".

A real ZooKeeper, a real cluster-mode broker in this process (so the test holds its view reads and its
file making at gates instead of timing them), and real clients over TCP."""

from __future__ import annotations

import logging
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.cluster.zk.client import ZooKeeper
from eoslog.cluster.zk.layout import TopicAssignment
from eoslog.log.manager import LogDirectory
from eoslog.testing.embedded import EmbeddedBroker


class Gate:
    """Holds calls of ``owner.name`` whose arguments ``matches`` while armed, until opened."""

    def __init__(self, monkeypatch, owner, name: str, matches) -> None:
        self.armed = False
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.held: list[tuple] = []
        original = getattr(owner, name)

        def held(*args):
            if self.armed and matches(args):
                self.held.append(args)
                self.entered.set()
                assert self.opened.wait(60), "the test never opened the gate"
            return original(*args)

        monkeypatch.setattr(owner, name, held)


def cluster_broker(zookeeper, data_dir, chroot: str) -> EmbeddedBroker:
    return EmbeddedBroker(data_dir, properties={
        "broker.id": "1", "zookeeper.connect": zookeeper.connect_string_with_chroot(chroot),
        "default.replication.factor": "1", "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"})


def wait_until(condition, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of partition 0, read until the end offset the broker reports."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "incarnations", "enable.auto.commit": False})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 20
        while len(values) < end and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def test_a_topic_made_again_unseen_gets_new_replicas(monkeypatch, zookeeper, tmp_path):
    reads = Gate(monkeypatch, ZooKeeper, "read_view", lambda args: True)
    chroot = "/incarnations"
    with cluster_broker(zookeeper, tmp_path / "data", chroot) as embedded:
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
        admin.create_topics([NewTopic("again", 1, 1)], request_timeout=60)["again"].result(30)
        producer = Producer({"bootstrap.servers": embedded.bootstrap})
        producer.produce("again", b"of the deleted topic")
        assert producer.flush(30) == 0
        old_id = embedded.broker.cluster.view.topics["again"].topic_id

        # The broker's next view read waits at the gate while the topic is deleted and made again, so
        # that view shows the topic with its new id and never without it.
        other = ZooKeeper(zookeeper.connect_string_with_chroot(chroot), 10_000)
        other.start()
        try:
            reads.armed = True
            other.delete_topic("again")
            assert reads.entered.wait(30), "the broker never read the deletion"
            new_id = uuid.uuid4()
            other.create_topic(TopicAssignment("again", new_id, {0: (1,)}), {})
        finally:
            other.stop()
        reads.armed = False
        reads.opened.set()
        wait_until(lambda: embedded.broker.cluster.view.topics.get("again") is not None
                   and embedded.broker.cluster.view.topics["again"].topic_id == new_id, "the new topic's view")
        assert old_id != new_id
        wait_until(lambda: embedded.broker.cluster.replicas.serves("again"), "the new topic served")
        assert read_all(embedded.bootstrap, "again") == []  # none of the deleted topic's records
        producer.produce("again", b"of the new topic")
        assert producer.flush(30) == 0
        assert read_all(embedded.bootstrap, "again") == [b"of the new topic"]


def test_a_view_applied_while_replicas_are_made_does_not_ask_for_them_again(monkeypatch, zookeeper, tmp_path,
                                                                             caplog):
    reads = Gate(monkeypatch, ZooKeeper, "read_view", lambda args: True)
    topics = {"batch-a", "batch-b"}
    files = Gate(monkeypatch, LogDirectory, "make_logs", lambda args: args[1] in topics)
    chroot = "/batch"
    with cluster_broker(zookeeper, tmp_path / "data", chroot) as embedded:
        cluster = embedded.broker.cluster
        other = ZooKeeper(zookeeper.connect_string_with_chroot(chroot), 10_000)
        other.start()
        try:
            # Both topics reach the broker in one view: one batch of new replicas, one topic at a time.
            reads.armed = files.armed = True
            for name in sorted(topics):
                other.create_topic(TopicAssignment(name, uuid.uuid4(), {0: (1,)}), {})
                if name == "batch-a":
                    assert reads.entered.wait(30)
        finally:
            other.stop()
        reads.armed = False
        reads.opened.set()
        with caplog.at_level(logging.INFO, logger="eoslog.cluster"):
            assert files.entered.wait(30), "the broker never made the new replicas' files"
            first = files.held[0][1]
            # Held making the first topic's files: the controller writes both topics' states, and the
            # broker applies the views that show them.
            wait_until(lambda: len(files.held) > 1 or all((t, 0) in cluster.replicas.view.states for t in topics),
                       "both partitions' states applied")
            files.opened.set()
            wait_until(lambda: all(cluster.replicas.serves(t) for t in topics), "both topics served")
        failures = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
        assert failures == [], f"{first}: {failures}"
        assert sorted(args[1] for args in files.held) == sorted(topics)  # each topic's files made once
