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

- **txn-consumer** (transactional mode): a work-queue worker, a ``ShareConsumer`` (explicit mode) and
  an eoslog ``ShareTxnProducer`` (client/share_txn.py) under a transactional id of its slot (a
  replacement fences its predecessor, whose open transaction aborts), initialized before the first poll.
  After each poll (at most ``TXN_MAX_POLL_RECORDS``) it records what it got and the transaction it begins
  (``txn`` invoke), writes one output per input to the output topic (``[input partition, input offset,
  input value, process, transaction id]``, to the input's partition, one batch per partition), ACCEPTs
  the inputs inside the transaction and commits, or aborts on purpose (``--abort-rate``), or
  SIGKILLs itself there, holding the inputs with its outputs written (``--crash-rate``, ``--crash-in``), or
  aborts because the acknowledgement was refused (a lock that ran out, a moved leader). It records the
  outcome as the client saw it: ``ok`` committed, ``fail`` aborted, ``info`` unknown (then it starts a new
  producer, whose InitProducerId ends the old transaction; so it does after a fenced transaction).
  Last, librdkafka's explicit mode wants every record answered before the next poll: the member RELEASEs
  them. For records the transaction took the broker refuses that, or ignores it once the share-partition
  start offset has passed them, whatever the answer for the rest of the partition. So those are recorded as ``ack`` lines with an unknown outcome,
  and only the others get the partition's answer. The others are the poison records, which never go
  into a transaction and are only released this way, so the delivery limit archives them here too.

Usage (the runner starts it): ``python -m eoslog.verify.queue_workload --bootstrap H:P --process N
--role producer|consumer|txn-consumer --topic t --partitions 4 --group g --seed X`` (and for
txn-consumer ``--output-topic o --transactional-id i --abort-rate r``); SIGTERM ends it.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import random
import signal
import sys
import time
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Producer, ShareConsumer

from eoslog.client.share_txn import ACCEPT, ShareTxnProducer
from eoslog.protocol.errors import ErrorCode
from eoslog.verify.workload import CLIENT_TUNING, VALUES_PER_PROCESS

POISON_EVERY = 97  # values divisible by this are always released: the delivery limit archives them
RELEASE_RATE = 0.08  # of first deliveries
REJECT_RATE = 0.03
SLOW_RATE = 0.01  # polls after which the consumer waits past the lock before acknowledging
COMMIT_TIMEOUT_S = 10.0
TXN_TIMEOUT_MS = 6000  # a killed worker's transaction holds its inputs until this, or its successor's init
TXN_CALL_TIMEOUT_S = 10.0  # ShareTxnProducer's retries of one call
# A worker's poll is one transaction: its outputs written, its ACCEPTs sent and EndTxn, all before the
# records' locks (2 s) and the transaction timeout (6 s) run out, also on a loaded machine. With
# librdkafka's default of 500 records a poll (sent as ShareFetch's MaxRecords) and a Produce per output
# (15-20 ms each under load), a transaction took 7 s and more, and every one timed out or was refused.
# So a poll is bounded (the broker still hands out the first log batch whole), as a real worker sizes its
# polls, and its outputs go as one batch per partition.
TXN_MAX_POLL_RECORDS = 50
IN_TXN_PAUSE_S = 0.05  # at most, between the acknowledgement and EndTxn: a client-kill lands inside
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED})
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


def is_poison(value: Any) -> bool:
    return isinstance(value, int) and value % POISON_EVERY == 0


def choose(value: Any, delivery_count: int, rng: random.Random) -> str:
    """The workload's acknowledgement of one delivery."""
    if is_poison(value):
        return "release"
    roll = rng.random()
    if roll < REJECT_RATE:
        return "reject"
    if roll < REJECT_RATE + RELEASE_RATE and delivery_count == 1:
        return "release"
    return "accept"


class Stop:
    stopping = False


def produce_outcome(error, partition: int, value: Any, offset: int | None) -> tuple[str, str, list]:
    """A delivery report's history line: ``ok`` with the offset, or ``info`` (it may be in the log) for
    an error, and for a success without an offset (librdkafka reports one now and then under leader
    kills, an idempotent batch whose offset it did not learn: seen as ``[2, 10000282, None]``)."""
    if error is None and isinstance(offset, int) and offset >= 0:
        return "ok", "produce", [partition, value, offset]
    return "info", "produce", [partition, value]


