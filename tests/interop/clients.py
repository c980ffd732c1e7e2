"""Thin, honest wrappers around the real clients: each produces or consumes with the client's own API."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from dataclasses import dataclass

import confluent_kafka
from confluent_kafka import TopicPartition


@dataclass(frozen=True)
class Message:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int

    def content(self) -> tuple:
        return (self.key, self.value, self.headers)


def make_messages(count: int, prefix: str, base_timestamp: int) -> list[tuple[bytes, bytes, list, int]]:
    """(key, value, headers, timestamp) for ``count`` messages; values are ASCII so kcat can carry them."""
    out = []
    for i in range(count):
        key = f"{prefix}-key-{i % 97}".encode()
        value = f"{prefix}-value-{i:06d}-".encode() + b"x" * (i % 50)
        headers = [("seq", str(i).encode()), ("src", prefix.encode())]
        out.append((key, value, headers, base_timestamp + i))
    return out


def poll_values(config: dict, topic: str, count: int, timeout: float = 60) -> list[bytes]:
    """The values of ``topic`` from the start, read_committed, by a confluent-kafka consumer of a fresh
    group with ``config`` (servers, security settings); stops at ``count`` or after ``timeout``."""
    consumer = confluent_kafka.Consumer({**config, "group.id": f"poll-{time.monotonic_ns()}",
                                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
    finally:
        consumer.close()
    return got


async def aiokafka_values(common: dict, topic: str, count: int, timeout: float = 60) -> list[bytes]:
    """The same with aiokafka: ``common`` holds its connection keywords (servers, security settings)."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", isolation_level="read_committed", **common)
    await consumer.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            got.extend(m.value for records in batches.values() for m in records)
    finally:
        await consumer.stop()
    return got


def kafka_python_abort_then_commit(common: dict, topic: str, transactional_id: str, aborted: list[bytes],
                                   committed: list[bytes]) -> list[bytes]:
    """kafka-python: one aborted transaction, then one committed, then the topic read back read_committed
    (``common`` holds its connection keywords). Returns the first ``len(committed)`` values read: aborted
    records come first in the log, so any that leaked would show at the front."""
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(transactional_id=transactional_id, **common)
    producer.init_transactions()
    for values, commit in ((aborted, False), (committed, True)):
        producer.begin_transaction()
        for value in values:
            producer.send(topic, value)
        producer.flush(30)
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             isolation_level="read_committed", **common)
    got: list[bytes] = []
    for message in consumer:
        got.append(message.value)
        if len(got) == len(committed):
            break
    consumer.close()
    return got


# --- producers ------------------------------------------------------------------------------------------
def produce_confluent(bootstrap, topic, messages, compression="none", **extra):
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 5,
        "acks": "all", **extra,
    })
    errors = []
    for key, value, headers, ts in messages:
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers, timestamp=ts,
                                 on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert not errors, errors[:3]


def produce_kafka_python(bootstrap, topic, messages, compression="none"):
    from kafka import KafkaProducer

    # Plain (non-idempotent) produce here; the idempotence suite covers enable_idempotence.
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, enable_idempotence=False,
                             compression_type=None if compression == "none" else compression)
    futures = [producer.send(topic, value=value, key=key, headers=headers, timestamp_ms=ts)
               for key, value, headers, ts in messages]
    producer.flush(60)
    for future in futures:
        future.get(timeout=60)
    producer.close()


def produce_aiokafka(bootstrap, topic, messages, compression="none"):
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                    compression_type=None if compression == "none" else compression)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=value, key=key, headers=headers, timestamp_ms=ts)
                       for key, value, headers, ts in messages]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


def produce_kcat(bootstrap, topic, messages, compression="none"):
    """kcat sets its own timestamps and one header set for all messages; keys via a delimiter."""
    lines = b"".join(key + b"\t" + value + b"\n" for key, value, _, _ in messages)
    command = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-H", "src=kcat",
               "-X", "acks=all", "-z", compression]
    subprocess.run(command, input=lines, check=True, timeout=120, capture_output=True)


# --- consumers (read everything from the beginning, no group) --------------------------------------------
def consume_confluent(bootstrap, topic, partitions, expected, isolation="read_committed", timeout=60):
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": True,
    })
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    eof = set()
    deadline = time.monotonic() + timeout
    while len(out) < expected or len(eof) < partitions:
        assert time.monotonic() < deadline, f"confluent consumer read {len(out)} of {expected}"
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                eof.add(msg.partition())
                continue
            raise AssertionError(msg.error())
        eof.discard(msg.partition())
        out.append(Message(msg.partition(), msg.offset(), msg.key(), msg.value(),
                           tuple((k, v) for k, v in (msg.headers() or [])), msg.timestamp()[1]))
    consumer.close()
    return out


def consume_kafka_python(bootstrap, topic, partitions, expected, isolation="read_committed", timeout=60):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation,
                             auto_offset_reset="earliest", consumer_timeout_ms=2000)
    consumer.assign([KTP(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected:
        assert time.monotonic() < deadline, f"kafka-python consumer read {len(out)} of {expected}"
        for records in consumer.poll(timeout_ms=500).values():
            for r in records:
                out.append(Message(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp))
    consumer.close()
    return out


def consume_aiokafka(bootstrap, topic, partitions, expected, isolation="read_committed", timeout=60):
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    isolation_level=isolation, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([ATP(topic, p) for p in range(partitions)])
            await consumer.seek_to_beginning()
            out = []
            deadline = time.monotonic() + timeout
            while len(out) < expected:
                assert time.monotonic() < deadline, f"aiokafka consumer read {len(out)} of {expected}"
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    for r in records:
                        out.append(Message(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp))
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


def consume_kcat(bootstrap, topic, partitions, expected, isolation="read_committed", timeout=60):
    result = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J",
         "-X", f"isolation.level={isolation}"],
        check=True, timeout=timeout, capture_output=True,
    )
    out = []
    for line in result.stdout.splitlines():
        record = json.loads(line)
        headers = record.get("headers") or []
        pairs = tuple((headers[i], headers[i + 1].encode()) for i in range(0, len(headers), 2))
        out.append(Message(record["partition"], record["offset"],
                           None if record["key"] is None else record["key"].encode(),
                           None if record["payload"] is None else record["payload"].encode(),
                           pairs, record["ts"]))
    assert len(out) == expected, f"kcat read {len(out)} of {expected}"
    return out


PRODUCERS = {
    "confluent": produce_confluent,
    "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
    "kcat": produce_kcat,
}
CONSUMERS = {
    "confluent": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
    "kcat": consume_kcat,
}
