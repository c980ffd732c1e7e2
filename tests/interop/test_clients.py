"""Issue 3: unmodified real clients produce to and consume from `eoslog serve` — every client reads what
every other client wrote, in every compression, across a SIGKILL of the broker."""

from __future__ import annotations

import re
import time
from collections import defaultdict

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.interop.clients import CONSUMERS, PRODUCERS, consume_confluent, make_messages, produce_confluent

pytestmark = pytest.mark.interop

COUNT = 10_000
PARTITIONS = 2
COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topics(bootstrap, names, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    for future in futures.values():
        future.result(30)


def end_offsets(bootstrap, topic, partitions):
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
    finally:
        consumer.close()


def check_against_intent(producer_name, messages, intended):
    """Per partition: offsets dense from 0, send order kept; overall: exactly the intended messages."""
    by_partition = defaultdict(list)
    for m in messages:
        by_partition[m.partition].append(m)
    for partition, items in by_partition.items():
        assert [m.offset for m in items] == list(range(len(items))), f"offsets of partition {partition} not dense"
        sequence = [int(re.search(rb"-value-(\d+)-", m.value).group(1)) for m in items]
        assert sequence == sorted(sequence), f"partition {partition} lost send order"
    if producer_name == "kcat":  # kcat sends one header set and stamps its own times
        want = sorted((k, v) for k, v, _, _ in intended)
        got = sorted((m.key, m.value) for m in messages)
        assert got == want
        assert all(m.headers == (("src", b"kcat"),) for m in messages)
    else:
        want = sorted((k, v, tuple(h), ts) for k, v, h, ts in intended)
        got = sorted((m.key, m.value, m.headers, m.timestamp) for m in messages)
        assert got == want


def test_every_client_reads_every_client_in_every_compression_across_a_broker_kill(broker_process):
    bootstrap = broker_process.bootstrap
    base_ts = int(time.time() * 1000) - 3_600_000
    topics = {(p, c): f"interop-{p}-{c}" for p in PRODUCERS for c in COMPRESSIONS}
    create_topics(bootstrap, topics.values())
    intended = {}
    for (producer_name, compression), topic in topics.items():
        intended[topic] = make_messages(COUNT, f"{producer_name}{compression}", base_ts)
        PRODUCERS[producer_name](bootstrap, topic, intended[topic], compression)

    before = {topic: end_offsets(bootstrap, topic, PARTITIONS) for topic in topics.values()}
    broker_process.kill()  # SIGKILL between produce and consume: acknowledged data must survive
    broker_process.start()
    after = {topic: end_offsets(bootstrap, topic, PARTITIONS) for topic in topics.values()}
    assert after == before
    assert all(sum(high for _, high in offs) == COUNT for offs in after.values())

    for (producer_name, _), topic in topics.items():
        views = {}
        for consumer_name, consume in CONSUMERS.items():
            read = consume(bootstrap, topic, PARTITIONS, COUNT)
            views[consumer_name] = sorted(read, key=lambda m: (m.partition, m.offset))
        reference = views["confluent"]
        check_against_intent(producer_name, reference, intended[topic])
        for consumer_name, view in views.items():
            assert [(m.partition, m.offset, m.key, m.value, m.headers, m.timestamp) for m in view] == \
                   [(m.partition, m.offset, m.key, m.value, m.headers, m.timestamp) for m in reference], \
                   f"{consumer_name} disagrees with confluent on {topic}"


def test_offsets_for_times(broker_process):
    bootstrap = broker_process.bootstrap
    topic = "interop-times"
    create_topics(bootstrap, [topic], partitions=1)
    base = 1_700_000_000_000
    produce_confluent(bootstrap, topic, [(b"k", f"v{i}".encode(), [], base + i * 10) for i in range(1000)])
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "times"})
    try:
        def offset_for(ts):
            return consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)[0].offset

        assert offset_for(base) == 0
        assert offset_for(base + 5) == 1  # first record with timestamp >= the asked one
        assert offset_for(base + 5000) == 500
        assert offset_for(base + 9990) == 999
        assert offset_for(base + 10_000) == -1  # nothing that late: end
        assert offset_for(0) == 0
    finally:
        consumer.close()


def test_topic_create_delete_and_partition_growth(broker_process):
    bootstrap = broker_process.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = "interop-admin"
    admin.create_topics([NewTopic(name, 2, 1, config={"retention.ms": "3600000"})])[name].result(30)
    assert len(admin.list_topics(timeout=10).topics[name].partitions) == 2

    duplicate = admin.create_topics([NewTopic(name, 2, 1)])[name]
    with pytest.raises(confluent_kafka.KafkaException) as info:
        duplicate.result(30)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS

    admin.create_partitions([NewPartitions(name, 5)])[name].result(30)
    assert len(admin.list_topics(timeout=10).topics[name].partitions) == 5
    produce_confluent(bootstrap, name, [(f"k{i}".encode(), b"v", [], 1000 + i) for i in range(500)])
    assert len(consume_confluent(bootstrap, name, 5, 500)) == 500

    resource = confluent_kafka.admin.ConfigResource("topic", name)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"

    admin.delete_topics([name])[name].result(30)
    deadline = time.monotonic() + 10
    while name in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # Recreated under the same name it starts empty.
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    assert end_offsets(bootstrap, name, 1) == [(0, 0)]