def run_producer(bootstrap: str, process: int, topic: str, partitions: int, rng: random.Random,
                 stop: Stop, think_ms: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 20_000, "request.timeout.ms": 10_000,
                         **CLIENT_TUNING})
    next_value = process * VALUES_PER_PROCESS

    def report(error, message) -> None:
        emit(*produce_outcome(error, message.partition(), decode(message.value()), message.offset()))

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


class TxnWorker:
    """The txn-consumer role (module docstring): a ShareConsumer and a ShareTxnProducer."""

    def __init__(self, bootstrap: str, group: str, topic: str, output_topic: str, transactional_id: str,
                 process: int, rng: random.Random, stop: Stop, *, abort_rate: float, lock_ms: int,
                 crash_rate: float = 0.0, crash_in: int | None = None) -> None:
        self.bootstrap, self.group, self.topic, self.output_topic = bootstrap, group, topic, output_topic
        self.transactional_id, self.process, self.rng, self.stop = transactional_id, process, rng, stop
        self.abort_rate, self.lock_ms, self.crash_rate, self.crash_in = abort_rate, lock_ms, crash_rate, crash_in
        self.producer: ShareTxnProducer | None = None
        self.txn_id = 0

    def _producer(self) -> ShareTxnProducer:
        """A producer after InitProducerId, which ends whatever transaction the id had open (retried while
        the broker is away)."""
        while self.producer is None and not self.stop.stopping:
            producer = ShareTxnProducer(self.bootstrap, self.transactional_id, transaction_timeout_ms=TXN_TIMEOUT_MS,
                                        timeout_s=TXN_CALL_TIMEOUT_S)
            try:
                producer.init()
            except Exception as exc:  # noqa: BLE001 - the broker away or moving: try again
                print(f"init: {exc}", file=sys.stderr, flush=True)
                producer.close()
                time.sleep(0.5)
            else:
                self.producer = producer
        if self.producer is None:
            raise KeyboardInterrupt  # stopping
        return self.producer

    def _drop_producer(self) -> None:
        if self.producer is not None:
            with contextlib.suppress(Exception):  # its connections may be gone already
                self.producer.close()
            self.producer = None

    def transaction(self, messages: list, got: list) -> None:
        """One transaction over one poll's records (the history lines in queue_checker.py)."""
        producer = self._producer()
        self.txn_id += 1
        emit("invoke", "txn", {"id": self.txn_id, "records": got})
        end = "abort" if self.rng.random() < self.abort_rate else "commit"
        acknowledged = fenced = False
        try:
            # one batch of outputs per partition, as a client's batching would make them: one Produce each
            outputs: dict[int, list[tuple[bytes, bytes]]] = {}
            for partition, offset, value, _ in got:
                output = json.dumps([partition, offset, value, self.process, self.txn_id]).encode()
                outputs.setdefault(partition, []).append((f"{partition}:{offset}".encode(), output))
            for partition, records in sorted(outputs.items()):
                producer.send_batch(self.output_topic, partition, records)
            if self.rng.random() < SLOW_RATE:
                time.sleep(self.lock_ms / 1000 * 1.5)  # the lock runs out: the acknowledgement must be refused
            producer.acknowledge(self.group, [(m.topic(), m.partition(), m.offset(), ACCEPT, m.delivery_count())
                                              for m in messages])
            acknowledged = True
            # dies holding its inputs, its outputs written
            if self.rng.random() < self.crash_rate or (self.crash_in is not None and self.txn_id >= self.crash_in):
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(self.rng.uniform(0, IN_TXN_PAUSE_S))
        except Exception as exc:  # noqa: BLE001 - refused or unreachable: this transaction aborts
            print(f"txn {self.txn_id}: {exc}", file=sys.stderr, flush=True)
            end = "abort"
            # Fenced (the coordinator aborted it past its timeout and bumped the epoch): the old epoch's
            # abort is answered as done, but every later transaction of this producer would be refused at
            # once, so the next one starts with a new producer (its InitProducerId takes the new epoch).
            fenced = getattr(exc, "code", None) in FENCED
        try:
            if end == "commit":
                producer.commit()
                emit("ok", "txn", {"id": self.txn_id})
            else:
                producer.abort()
                emit("fail", "txn", {"id": self.txn_id, "acknowledged": acknowledged})
                if fenced:
                    self._drop_producer()
        except Exception as exc:  # noqa: BLE001 - the outcome is unknown; a new producer's init ends it
            print(f"txn {self.txn_id} {end}: {exc}", file=sys.stderr, flush=True)
            emit("info", "txn", {"id": self.txn_id, "end": end})
            self._drop_producer()

    def run(self) -> None:
        consumer = ShareConsumer({**consumer_config(self.bootstrap, self.group),
                                  "max.poll.records": TXN_MAX_POLL_RECORDS})
        consumer.subscribe([self.topic])
        try:
            # InitProducerId before the first poll, as a worker calls initTransactions() at start: the
            # first records' locks run while the transaction is open, not while the producer is found
            # (the first one also creates __transaction_state)
            self._producer()
            while not self.stop.stopping:
                try:
                    messages = [m for m in consumer.poll(0.5) or () if m.error() is None]
                    if not messages:
                        continue
                    got = [[m.partition(), m.offset(), decode(m.value()), m.delivery_count()] for m in messages]
                    emit("ok", "deliver", got)
                    # the poison records stay out of transactions: only released, the limit archives them
                    work = [(m, g) for m, g in zip(messages, got) if not is_poison(g[2])]
                    if work:
                        self.transaction([m for m, _ in work], [g for _, g in work])
                    # librdkafka's explicit mode: every record answered before the next poll. For a record
                    # the transaction took, the RELEASE is refused, or ignored once the share-partition start
                    # offset passed it (as Kafka does), even in a batch whose other records it releases: its
                    # own outcome is unknown whatever the partition's answer. The others' is that answer.
                    taken = [g for _, g in work]
                    if taken:
                        emit("invoke", "ack", [g + ["release"] for g in taken])
                        emit("ok", "ack", {str(g[0]): "info" for g in taken})
                    for m in messages:
                        consumer.acknowledge(m, AcknowledgeType.RELEASE)
                    rest = [g for g in got if is_poison(g[2])]
                    if not rest:
                        consumer.commit_sync(COMMIT_TIMEOUT_S)
                        continue
                    emit("invoke", "ack", [g + ["release"] for g in rest])
                    touched = {g[0] for g in rest}
                    try:
                        answer = consumer.commit_sync(COMMIT_TIMEOUT_S)
                    except KafkaException:
                        emit("ok", "ack", {str(p): "info" for p in touched})
                    else:
                        emit("ok", "ack", statuses(answer or {}, touched))
                except KafkaException as exc:
                    print(f"poll/ack error: {exc}", file=sys.stderr, flush=True)
                    time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            self._drop_producer()
            consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eoslog.verify.queue_workload")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--process", type=int, required=True)
    parser.add_argument("--role", choices=("producer", "consumer", "txn-consumer"), required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--think-ms", type=float, default=5.0)
    parser.add_argument("--lock-ms", type=int, default=2000)
    parser.add_argument("--output-topic", default="out")
    parser.add_argument("--transactional-id", default=None)
    parser.add_argument("--abort-rate", type=float, default=0.1)
    parser.add_argument("--crash-rate", type=float, default=0.0,
                        help="txn-consumer: SIGKILL itself inside this share of its transactions")
    parser.add_argument("--crash-in", type=int, default=None, help="txn-consumer: ... and inside this one")
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
    elif args.role == "txn-consumer":
        TxnWorker(args.bootstrap, args.group, args.topic, args.output_topic,
                  args.transactional_id or f"eoslog-verify-queue-{args.process}", args.process, rng, stop,
                  abort_rate=args.abort_rate, lock_ms=args.lock_ms, crash_rate=args.crash_rate,
                  crash_in=args.crash_in).run()
    else:
        run_consumer(args.bootstrap, args.group, args.topic, rng, stop, args.lock_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
