"""The verifier's client: one worker process running transactions of sends and polls with a real
Kafka client (confluent-kafka), reporting every operation as a history line on stdout.

Each transaction is 1-4 micro-ops, ``send`` (a value unique to its key; a key is a partition, "t-3")
or ``poll`` (whatever the read_committed consumer returns), then ``send_offsets_to_transaction`` for
what was polled, then commit, or abort at random. The runner (run.py) turns the lines into the history
file (docs/reliability.md, "The history format"), adding the process and the index; a worker that dies
mid-transaction leaves it indefinite, because the runner records a crash when the worker's stdout ends.

Outcomes follow Jepsen's rule for Kafka clients (../shared/research/anchors.md):

- ``ok``: commit_transaction returned.
- ``fail`` (definitely did not happen): the client aborted before asking to commit, or an error ended
  the transaction before the commit was attempted (fenced, invalid epoch, out-of-order sequence, ...):
  nothing but an EndTxn(commit) from this producer can commit it, and none was sent.
- ``info`` (may have happened): any error once the commit was attempted (timeouts, disconnects,
  unknown server errors, a commit that needs an abort), and a failed abort, where we cannot tell what
  the broker did with the transaction.

Usage (the runner starts it): ``python -m eoslog.verify.workload --bootstrap H:P --process N --slot S
--topic t --partitions 4 --seed X``; SIGTERM ends it after the current transaction.
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
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

# Seconds allowed to each transactional call: long enough to ride out a broker restart or pause.
CALL_TIMEOUT_S = 10.0
# librdkafka 2.16 can block in send_offsets_to_transaction() far past its timeout after the broker
# restarts (its coordinator-request state machine waits for a broker state change that never comes;
# confluentinc/librdkafka#5456 and #5511). A call that overruns its timeout by this much ends the
# worker: the runner records a crash and starts a replacement, as for any client crash.
WATCHDOG_GRACE_S = 5.0
WATCHDOG_EXIT = 70
# librdkafka settings that make a client notice a dead connection and come back quickly on loopback.
CLIENT_TUNING = {
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
    "retry.backoff.ms": 50,
    "retry.backoff.max.ms": 500,
    "socket.connection.setup.timeout.ms": 5000,
    "topic.metadata.refresh.interval.ms": 5000,
    # No re-bootstrap when every broker is unreachable (a broker restart): it decommissions the broker
    # handle that the group-coordinator cache still points at, and send_offsets_to_transaction() then
    # waits forever (see WATCHDOG_GRACE_S). One broker at a fixed address gains nothing from it.
    "metadata.recovery.strategy": "none",
    "log_level": 4,
}
# librdkafka's debug contexts for a worker (e.g. "eos,protocol"), from the environment: debugging aid.
if os.environ.get("EOSLOG_VERIFY_CLIENT_DEBUG"):
    CLIENT_TUNING = {**CLIENT_TUNING, "debug": os.environ["EOSLOG_VERIFY_CLIENT_DEBUG"], "log_level": 7}
MAX_POLL_RECORDS = 16
VALUES_PER_PROCESS = 10_000_000  # process N writes values N*VALUES_PER_PROCESS + 1, + 2, ...


def transactional_id(slot: int) -> str:
    """One transactional id per worker slot: a replacement worker fences its crashed predecessor and
    aborts the transaction it left open, instead of leaving the LSO stuck until the timeout."""
    return f"eoslog-verify-{slot}"


def group_id(slot: int) -> str:
    return f"eoslog-verify-{slot}"


def producer_config(bootstrap: str, slot: int) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id(slot),
        "enable.idempotence": True,
        "linger.ms": 2,
        "transaction.timeout.ms": 30_000,
        "message.timeout.ms": 20_000,
        "request.timeout.ms": 10_000,
        **CLIENT_TUNING,
    }


def consumer_config(bootstrap: str, group: str) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 50,
        **CLIENT_TUNING,
    }


def decode_value(raw: bytes | None) -> Any:
    text = (raw or b"").decode("utf-8", "replace")
    try:
        return int(text)
    except ValueError:
        return text  # not ours: the checker reports it as an unwritten read


def skip_refused_batch(consumer: Consumer, topic: str, message) -> bool:
    """Seeks one offset past a fetch the broker refused with CORRUPT_MESSAGE; True when it did.

    The broker refuses a stored batch whose CRC fails (docs/durability.md, "Corruption"); librdkafka then
    fetches the same offset after every back-off, forever. On a single node that batch's records are
    gone, which the run's ``bitflip`` fault records (FaultWindow.damaged) and the checker excuses, so the
    reader steps over them: one offset per refusal, as the broker answers any offset inside the batch
    with the same refusal until the seek passes its end."""
    error = message.error()
    if error is None or error.code() != KafkaError.INVALID_MSG:
        return False
    partition, offset = message.partition(), message.offset()
    if partition is None or offset is None or offset < 0:
        return False
    print(f"{topic}-{partition}: offset {offset} refused as corrupt; seeking to {offset + 1}",
          file=sys.stderr, flush=True)
    consumer.seek(TopicPartition(topic, partition, offset + 1))
    return True


class Worker:
    """Runs transactions until told to stop. ``emit(type, f, value)`` receives each history line."""

    def __init__(self, bootstrap: str, process: int, slot: int, topic: str, partitions: int, *,
                 seed: int, abort_rate: float = 0.15, think_ms: float = 0.0, emit=None) -> None:
        self.bootstrap = bootstrap
        self.process = process
        self.slot = slot
        self.topic = topic
        self.partitions = partitions
        self.random = random.Random(seed)
        self.abort_rate = abort_rate
        self.think_s = think_ms / 1000.0
        self.emit = emit or self._print
        self.stopping = False
        self.next_value = process * VALUES_PER_PROCESS
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.polled: dict[int, int] = {}  # partition -> next offset after what this consumer returned
        self._call: tuple[str, float] | None = None  # the blocking client call in progress, its deadline
        threading.Thread(target=self._watchdog, name="eoslog-verify-watchdog", daemon=True).start()

    @staticmethod
    def _print(type_: str, f: str, value: Any) -> None:
        line = {"type": type_, "f": f, "time": time.time()}
        if value is not None:
            line["value"] = value
        sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def key(self, partition: int) -> str:
        return f"{self.topic}-{partition}"

    # ------------------------------------------------------------------------------------ clients

    @contextlib.contextmanager
    def _watch(self, name: str, timeout: float = CALL_TIMEOUT_S):
        self._call = (name, time.monotonic() + timeout + WATCHDOG_GRACE_S)
        try:
            yield
        finally:
            self._call = None

    def _watchdog(self) -> None:
        while True:
            time.sleep(0.5)
            call = self._call
            if call is not None and time.monotonic() > call[1]:
                sys.stderr.write(f"eoslog verify worker {self.process}: {call[0]} overran its timeout; "
                                 f"exiting ({WATCHDOG_EXIT})\n")
                sys.stderr.flush()
                os._exit(WATCHDOG_EXIT)

    def _new_producer(self) -> None:
        """A producer with its transactions initialised; retried until it works or we are told to stop
        (the broker may be down or paused right now)."""
        self._drop_producer()
        while not self.stopping:
            producer = Producer(producer_config(self.bootstrap, self.slot))
            try:
                with self._watch("init_transactions"):
                    producer.init_transactions(CALL_TIMEOUT_S)
            except KafkaException:
                producer.purge()
                producer.flush(0)
                time.sleep(0.2)
                continue
            self.producer = producer
            return

    def _drop_producer(self) -> None:
        if self.producer is not None:
            try:
                self.producer.purge()
                self.producer.flush(0)
            except KafkaException:
                pass  # a producer in a fatal state (fenced, INVALID_TXN_STATE) raises it again here: drop it
            self.producer = None

    def _assign(self) -> None:
        """(Re)start reading every partition from the group's committed offsets: after a transaction
        that did not commit, its polls must be read again."""
        assert self.consumer is not None
        self.consumer.unassign()
        self.consumer.assign([TopicPartition(self.topic, p) for p in range(self.partitions)])
        self.polled.clear()
        self.emit("ok", "assign", [self.key(p) for p in range(self.partitions)])

    # ------------------------------------------------------------------------------------ transactions

    def plan(self) -> list[list]:
        mops: list[list] = []
        for _ in range(self.random.randint(1, 4)):
            if self.random.random() < 0.5:
                self.next_value += 1
                mops.append(["send", self.key(self.random.randrange(self.partitions)), self.next_value])
            else:
                mops.append(["poll"])
        return mops

    def run(self, max_transactions: int | None = None) -> None:
        self.consumer = Consumer(consumer_config(self.bootstrap, group_id(self.slot)))
        self._assign()
        self._new_producer()
        done = 0
        while not self.stopping and (max_transactions is None or done < max_transactions):
            if self.producer is None:
                self._new_producer()
                continue
            self.transaction(self.plan())
            done += 1
            if self.think_s:
                time.sleep(self.random.uniform(0, 2 * self.think_s))
        self._drop_producer()
        with self._watch("close"):
            self.consumer.close()

    def transaction(self, mops: list[list]) -> str:
        assert self.producer is not None and self.consumer is not None
        producer = self.producer
        self.emit("invoke", "txn", mops)
        completed: list[list] = []
        delivered: dict[int, int] = {}  # position in completed -> offset the broker assigned

        def on_delivery(position: int):
            def callback(error, message) -> None:
                if error is None and message.offset() is not None and message.offset() >= 0:
                    delivered[position] = message.offset()
            return callback

        def finish(outcome: str) -> str:
            value = [m + [delivered[i]] if m[0] == "send" and i in delivered else m
                     for i, m in enumerate(completed)]
            # Sends that never got as far as produce() are still part of what was attempted.
            value += mops[len(completed):]
            self.emit(outcome, "txn", value)
            if outcome != "ok":
                self._assign()
            return outcome

        commit_attempted = False
        try:
            producer.begin_transaction()
            polled_now = False
            for mop in mops:
                if mop[0] == "send":
                    partition = int(mop[1].rsplit("-", 1)[1])
                    producer.produce(self.topic, value=str(mop[2]).encode(), partition=partition,
                                     on_delivery=on_delivery(len(completed)))
                    completed.append(list(mop))
                    producer.poll(0)
                else:
                    completed.append(["poll", self._poll()])
                    polled_now = True
            if polled_now and self.polled:
                offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(self.polled.items())]
                with self._watch("send_offsets_to_transaction"):
                    producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(),
                                                         CALL_TIMEOUT_S)
            if self.random.random() < self.abort_rate:
                # Flush first so the aborted records really reach the log (abort would purge them).
                with self._watch("flush"):
                    producer.flush(CALL_TIMEOUT_S)
                with self._watch("abort_transaction"):
                    producer.abort_transaction(CALL_TIMEOUT_S)
                return finish("fail")
            commit_attempted = True
            self._commit(producer)
            return finish("ok")
        except KafkaException as exc:
            return finish(self._recover(exc.args[0], commit_attempted))

    def _commit(self, producer: Producer) -> None:
        deadline = time.monotonic() + 3 * CALL_TIMEOUT_S
        while True:
            try:
                with self._watch("commit_transaction"):
                    producer.commit_transaction(CALL_TIMEOUT_S)
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                # A retriable commit error means "call commit again": librdkafka resumes the same EndTxn.
                if not error.retriable() or time.monotonic() > deadline or self.stopping:
                    raise

    def _recover(self, error: KafkaError, commit_attempted: bool) -> str:
        """Classify a failed transaction and leave the producer usable (or dropped, to be recreated)."""
        producer = self.producer
        assert producer is not None
        if error.fatal():
            # Fenced, invalid epoch and the like: this producer is finished. Its transaction can only
            # be aborted now (by the broker, or by our next init_transactions).
            self._drop_producer()
            return "info" if commit_attempted else "fail"
        try:
            with self._watch("abort_transaction"):
                producer.abort_transaction(CALL_TIMEOUT_S)
        except KafkaException:
            self._drop_producer()
            return "info"
        return "info" if commit_attempted else "fail"

    def _poll(self) -> dict[str, list[list]]:
        assert self.consumer is not None
        results: dict[str, list[list]] = {}
        with self._watch("consume", 0.1):
            messages = self.consumer.consume(MAX_POLL_RECORDS, 0.1)
        for message in messages:
            if message.error() is not None:
                skip_refused_batch(self.consumer, self.topic, message)
                continue
            partition, offset = message.partition(), message.offset()
            results.setdefault(self.key(partition), []).append([offset, decode_value(message.value())])
            self.polled[partition] = offset + 1
        return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eoslog.verify.workload")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--process", type=int, required=True)
    parser.add_argument("--slot", type=int, required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--abort-rate", type=float, default=0.15)
    parser.add_argument("--think-ms", type=float, default=0.0)
    parser.add_argument("--transaction-version", type=int, choices=(1, 2), default=1,
                        help="2: eoslog's own KIP-890 part 2 producer (workload_v2.py) instead of confluent-kafka")
    parser.add_argument("--client", choices=("confluent-kafka", "eoslog"), default="confluent-kafka",
                        help="with version 1, eoslog: a raw version 1 producer that gives up on a request and "
                             "goes on in the same epoch (workload_v1.py)")
    parser.add_argument("--schedule", choices=("late-end-txn",), default=None,
                        help="test-only, raw clients only: the forced late-EndTxn schedule (workload_v2.py)")
    args = parser.parse_args(argv)
    worker_class = Worker
    extra = {}
    if args.transaction_version == 2:
        from eoslog.verify.workload_v2 import V2Worker as worker_class
    elif args.client == "eoslog":
        from eoslog.verify.workload_v1 import V1Worker as worker_class
    if args.schedule is not None:
        if worker_class is Worker:
            parser.error("--schedule needs a raw client (--transaction-version 2, or --client eoslog)")
        extra["schedule"] = args.schedule
    worker = worker_class(args.bootstrap, args.process, args.slot, args.topic, args.partitions,
                          seed=args.seed, abort_rate=args.abort_rate, think_ms=args.think_ms, **extra)

    def stop(*_):
        worker.stopping = True

    faulthandler.register(signal.SIGUSR1)  # `kill -USR1` shows where a stuck worker is
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    worker.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
