"""Shared pieces of the cluster tests: topic creation with a replication factor, replica comparison,
transactions across partitions."""

from __future__ import annotations

import json
import time
from pathlib import Path

import confluent_kafka
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.log.segment import segment_file_name  # noqa: F401 - documents the layout compared below
from eoslog.testing.cluster import EmbeddedCluster
from eoslog.tools.topics_cli import topics_group


def create_topic(cluster: EmbeddedCluster, name: str, partitions: int, replication_factor: int,
                 configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, replication_factor, config=configs or {})],
                                  operation_timeout=30)
    futures[name].result(60)
    cluster.wait_for(lambda s: all((s.leader_of(name, p) or -1) >= 0 and len(s.isr_of(name, p)) == replication_factor
                                   for p in range(partitions)), 60, f"{name} led with a full ISR")


def described_at(bootstrap: str, topic: str) -> dict | None:
    """`eoslog topics describe --json` of ``topic`` at one broker, or None while that broker has not heard
    of the topic: a create is answered by the controller, and every other broker learns of the topic from
    its own ZooKeeper watch, its Metadata saying UNKNOWN_TOPIC_OR_PARTITION until then. Any other error fails."""
    result = CliRunner().invoke(topics_group, ["describe", topic, "-b", bootstrap, "--json"])
    if result.exit_code != 0 and f"topic {topic}: UNKNOWN_TOPIC_OR_PARTITION" in result.output:
        return None
    assert result.exit_code == 0, result.output
    [view] = json.loads(result.output)
    return view


def log_bytes(data_dir: Path, topic: str, partition: int) -> bytes:
    """The partition's records as stored: every segment's .log file, concatenated in offset order."""
    directory = data_dir / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def wait_replicas_identical(cluster: EmbeddedCluster, topic: str, partition: int, timeout: float = 60) -> bytes:
    """Every replica ends with the same bytes at the same offsets (the leader-epoch stamps included)."""
    deadline = time.monotonic() + timeout
    while True:
        replicas = cluster.state().replicas[(topic, partition)]
        contents = {r: log_bytes(cluster.broker(r).data_dir, topic, partition) for r in replicas}
        if len(set(contents.values())) == 1:
            return next(iter(contents.values()))
        if time.monotonic() > deadline:
            sizes = {r: len(c) for r, c in contents.items()}
            raise AssertionError(f"{topic}-{partition}: replicas differ after {timeout} s: sizes {sizes}")
        time.sleep(0.1)


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 120,
                isolation: str = "read_committed") -> dict[int, list[bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time()}",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "isolation.level": isolation})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    try:
        while sum(len(v) for v in got.values()) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            got[message.partition()].append(message.value())
    finally:
        consumer.close()
    return got


def commit_abort_commit(producer: confluent_kafka.Producer, topic: str, partitions: int,
                        per_partition: int) -> dict[int, list[bytes]]:
    """Three transactions over every partition of ``topic`` (committed, aborted, committed) with a
    transactional producer already initialised; returns, per partition, what read_committed must see."""
    expected: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for round_, outcome in enumerate(("commit", "abort", "commit")):
        producer.begin_transaction()
        for partition in range(partitions):
            for i in range(per_partition):
                value = f"{outcome}-{round_}-{partition}-{i:02d}".encode()
                producer.produce(topic, value, partition=partition)
                if outcome == "commit":
                    expected[partition].append(value)
        producer.flush(30)
        getattr(producer, f"{outcome}_transaction")(60)
    return expected
