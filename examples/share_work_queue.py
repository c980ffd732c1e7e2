"""A work queue whose workers write each result exactly once: a share group hands out the tasks, and each
worker's transaction holds both its results and the acknowledgement of the tasks it did (issue 37 step 6;
docs/share-groups.md, "Step 6: acknowledgements inside a transaction").

    eoslog serve --data-dir /tmp/wq-data --set transaction.abort.timed.out.transaction.cleanup.interval.ms=500
    python examples/share_work_queue.py tasks 100
    python examples/share_work_queue.py work --worker w1 --crash-after 3 &   # dies inside its 3rd transaction
    python examples/share_work_queue.py work --worker w2 --seconds 20
    python examples/share_work_queue.py check 100

Each worker is a confluent-kafka ShareConsumer (explicit acknowledgement; its own acknowledgements are
only RELEASEs the broker refuses, see ``work``) and an eoslog ShareTxnProducer. Per poll: a result record per task, then the tasks acknowledged
(ACCEPT) inside the same transaction, then commit. A worker killed inside a transaction leaves it open: the
broker holds its tasks (no other worker gets them, whatever their lock), aborts the transaction past its
timeout (5 s here), and then hands the tasks out again, with their delivery count kept; the dead worker's
results are never read (read_committed). A worker killed after its commit has done its tasks for good. So
`check` finds exactly one committed result per task, however the workers died.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
import uuid

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.client.share_txn import ACCEPT, ShareTxnProducer

TASKS, RESULTS, GROUP = "wq-tasks", "wq-results", "wq-workers"
TRANSACTION_TIMEOUT_MS = 5000


def create(bootstrap: str, tasks: int) -> None:
    """The topics, the group reading from the start, and ``tasks`` task records."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # One partition of tasks: every member shares it. (With more partitions than members, each partition is
    # assigned to fewer members, and a dead member keeps its share until its session times out, 45 s.)
    for name, partitions in ((TASKS, 1), (RESULTS, 1)):
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    group = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.record.lock.duration.ms", "15000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([group])[group].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(tasks):
        producer.produce(TASKS, key=b"task-%d" % i, value=b"task-%d" % i)
    assert producer.flush(30) == 0


def work(bootstrap: str, worker: str, seconds: float, crash_after: int | None, batch: int = 5) -> int:
    """Does tasks until none came for ``seconds``; returns how many transactions it committed."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([TASKS])
    committed = 0
    # A fresh transactional id per run is enough here: nothing of a dead worker's transaction needs fencing
    # by its successor, the broker aborts it past its timeout.
    with ShareTxnProducer(bootstrap, f"wq-{worker}-{uuid.uuid4().hex[:6]}",
                          transaction_timeout_ms=TRANSACTION_TIMEOUT_MS) as producer:
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < seconds:
            records = [r for r in consumer.poll(0.5) if r.error() is None]
            if not records:
                continue
            idle_since = time.monotonic()
            for i in range(0, len(records), batch):  # a transaction per ``batch`` tasks
                chunk = records[i:i + batch]
                for record in chunk:
                    producer.send(RESULTS, key=record.value(), value=record.value() + f" done by {worker}".encode())
                producer.acknowledge(GROUP, [(r.topic(), r.partition(), r.offset(), ACCEPT, r.delivery_count())
                                             for r in chunk])
                if crash_after is not None and committed + 1 >= crash_after:
                    os.kill(os.getpid(), signal.SIGKILL)  # inside the transaction: results written, not committed
                producer.commit()
                committed += 1
            # librdkafka's explicit mode wants every record acknowledged before the next poll. RELEASE is the
            # harmless answer: the broker refuses it for a record a transaction took (INVALID_RECORD_STATE),
            # and a record an abort gave back that this member got again is only offered again. (An ACCEPT
            # there could mark a task done that no transaction did.)
            for record in records:
                consumer.acknowledge(record, AcknowledgeType.RELEASE)
    consumer.close()
    return committed


def check(bootstrap: str, tasks: int) -> dict[bytes, int]:
    """How many committed results each task has (read_committed); the example's promise is 1 for each."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "wq-check-" + uuid.uuid4().hex[:6],
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    tp = TopicPartition(RESULTS, 0, 0)
    _, end = consumer.get_watermark_offsets(tp, timeout=10)
    consumer.assign([tp])
    counts = {b"task-%d" % i: 0 for i in range(tasks)}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and consumer.position([tp])[0].offset < end:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            counts[message.key()] = counts.get(message.key(), 0) + 1
    consumer.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("tasks").add_argument("count", type=int)
    worker = commands.add_parser("work")
    worker.add_argument("--worker", default="w1")
    worker.add_argument("--seconds", type=float, default=10.0, help="stop after this long without tasks")
    worker.add_argument("--crash-after", type=int, help="SIGKILL itself inside this transaction")
    commands.add_parser("check").add_argument("count", type=int)
    args = parser.parse_args()
    if args.command == "tasks":
        create(args.bootstrap, args.count)
    elif args.command == "work":
        print(f"{args.worker}: {work(args.bootstrap, args.worker, args.seconds, args.crash_after)} transactions")
    else:
        counts = check(args.bootstrap, args.count)
        wrong = {task.decode(): n for task, n in counts.items() if n != 1}
        print("every task has exactly one result" if not wrong else f"tasks without exactly one result: {wrong}")
        raise SystemExit(1 if wrong else 0)


if __name__ == "__main__":
    main()
