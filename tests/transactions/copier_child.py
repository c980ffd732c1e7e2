"""A consume-transform-produce copier, as in Kafka's own exactly-once system test.

read_committed from the input topic; each record goes to output partition (input partition % N) inside
a transaction that also commits the consumer's offsets (send_offsets_to_transaction); a third of the
transactions are aborted on purpose and their input re-read. Errors are handled as librdkafka documents:
retriable -> retry, abortable -> abort and rewind to the committed offsets, fatal -> exit (the test's
supervisor starts a replacement with the same transactional id, which fences this one).

`metadata.recovery.strategy=none`: librdkafka 2.16's default re-bootstrap drops the cached group
coordinator when every broker is briefly unreachable (a broker restart), after which
send_offsets_to_transaction blocks past its timeout (librdkafka issues 5456 and 5511).

On a cluster the same hang comes without any re-bootstrap. librdkafka 2.16 decommissions a broker
that drops out of the Metadata responses, as a killed group coordinator's broker does while it is
down (#5511). So a watchdog ends the copier when send_offsets_to_transaction overruns its timeout.
The supervisor starts a replacement with the same transactional id, which fences this one and aborts
its open transaction, as for any copier crash."""

import contextlib
import os
import random
import sys
import threading
import time

import confluent_kafka
from confluent_kafka import KafkaException, TopicPartition

bootstrap, group, transactional_id, source, target, output_partitions = sys.argv[1:7]
# An optional 7th argument "consumer": the consumer group protocol (KIP-848), whose session is the broker's.
group_protocol = sys.argv[7] if len(sys.argv) > 7 else "classic"
output_partitions = int(output_partitions)
rng = random.Random()
consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                     "isolation.level": "read_committed", "enable.auto.commit": False,
                                     "auto.offset.reset": "earliest", "metadata.recovery.strategy": "none",
                                     **({"group.protocol": "consumer"} if group_protocol == "consumer"
                                        else {"session.timeout.ms": 6000})})
producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                     "linger.ms": 5, "transaction.timeout.ms": 30000,
                                     "metadata.recovery.strategy": "none"})
producer.init_transactions(60)
consumer.subscribe([source])
WATCHDOG_EXIT = 70
_watched: list = [None]  # (call, deadline) of the client call in progress


def _watchdog() -> None:
    while True:
        time.sleep(0.5)
        call = _watched[0]
        if call is not None and time.monotonic() > call[1]:
            print(f"{transactional_id}: {call[0]} overran its timeout; exiting ({WATCHDOG_EXIT})", flush=True)
            os._exit(WATCHDOG_EXIT)


threading.Thread(target=_watchdog, daemon=True).start()


@contextlib.contextmanager
def watched(call: str, timeout_s: float):
    _watched[0] = (call, time.monotonic() + timeout_s + 5)
    try:
        yield
    finally:
        _watched[0] = None


def rewind() -> None:
    """Back to the last committed offsets: everything after them is to be copied again. The tests commit
    offset 0 of every input partition before a copier starts (copier_run.commit_start_offsets: a seek
    while librdkafka looks up a logical offset can be undone by that lookup), so OFFSET_BEGINNING is
    only for a group without offsets, and in a test would mean the broker lost them: the duplicates
    that follow fail it."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, 30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else confluent_kafka.OFFSET_BEGINNING))


def abort_and_rewind() -> None:
    producer.abort_transaction(60)
    rewind()


_said: dict[str, tuple[float, int]] = {}  # error name -> (when last printed, retries since)


def say_retrying(call: str, error) -> None:
    """One line per error kind per 5 s: a copier stuck on a retriable error says so (and how often)."""
    key = f"{call}: {error.name()}"
    last, count = _said.get(key, (0.0, 0))
    now = time.monotonic()
    if now - last >= 5:
        print(f"{transactional_id}: {key} ({error.str()}) is retriable, retrying"
              f"{f' ({count + 1} times in {now - last:.0f} s)' if last else ''}", flush=True)
        _said[key] = (now, 0)
    else:
        _said[key] = (last, count + 1)


def commit() -> bool:
    while True:
        try:
            producer.commit_transaction(60)
            return True
        except KafkaException as exc:
            error = exc.args[0]
            if error.retriable():
                say_retrying("commit_transaction", error)
                continue
            if error.txn_requires_abort():
                return False
            raise


idle_since = time.monotonic()
while True:
    messages = []
    for m in consumer.consume(750, 1.0):
        if m.error():
            say_retrying("consume", m.error())
        else:
            messages.append(m)
    if not messages:
        if time.monotonic() - idle_since >= 10:  # a stall says what the consumer holds
            print(f"{transactional_id}: nothing consumed for 10 s; assignment "
                  f"{[(tp.topic, tp.partition) for tp in consumer.assignment()]}", flush=True)
            idle_since = time.monotonic()
        continue
    idle_since = time.monotonic()
    try:
        producer.begin_transaction()
        for m in messages:
            while True:
                try:
                    producer.produce(target, value=m.value(), partition=m.partition() % output_partitions)
                    break
                except BufferError:
                    producer.poll(0.05)
        if rng.random() < 1 / 3:
            abort_and_rewind()
            continue
        # The offsets committed are those of the records copied, as Kafka's own copier does. A rebalance
        # served inside consume() can revoke a partition after some of its records were returned; the
        # assignment's positions would then commit this transaction's copies of them without their
        # offsets, and the partition's next owner would copy them again. So such a batch is aborted.
        copied = {m.partition(): m.offset() + 1 for m in messages}
        owned = {tp.partition for tp in consumer.assignment() if tp.topic == source}
        if not copied.keys() <= owned:
            print(f"{transactional_id}: input partitions {sorted(copied.keys() - owned)} revoked during the "
                  f"batch; aborting it", flush=True)
            abort_and_rewind()
            continue
        with watched("send_offsets_to_transaction", 10):
            producer.send_offsets_to_transaction([TopicPartition(source, p, o) for p, o in copied.items()],
                                                 consumer.consumer_group_metadata(), 10)
        if not commit():
            abort_and_rewind()
    except KafkaException as exc:
        if exc.args[0].txn_requires_abort():
            abort_and_rewind()
            continue
        print(f"{transactional_id}: fatal {exc.args[0]}; exiting", flush=True)
        sys.exit(3)
