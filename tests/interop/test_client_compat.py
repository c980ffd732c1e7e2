"""Differences from Apache Kafka 4.x that real clients hit (issue 41), each driven by confluent-kafka
against one embedded broker shared by the module.

- A KIP-848 consumer (``group.protocol=consumer``) that uses ``assign()`` never joins, yet librdkafka
  gives it a member id of its own (KIP-1082): its commit is OffsetCommit v9 with member epoch -1 and a
  non-empty member id, which Kafka accepts while the group has no members.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("compat")) as running:
        yield running


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None,
                 replica_assignment=None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if replica_assignment is not None:
        topic = NewTopic(name, replica_assignment=replica_assignment, config=config or {})
    else:
        topic = NewTopic(name, partitions, 1, config=config or {})
    admin.create_topics([topic])[name].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes], key: bytes | None = b"k") -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value, key=key)
    assert producer.flush(30) == 0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---- item 1: a KIP-848 consumer with assign() commits -------------------------------------------


def test_consumer_protocol_assign_then_commit(broker):
    topic, group = unique("assigned"), unique("assign-group")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"a", b"b", b"c"])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "group.protocol": "consumer", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got = []
        while len(got) < 3:
            message = consumer.poll(10)
            assert message is not None, f"only {len(got)} of 3 records came"
            assert message.error() is None, message.error()
            got.append(message.value())
        assert got == [b"a", b"b", b"c"]
        committed = consumer.commit(asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in committed] == [(topic, 0, 3, None)]
        assert consumer.committed([TopicPartition(topic, 0)], 10)[0].offset == 3
    finally:
        consumer.close()


def test_consumer_protocol_assign_commit_refused_while_the_group_has_members(broker):
    """Kafka's rule has two halves: while a member of the group holds the subscription, a commit from
    outside the group (epoch -1) is refused with UNKNOWN_MEMBER_ID."""
    topic, group = unique("shared"), unique("busy-group")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"x"])
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    outsider = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "group.protocol": "consumer", "enable.auto.commit": False})
    try:
        member.subscribe([topic])
        message = member.poll(15)
        assert message is not None and message.error() is None
        outsider.assign([TopicPartition(topic, 0, 1)])
        with pytest.raises(KafkaException) as refused:
            outsider.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        assert refused.value.args[0].name() == "UNKNOWN_MEMBER_ID"
    finally:
        outsider.close()
        member.close()
