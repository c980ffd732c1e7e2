"""`eoslog topics` against a real broker, each result checked with confluent-kafka's AdminClient and
Consumer: what the tool creates, alters and deletes is what a Kafka client sees, and what it describes
(partitions, leader, replicas, ISR, offsets, configs) is what a Kafka client reads."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, ConfigResource

from eoslog.tools.topics_cli import topics_group

pytestmark = pytest.mark.interop


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(topics_group, list(args))
    assert result.exit_code == code, result.output
    return result


def partitions_seen(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic]
    assert metadata.error is None, metadata.error
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in metadata.partitions.values()}


def topic_configs_seen(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(10)
    return {name: entry.value for name, entry in entries.items()}


def test_create_describe_alter_and_delete_as_a_kafka_client_sees_them(eoslog_broker):
    bootstrap = eoslog_broker
    created = run("create", "orders", "--partitions", "3", "--config", "retention.ms=3600000",
                  "--config", "cleanup.policy=compact", "--bootstrap-server", bootstrap)
    assert "created topic orders: 3 partitions, replication factor 1" in created.output
    assert sorted(partitions_seen(bootstrap, "orders")) == [0, 1, 2]
    seen = topic_configs_seen(bootstrap, "orders")
    assert (seen["retention.ms"], seen["cleanup.policy"]) == ("3600000", "compact")

    # --bootstrap is the same option; --if-not-exists makes a second create succeed.
    again = run("create", "orders", "--partitions", "3", "--if-not-exists", "--bootstrap", bootstrap)
    assert "already exists" in again.output
    listed = json.loads(run("list", "-b", bootstrap, "--json", "--exclude-internal").output)
    assert listed == [{"topic": "orders", "partitions": 3, "replication_factor": 1, "internal": False}]

    # Keyed: a compacted topic refuses a record without a key, as Kafka's does (KIP-467 record errors).
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    failed = []
    for n in range(5):
        producer.produce("orders", key=b"k%d" % n, value=b"v%d" % n, partition=1,
                         on_delivery=lambda err, _msg: err is not None and failed.append(err))
    assert producer.flush(10) == 0
    assert failed == []
    [view] = json.loads(run("describe", "orders", "-b", bootstrap, "--json").output)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        for p in view["partitions"]:
            low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("orders", p["partition"]), 10)
            assert (p["log_start_offset"], p["high_watermark"], p["last_stable_offset"]) == (low, high, high)
    finally:
        consumer.close()
    assert {p["partition"]: (p["leader"], p["replicas"], p["isr"]) for p in view["partitions"]} == \
        partitions_seen(bootstrap, "orders")
    assert view["configs"] == {"cleanup.policy": "compact", "retention.ms": "3600000"}
    table = run("describe", "orders", "-b", bootstrap).output
    assert "configs cleanup.policy=compact,retention.ms=3600000" in table
    assert table.splitlines()[1].split() == ["PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE", "LOG-START",
                                             "HIGH-WATERMARK", "LAST-STABLE"]
    assert table.splitlines()[3].split() == ["1", "0", "0", "0", "-", "0", "5", "5"]

    run("alter", "orders", "--partitions", "5", "--config", "retention.ms=60000", "--delete-config",
        "cleanup.policy", "-b", bootstrap)
    assert sorted(partitions_seen(bootstrap, "orders")) == [0, 1, 2, 3, 4]
    seen = topic_configs_seen(bootstrap, "orders")
    assert (seen["retention.ms"], seen["cleanup.policy"]) == ("60000", "delete")

    run("delete", "orders", "-b", bootstrap)
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    assert "orders" not in topics
    assert "no topic orders" in run("delete", "orders", "--if-exists", "-b", bootstrap).output


def test_errors_name_the_problem_and_exit_non_zero(eoslog_broker):
    bootstrap = eoslog_broker
    # No topic yet to ask which names the broker knows: the broker refuses, then the closest names come.
    unknown = run("create", "t", "--config", "retention.msx=5", "-b", bootstrap, code=1)
    assert "unknown config 'retention.msx' for topic t; closest: retention.ms" in unknown.output
    invalid = run("create", "t", "--config", "cleanup.policy=sometimes", "-b", bootstrap, code=1)
    assert "INVALID_CONFIG" in invalid.output and "must be delete, compact or compact,delete" in invalid.output
    assert "t" not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics

    run("create", "t", "--partitions", "2", "-b", bootstrap)
    # Now the names come from the broker's own description of a topic, before anything is sent.
    typo = run("create", "u", "--config", "segment.byte=1048576", "-b", bootstrap, code=1)
    assert typo.output.strip() == ("Error: unknown config 'segment.byte' for topic u; "
                                   "closest: segment.bytes, segment.index.bytes, segment.ms")
    typo = run("alter", "t", "--config", "max.message.byte=1", "-b", bootstrap, code=1)
    assert "unknown config 'max.message.byte' for topic t; closest: max.message.bytes" in typo.output
    exists = run("create", "t", "-b", bootstrap, code=1)
    assert "TOPIC_ALREADY_EXISTS" in exists.output
    fewer = run("alter", "t", "--partitions", "1", "-b", bootstrap, code=1)
    assert "CreatePartitions t: INVALID_PARTITIONS" in fewer.output
    missing = run("describe", "nope", "-b", bootstrap, code=1)
    assert "topic nope: UNKNOWN_TOPIC_OR_PARTITION" in missing.output
    gone = run("delete", "nope", "-b", bootstrap, code=1)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in gone.output
    nothing = run("alter", "t", "-b", bootstrap, code=2)
    assert "nothing to alter" in nothing.output
    unreachable = run("list", "-b", "127.0.0.1:1", code=1)
    assert "cannot reach any broker" in unreachable.output
