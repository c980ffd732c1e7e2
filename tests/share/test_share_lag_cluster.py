"""DescribeShareGroupOffsets' lag on a 3-broker ZooKeeper cluster (issue 37): the group's coordinator
answers for every share partition of the group, also those another broker leads, by asking their leader
for the high watermark (cluster/partition_offsets.py); the start offset and the count of done records come
from the share coordinators. Unmodified confluent-kafka producer and ShareConsumer; eoslog's client for
the request (confluent-kafka 2.16's AdminClient has no share-group offset calls)."""

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

from eoslog.client.connection import BrokerConnection
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.messages import DescribeShareGroupOffsetsRequest
from eoslog.testing.cluster import embedded_cluster

pytestmark = pytest.mark.interop

PARTITIONS = 6
RECORDS = 10  # per partition
LIMIT = 5  # group.share.delivery.count.limit, Kafka's default
OFFSETS_PARTITIONS = 4  # the embedded cluster's offsets.topic.num.partitions
PROPERTIES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
    "share.coordinator.state.topic.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with embedded_cluster(3, tmp_path_factory.mktemp("share-lag"), properties=PROPERTIES) as made:
        yield made


def describe(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (start offset, lag), asked of whichever broker ``bootstrap`` is."""
    request = DescribeShareGroupOffsetsRequest
    with BrokerConnection.from_bootstrap(bootstrap) as wire:
        answer = wire.request(90, 1, request(groups=[request.DescribeShareGroupOffsetsRequestGroup(
            group_id=group, topics=[request.DescribeShareGroupOffsetsRequestTopic(
                topic_name=topic, partitions=list(range(PARTITIONS)))])]))
    (described,) = answer.groups
    assert described.error_code == 0, described
    return {p.partition_index: (p.start_offset, p.lag) for t in described.topics for p in t.partitions}


def test_the_lag_of_partitions_led_by_other_brokers_is_known(cluster):
    topic, group = "lag-" + uuid.uuid4().hex[:8], "lg-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    cluster.wait_for(lambda s: all(len(s.isr_of(topic, p)) == 3 for p in range(PARTITIONS)), 60, f"{topic} in sync")
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, value=b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0

    # accept offsets 0-3, reject 5, release the others (they come back, and are archived at the delivery
    # limit): the lag expected is what the consumer's own acknowledgements leave, by Kafka's formula
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    done: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    try:
        while any(not {0, 1, 2, 3, 5} <= d for d in done.values()):
            assert time.monotonic() < deadline, done
            messages = [m for m in consumer.poll(0.5) or () if m.error() is None]
            for message in messages:
                offset = message.offset()
                kind = (AcknowledgeType.ACCEPT if offset < 4 else AcknowledgeType.REJECT if offset == 5
                        else AcknowledgeType.RELEASE)
                consumer.acknowledge(message, kind)
            if messages:
                assert all(error is None for error in consumer.commit_sync(10).values())
            for message in messages:
                offset = message.offset()
                if offset < 4 or offset == 5 or message.delivery_count() >= LIMIT:  # the last: archived
                    done[message.partition()].add(offset)
    finally:
        consumer.close()

    def expected_lag(d: set[int]) -> tuple[int, int]:
        start = min(set(range(RECORDS + 1)) - d)
        return start, RECORDS - start - len({o for o in d if o >= start})

    state = cluster.state()
    coordinator = state.leader_of("__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))
    others = [p for p in range(PARTITIONS) if state.leader_of(topic, p) != coordinator]
    assert others, "every partition led by the group coordinator: nothing to show"
    # every broker forwards nothing: DescribeShareGroupOffsets goes to the group coordinator, as clients do
    answer = describe(cluster.broker(coordinator).bootstrap, group, topic)
    assert answer == {p: expected_lag(done[p]) for p in range(PARTITIONS)}, (answer, done, others, coordinator)
