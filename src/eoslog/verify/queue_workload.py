"""The queue workload's clients (``eoslog verify --workload queue``): one process is a producer or a share
consumer, reporting what it did as history lines on stdout (queue_checker.py documents them; the runner,
queue_run.py, adds the process and the index).

- **producer**: an idempotent confluent-kafka producer (acks=all) writes uniquely numbered records
  (process N writes ``N*10^7 + 1``, ``+ 2``, ...) round the partitions. Each record is an ``invoke`` line
  before it is handed to the client (a producer killed before its delivery report may still have written
  it), then its delivery report is a line: ``ok`` with the offset, or ``info`` for an error (the record
  may or may not be in the log).
- **consumer**: a confluent-kafka 2.16 ``ShareConsumer`` in explicit acknowledgement mode. After each
  poll it records what it got, then acknowledges every record: ACCEPT most, RELEASE some (only on their
  first delivery, so a record is not released into the limit by chance), REJECT a few, and always
  RELEASE the *poison* records (every ``POISON_EVERY``-th value), which the delivery limit must archive.
  It records the acknowledgements, calls ``commit_sync``, and records the answer per partition. Now and
  then it waits past the record lock before acknowledging, so locks run out under it.

Usage (the runner starts it): ``python -m eoslog.verify.queue_workload --bootstrap H:P --process N
--role producer|consumer --topic t --partitions 4 --group g --seed X``; SIGTERM ends it.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import random
import signal
import sys
import time
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Producer, ShareConsumer

from eoslog.verify.workload import CLIENT_TUNING, VALUES_PER_PROCESS

POISON_EVERY = 97  # values divisible by this are always released: the delivery limit archives them
RELEASE_RATE = 0.08  # of first deliveries
REJECT_RATE = 0.03
SLOW_RATE = 0.01  # polls after which the consumer waits past the lock before acknowledging
COMMIT_TIMEOUT_S = 10.0
ACK_TYPES = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE, "reject": AcknowledgeType.REJECT}
# Every error is "info" (may or may not have been applied), even INVALID_RECORD_STATE, which by itself
# means nothing changed: a client that resends an acknowledgement whose answer it lost gets it for the
# first attempt's success. "fail" would let the checker call such a record lost.
DEFINITE_FAILURES: frozenset = frozenset()


def emit(type_: str, f: str, value: Any = None) -> None:
    line = {"type": type_, "f": f, "time": time.time()}
    if value is not None:
        line["value"] = value
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def decode(raw: bytes | None) -> Any:
    text = (raw or b"").decode("utf-8", "replace")
    try:
        return int(text)
    except ValueError:
        return text


def choose(value: Any, delivery_count: int, rng: random.Random) -> str:
    """The workload's acknowledgement of one delivery."""
    if isinstance(value, int) and value % POISON_EVERY == 0:
        return "release"
    roll = rng.random()
    if roll < REJECT_RATE:
        return "reject"
    if roll < REJECT_RATE + RELEASE_RATE and delivery_count == 1:
        return "release"
    return "accept"


class Stop:
    stopping = False


def run_producer(bootstrap: str, process: int, topic: str, partitions: int, rng: random.Random,
                 stop: Stop, think_ms: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 20_000, "request.timeout.ms": 10_000,
                         **CLIENT_TUNING})
    next_value = process * VALUES_PER_PROCESS

    def report(error, message) -> None:
        value, partition = decode(message.value()), message.partition()
        if error is None:
            emit("ok", "produce", [partition, value, message.offset()])
        else:
            emit("info", "produce", [partition, value])

    while not stop.stopping:
        next_value += 1
        # first the intent: a producer killed before its delivery report may still have written it
        emit("invoke", "produce", [next_value % partitions, next_value])
        try:
            producer.produce(topic, str(next_value).encode(), partition=next_value % partitions, on_delivery=report)
        except BufferError:
            producer.poll(0.1)
            continue
        producer.poll(0)
        time.sleep(rng.uniform(0, 2 * think_ms) / 1000)
    producer.flush(30)


def statuses(answer: dict, partitions: set[int]) -> dict[str, str]:
    """commit_sync's answer per partition -> ok, fail (nothing applied) or info (unknown)."""
    out = {str(p): "info" for p in partitions}
    for tp, error in answer.items():
        if tp.partition not in partitions:
            continue
        if error is None:
            out[str(tp.partition)] = "ok"
        else:
            code = error.args[0].code() if error.args and isinstance(error.args[0], KafkaError) else None
            out[str(tp.partition)] = "fail" if code in DEFINITE_FAILURES else "info"
    return out


def consume_once(consumer: ShareConsumer, rng: random.Random, *, slow_s: float = 0.0,
                 choose_ack=choose, poll_s: float = 0.5, record=None) -> int:
    """One poll, its records acknowledged and committed, everything recorded (``record(type, f, value)``,
    by default a line on stdout); returns how many."""
    emit_ = record or emit
    messages = [m for m in consumer.poll(poll_s) or () if m.error() is None]
    if not messages:
        return 0
    got = [[m.partition(), m.offset(), decode(m.value()), m.delivery_count()] for m in messages]
    emit_("ok", "deliver", got)
    if slow_s:
        time.sleep(slow_s)
    acks = []
    for message, (partition, offset, value, count) in zip(messages, got):
        kind = choose_ack(value, count, rng)
        acks.append([partition, offset, value, count, kind])
        consumer.acknowledge(message, ACK_TYPES[kind])
    emit_("invoke", "ack", acks)
    touched = {a[0] for a in acks}
    try:
        answer = consumer.commit_sync(COMMIT_TIMEOUT_S)
    except KafkaException:
        emit_("ok", "ack", {str(p): "info" for p in touched})
    else:
        emit_("ok", "ack", statuses(answer or {}, touched))
    return len(messages)


def consumer_config(bootstrap: str, group: str) -> dict:
    return {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
            **{k: v for k, v in CLIENT_TUNING.items() if k != "metadata.recovery.strategy"}}


def run_consumer(bootstrap: str, group: str, topic: str, rng: random.Random, stop: Stop, lock_ms: int) -> None:
    consumer = ShareConsumer(consumer_config(bootstrap, group))
    consumer.subscribe([topic])
    try:
        while not stop.stopping:
            slow = lock_ms / 1000 * 1.5 if rng.random() < SLOW_RATE else 0.0
            try:
                consume_once(consumer, rng, slow_s=slow)
            except KafkaException as exc:
                print(f"poll/ack error: {exc}", file=sys.stderr, flush=True)
                time.sleep(0.2)
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eoslog.verify.queue_workload")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--process", type=int, required=True)
    parser.add_argument("--role", choices=("producer", "consumer"), required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--think-ms", type=float, default=5.0)
    parser.add_argument("--lock-ms", type=int, default=2000)
    args = parser.parse_args(argv)
    stop = Stop()

    def on_signal(*_):
        stop.stopping = True

    faulthandler.register(signal.SIGUSR1)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rng = random.Random(args.seed)
    if args.role == "producer":
        run_producer(args.bootstrap, args.process, args.topic, args.partitions, rng, stop, args.think_ms)
    else:
        run_consumer(args.bootstrap, args.group, args.topic, rng, stop, args.lock_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
