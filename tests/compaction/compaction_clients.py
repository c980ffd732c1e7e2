"""Real-client helpers for the compaction tests (confluent-kafka against a broker subprocess)."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

# The cleaner checks often, and needs little dirt to start: the tests wait for it, never sleep blindly.
BROKER_PROPERTIES = {"log.cleaner.backoff.ms": "200"}


def create_compacted_topic(bootstrap: str, name: str, **configs: str) -> None:
    settings = {"cleanup.policy": "compact", "segment.bytes": str(64 * 1024), "min.cleanable.dirty.ratio": "0.01",
                **{k.replace("_", "."): v for k, v in configs.items()}}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1, config=settings)])
    futures[name].result(30)


def produce_updates(bootstrap: str, topic: str, count: int, keys: int, *, seed: int, tombstones: float = 0.05,
                    prefix: str = "") -> dict[bytes, tuple[int, bytes | None]]:
    """``count`` updates over ``keys`` keys, ``tombstones`` of them deletes; returns the latest
    (offset, value) per key as the broker acknowledged them."""
    rnd = random.Random(seed)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
            return
        latest[msg.key()] = (msg.offset(), msg.value())

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                         "linger.ms": 10, "compression.type": "lz4", "batch.size": 8192})
    for i in range(count):
        key = f"key-{rnd.randrange(keys):06d}".encode()
        value = None if rnd.random() < tombstones else f"{prefix}value-{i}-{rnd.random():.6f}".encode()
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return latest


def consume_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[tuple[int, bytes, bytes | None]]:
    """Every record of partition 0 from the beginning to the high watermark: (offset, key, value)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                                         "enable.auto.commit": False, "isolation.level": isolation,
                                         "enable.partition.eof": True})
    try:
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=30)
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    if msg.offset() >= high or (not out and low == high):
                        return out
                    continue
                raise confluent_kafka.KafkaException(msg.error())
            out.append((msg.offset(), msg.key(), msg.value()))
        raise TimeoutError(f"did not reach the high watermark {high} of {topic}")
    finally:
        consumer.close()


def log_bytes(data_dir: Path, topic: str) -> int:
    directory = data_dir / f"{topic}-0"
    return sum(os.path.getsize(directory / n) for n in os.listdir(directory) if n.endswith(".log"))


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(0.2)
    raise TimeoutError(f"{what} not reached within {timeout} s (last: {last!r})")
