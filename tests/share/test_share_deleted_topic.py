"""A deleted topic's share state (issue 37): the share coordinator writes a tombstone for each of its share
partitions (Kafka's ShareCoordinatorService.onTopicsDeleted), once the topic was gone at two checks in a
row, and keeps the state of every other topic; the group coordinator drops the topic from the share
group's ShareGroupStatePartitionMetadata, though the group has no members to heartbeat. A real embedded broker, a confluent-kafka ShareConsumer to
make the state, AdminClient's DeleteTopics."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.cluster.topics import SHARE_GROUP_STATE
from eoslog.coordinator.share.log_format import decode_key
from eoslog.coordinator.share.shard import DELETED_TOPIC_CHECK_MS, read_records
from eoslog.testing.embedded import EmbeddedBroker

PROPERTIES = {"group.share.min.heartbeat.interval.ms": "200", "group.share.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-deleted"), properties=PROPERTIES) as embedded:
        yield embedded


def shard(broker):
    return broker.broker.coordinator_runtime.built(SHARE_GROUP_STATE)


def held_keys(broker) -> set:
    """The share partitions the share coordinator holds state of, on every partition it coordinates."""
    out = set()
    for index in range(broker.broker.config.share_coordinator_state_topic_num_partitions):
        states = shard(broker).states(index)
        if states is not None:
            out |= set(states)
    return out


def group_topics(broker, group: str) -> set:
    """The topics of the group's ShareGroupStatePartitionMetadata (initialized ones), at its coordinator."""
    error, held = broker.broker.coordinator_runtime.built("__consumer_offsets").core \
        .share_group_initialized_partitions(group)
    assert error.value == "NONE", error
    return set(held)


def tombstoned(broker) -> set:
    """Keys with a tombstone in the ``__share_group_state`` log."""
    out = set()
    for (topic, _), partition in list(broker.broker.registry.partitions.items()):
        if topic == SHARE_GROUP_STATE:
            for _, key, value in read_records(partition.log):
                if value is None:
                    out.add(decode_key(key)[1])
    return out


def consume_some(bootstrap: str, group: str, topic: str) -> None:
    """Makes share state: a member accepts one record of each partition."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    seen: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(seen) < 2:
            assert time.monotonic() < deadline, seen
            for message in consumer.poll(0.5) or ():
                assert message.error() is None, message.error()
                seen.add(message.partition())
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            consumer.commit_sync(10)
    finally:
        consumer.close()


def test_a_deleted_topics_share_partitions_are_tombstoned_and_others_kept(broker):
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    doomed, kept, group = ("del-" + uuid.uuid4().hex[:8], "keep-" + uuid.uuid4().hex[:8],
                           "dg-" + uuid.uuid4().hex[:8])
    for name in (doomed, kept):
        admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for name in (doomed, kept):
        for p in (0, 1):
            producer.produce(name, value=b"x", partition=p)
    assert producer.flush(30) == 0
    for name in (doomed, kept):
        consume_some(bootstrap, group, name)
    ids = {name: broker.broker.registry.topics.get(name).topic_id for name in (doomed, kept)}
    before = {key for key in held_keys(broker) if key.group_id == group}
    assert {(key.topic_id, key.partition) for key in before} == {(t, p) for t in ids.values() for p in (0, 1)}

    assert group_topics(broker, group) == set(ids.values())

    admin.delete_topics([doomed])[doomed].result(30)
    deleted_at = time.monotonic()
    doomed_keys = {key for key in before if key.topic_id == ids[doomed]}
    while doomed_keys & held_keys(broker):
        assert time.monotonic() - deleted_at < 4 * DELETED_TOPIC_CHECK_MS / 1000, held_keys(broker)
        time.sleep(0.1)
    # never before the second check that found it gone: a view that lags for a moment deletes nothing
    assert time.monotonic() - deleted_at > DELETED_TOPIC_CHECK_MS / 1000 / 2
    # durable: a tombstone per share partition in the log, which a new coordinator loads; the kept topic's
    # state is untouched
    assert doomed_keys <= tombstoned(broker)
    assert {key for key in held_keys(broker) if key.group_id == group} == before - doomed_keys
    assert not (before - doomed_keys) & tombstoned(broker)
    # the group, without members (no heartbeat comes), forgets the topic too: Kafka's
    # maybeCleanupShareGroupState, on the group coordinator's own check
    while group_topics(broker, group) != {ids[kept]}:
        assert time.monotonic() - deleted_at < 4 * DELETED_TOPIC_CHECK_MS / 1000, group_topics(broker, group)
        time.sleep(0.1)
