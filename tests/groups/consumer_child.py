"""A group consumer in its own process, for tests that SIGTERM, SIGKILL or SIGSTOP it.

    python consumer_child.py CLIENT BOOTSTRAP GROUP TOPIC ASSIGNOR OUT_FILE [SESSION_MS [COMMIT_DELAY_MS]]

CLIENT is confluent, kafka-python or aiokafka; ASSIGNOR is the protocol name (range, roundrobin,
cooperative-sticky), or for confluent ``consumer`` / ``consumer:ASSIGNOR``: the consumer group protocol
(KIP-848, ``group.protocol=consumer``) with the server-side assignor ASSIGNOR (``group.remote.assignor``);
the session then comes from the broker's group.consumer.* settings. Commit-after-process: each batch is first recorded in OUT_FILE ("P partition
offset value", flushed), then its offsets are committed synchronously ("C partition next_offset" on
success, "F partition next_offset" when the commit fails). COMMIT_DELAY_MS stretches the window between
processing and committing (slow processing), so a SIGKILL leaves an uncommitted tail. SIGTERM closes
the consumer cleanly (LeaveGroup). The first line, "S", is written once the consumer is created.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time

CLIENT, BOOTSTRAP, GROUP, TOPIC, ASSIGNOR, OUT = sys.argv[1:7]
SESSION_MS = int(sys.argv[7]) if len(sys.argv) > 7 else 6000
COMMIT_DELAY_S = int(sys.argv[8]) / 1000 if len(sys.argv) > 8 else 0.0
HEARTBEAT_MS = 1000
stopping = False


def _stop(*_):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, _stop)
out = open(OUT, "a", buffering=1 << 16)


def record(batch: list[tuple[int, int, bytes]]) -> dict[int, int]:
    """Writes the processed batch; returns {partition: next offset to commit}."""
    commits: dict[int, int] = {}
    for partition, offset, value in batch:
        out.write(f"P {partition} {offset} {value.decode()}\n")
        commits[partition] = max(commits.get(partition, 0), offset + 1)
    out.flush()
    if COMMIT_DELAY_S:
        time.sleep(COMMIT_DELAY_S)
    return commits


def committed(commits: dict[int, int], ok: bool) -> None:
    out.writelines(f"{'C' if ok else 'F'} {partition} {offset}\n" for partition, offset in sorted(commits.items()))
    out.flush()


def run_confluent() -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config = {
        "bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "client.id": f"confluent-{OUT.rsplit('/', 1)[-1]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    }
    if ASSIGNOR.startswith("consumer"):
        config["group.protocol"] = "consumer"
        if ":" in ASSIGNOR:
            config["group.remote.assignor"] = ASSIGNOR.split(":", 1)[1]
    else:
        config.update({"partition.assignment.strategy": ASSIGNOR, "session.timeout.ms": SESSION_MS,
                       "heartbeat.interval.ms": HEARTBEAT_MS})
    consumer = Consumer(config)
    consumer.subscribe([TOPIC])
    out.write("S\n")
    out.flush()
    while not stopping:
        messages = consumer.consume(500, 0.3)
        batch = [(m.partition(), m.offset(), m.value()) for m in messages if not m.error()]
        if not batch:
            continue
        commits = record(batch)
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in commits.items()], asynchronous=False)
            committed(commits, True)
        except KafkaException:
            committed(commits, False)
    consumer.close()


def run_kafka_python() -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "cooperative-sticky": CooperativeStickyAssignor}[ASSIGNOR]
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP, client_id=f"kafka-python-{OUT.rsplit('/', 1)[-1]}",
        auto_offset_reset="earliest", enable_auto_commit=False, partition_assignment_strategy=[assignor],
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    out.write("S\n")
    out.flush()
    while not stopping:
        polled = consumer.poll(timeout_ms=300, max_records=500)
        batch = [(m.partition, m.offset, m.value) for records in polled.values() for m in records]
        if not batch:
            continue
        commits = record(batch)
        try:
            consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in commits.items()})
            committed(commits, True)
        except KafkaError:
            committed(commits, False)
    consumer.close()


async def run_aiokafka() -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[ASSIGNOR]
    consumer = AIOKafkaConsumer(
        TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP, client_id=f"aiokafka-{OUT.rsplit('/', 1)[-1]}",
        auto_offset_reset="earliest", enable_auto_commit=False, partition_assignment_strategy=(assignor,),
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
    await consumer.start()
    out.write("S\n")
    out.flush()
    try:
        while not stopping:
            polled = await consumer.getmany(timeout_ms=300, max_records=500)
            batch = [(m.partition, m.offset, m.value) for records in polled.values() for m in records]
            if not batch:
                continue
            commits = record(batch)
            try:
                await consumer.commit({TopicPartition(TOPIC, p): o for p, o in commits.items()})
                committed(commits, True)
            except KafkaError:
                committed(commits, False)
    finally:
        await consumer.stop()


if __name__ == "__main__":
    if CLIENT == "confluent":
        run_confluent()
    elif CLIENT == "kafka-python":
        run_kafka_python()
    elif CLIENT == "aiokafka":
        asyncio.run(run_aiokafka())
    else:
        raise SystemExit(f"unknown client {CLIENT}")
    out.write("E\n")
    out.close()
