"""The verifier's transaction version 2 client (KIP-890 part 2): the same worker as workload.py, with
its producer replaced by eoslog's own protocol code, because no client installed here speaks version 2
(docs/transactions.md, "Transaction version 2").

The producer follows KIP-890's client rules on one connection to the single broker (the transaction
coordinator, the group coordinator and every partition's leader): InitProducerId, then per transaction
Produce v12 without AddPartitionsToTxn (one batch per send, acks=all, its sequence per partition;
retried with the same sequence, so a retry is answered as a duplicate), AddOffsetsToTxn and
TxnOffsetCommit for what was polled, and EndTxn v5, whose answer is the producer id and epoch of the
next transaction (sequences start again at 0). A request unanswered after REQUEST_TIMEOUT_S is given up
and its connection left to it (closed once it is answered): the nemesis' ``proxy-replay`` fault lets
exactly such a request reach the broker later, after the producer has moved on.

Outcomes follow workload.py's rules: ``ok`` once EndTxn(commit) answered NONE; ``fail`` when the
producer aborted (EndTxn(abort) answered NONE) before asking to commit; ``info`` otherwise once the
commit was asked for, or when the abort itself could not be confirmed.

The forced schedule (``schedule="late-end-txn"``, test-only; run.py's VerifyOptions.schedule): the
known-bug check made deterministic (docs/reliability.md, "The known-bug check"). Each transaction is a
send to partition A, a poll, a send to partition B (A != B); after the send to A, while a request this
worker gave up on is still unanswered, the worker says so (a ``schedule`` line, which the runner hands to
the nemesis instead of the history: ``late-wait``) and waits for that answer, so the nemesis can release
the held EndTxn exactly while this transaction is open with a write in it; then it says ``late-answered``
(with the answers) and, when the transaction ends, ``late-done``. Every transaction decides the other way
from the last EndTxn the worker gave up on (commit first): a late EndTxn(commit) lands in a transaction
that aborts, a late EndTxn(abort) in one that commits, the two cases a late EndTxn can show.

Usage: as workload.py, with ``--transaction-version 2`` (run.py starts it).
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
import time
from typing import Any

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.verify.workload import CALL_TIMEOUT_S, Worker, group_id, transactional_id

PRODUCE, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT, INIT_PRODUCER_ID = 0, 25, 26, 28, 22
REQUEST_TIMEOUT_S = 3.0  # below faults.REPLAY_MIN_HOLD_S, so a held request is always given up
# How long a given-up connection waits for the answer to its request before it is closed (see _request).
ABANDONED_WAIT_S = 60.0
RETRY_BACKOFF_S = 0.05
TRANSACTION_TIMEOUT_MS = 30_000
# Answers after which the same request may simply be sent again.
RETRIABLE = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.KAFKA_STORAGE_ERROR,
})
_WIRE_ERRORS = (OSError, ConnectionError, socket.timeout, struct.error, ValueError)
# The forced schedule: how long a worker waits for the answer to a request it gave up on (the nemesis
# releases it once told; longer only when the nemesis never does, and the run then shows no late write).
LATE_WAIT_S = 30.0
SCHEDULES = ("late-end-txn",)
API_NAMES = {PRODUCE: "Produce", ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn", END_TXN: "EndTxn",
             TXN_OFFSET_COMMIT: "TxnOffsetCommit", INIT_PRODUCER_ID: "InitProducerId"}


@dataclasses.dataclass
class GivenUp:
    """A request this worker gave up on: still out there until ``answered``."""

    api_key: int
    request: Any
    answered: threading.Event = dataclasses.field(default_factory=threading.Event)
    outcome: Any = None  # the response, or the OSError that ended the wait

    def describe(self) -> str:
        name = API_NAMES.get(self.api_key, f"api {self.api_key}")
        if not self.answered.is_set():
            return f"{name}: no answer"
        if isinstance(self.outcome, OSError):
            return f"{name}: {self.outcome}"
        code = getattr(self.outcome, "error_code", None)
        return f"{name}: {ErrorCode(code).name if code is not None else 'answered'}"


class TransactionFailed(Exception):
    """The transaction cannot go on: abort it (or, if that fails, start a new producer)."""


class V2Worker(Worker):
    """workload.Worker with a transaction version 2 producer (the module docstring). workload_v1's worker
    is this one with version 1's requests: it overrides the versions, ``_add_partition`` and ``_ended``."""

    CLIENT_ID = "eoslog-verify-tv2"
    PRODUCE_VERSION, END_TXN_VERSION = 12, 5

    def __init__(self, *args, schedule: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if schedule is not None and (schedule not in SCHEDULES or self.partitions < 2):
            raise ValueError(f"schedule {schedule!r}: one of {SCHEDULES}, with 2 partitions or more")
        self.wire: BrokerConnection | None = None
        self.producer_id, self.producer_epoch = -1, -1
        self.sequences: dict[int, int] = {}  # partition -> next sequence under the current epoch
        self.schedule = schedule
        self.given_up: list[GivenUp] = []  # requests given up on and not yet answered
        self.last_given_up_commit = False  # the decision of the last EndTxn given up on (forced schedule)

    # ------------------------------------------------------------------------------------ the wire

    def _request(self, api_key: int, api_version: int, request):
        """One request and its answer, given up after REQUEST_TIMEOUT_S. A given-up connection is left
        open (its request still out there) and closed once answered, rather than closed at once: the
        broker cancels what a closed connection asked for (server/network.py), so a late request that a
        client's close followed at once would never act, and the check could not show the hole. A
        request delayed in the network while the client's close is delayed too is what this models."""
        if self.wire is None:
            self.wire = BrokerConnection.from_bootstrap(self.bootstrap, timeout_s=ABANDONED_WAIT_S,
                                                        client_id=f"{self.CLIENT_ID}-{self.process}")
        wire, lock, abandoned = self.wire, threading.Lock(), []
        pending = GivenUp(api_key, request)

        def call() -> None:
            try:
                outcome = wire.request(api_key, api_version, request)
            except Exception as exc:  # noqa: BLE001 - every failure is "no answer" to the caller
                outcome = OSError(f"{type(exc).__name__}: {exc}")
            with lock:
                pending.outcome = outcome
                pending.answered.set()
                close = bool(abandoned)
            if close:  # given up on meanwhile: nobody else will close it
                try:
                    wire.close()
                except OSError:
                    pass

        threading.Thread(target=call, name="eoslog-verify-request", daemon=True).start()
        pending.answered.wait(REQUEST_TIMEOUT_S)
        with lock:
            if not pending.answered.is_set():
                abandoned.append(True)
        if abandoned:
            self.wire = None  # left to its request; call() closes it once answered
            self.given_up = [g for g in self.given_up if not g.answered.is_set()] + [pending]
            if api_key == END_TXN:
                self.last_given_up_commit = bool(request.committed)
            raise OSError(f"no answer within {REQUEST_TIMEOUT_S} s")
        if isinstance(pending.outcome, OSError):
            self._disconnect()
            raise pending.outcome
        return pending.outcome

    def _disconnect(self) -> None:
        if self.wire is not None:
            try:
                self.wire.close()
            except OSError:
                pass
            self.wire = None

    def _until_answered(self, name: str, send, deadline_s: float = CALL_TIMEOUT_S) -> ErrorCode:
        """``send()`` returns an error code; sent again on a retriable answer or a lost connection
        until NONE, another error, or the deadline (TransactionFailed)."""
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                code = ErrorCode(send())
            except OSError:
                code = None
            if code is not None and code not in RETRIABLE:
                return code
            if time.monotonic() > deadline or self.stopping:
                raise TransactionFailed(f"{name}: no answer before the deadline ({code})")
            time.sleep(RETRY_BACKOFF_S)

    def plan(self) -> list[list]:
        """A send, a poll (the transaction stays open on the coordinator meanwhile, where a late EndTxn
        can land), then one to three sends. The same plan for both raw clients (workload_v1 too), so a
        run of each under the same faults compares the protocols: under version 1, a send to a
        partition not yet in the transaction after a late EndTxn opens a new transaction on the
        coordinator, which is what makes the late EndTxn visible to the checker."""
        if self.schedule is not None:  # the forced schedule: send to A, poll, send to B
            a, b = self.random.sample(range(self.partitions), 2)
            self.next_value += 2
            return [["send", self.key(a), self.next_value - 1], ["poll"], ["send", self.key(b), self.next_value]]
        mops: list[list] = []
        for mop in ("send", "poll", *["send"] * self.random.randint(1, 3)):
            if mop == "send":
                self.next_value += 1
                mops.append(["send", self.key(self.random.randrange(self.partitions)), self.next_value])
            else:
                mops.append(["poll"])
        return mops

    # ------------------------------------------------------------------------------------ producer

    def _new_producer(self) -> None:
        """InitProducerId as a new producer instance (fencing, and aborting, what the last one left)."""
        self._drop_producer()
        request = messages.InitProducerIdRequest(transactional_id=transactional_id(self.slot),
                                                 transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                                                 producer_id=-1, producer_epoch=-1)
        while not self.stopping:
            try:
                response = self._request(INIT_PRODUCER_ID, 4, request)
            except OSError:
                time.sleep(0.2)
                continue
            if response.error_code == ErrorCode.NONE:
                self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
                self.sequences.clear()
                self.producer = self  # workload.Worker's "a producer is ready"
                return
            time.sleep(0.2)

    def _drop_producer(self) -> None:
        self.producer = None
        self.producer_id, self.producer_epoch = -1, -1

    def _add_partition(self, partition: int) -> None:
        """Before a send to ``partition``: nothing under version 2, where the Produce adds the partition to
        the transaction (KIP-890 part 2); version 1's AddPartitionsToTxn (workload_v1)."""

    def _produce(self, partition: int, value: int) -> int:
        """The offset the broker gave the record; TransactionFailed when it cannot be told."""
        self._add_partition(partition)
        sequence = self.sequences.get(partition, 0)
        batch = build_batch([SimpleRecord(None, str(value).encode())], producer_id=self.producer_id,
                            producer_epoch=self.producer_epoch, base_sequence=sequence, is_transactional=True)
        Data = messages.ProduceRequest.TopicProduceData
        request = messages.ProduceRequest(
            transactional_id=transactional_id(self.slot), acks=-1, timeout_ms=int(REQUEST_TIMEOUT_S * 1000),
            topic_data=[Data(name=self.topic, partition_data=[Data.PartitionProduceData(index=partition,
                                                                                        records=batch)])])
        answer: list = []

        def send() -> int:
            answer[:] = [self._request(PRODUCE, self.PRODUCE_VERSION, request).responses[0].partition_responses[0]]
            return answer[0].error_code

        code = self._until_answered("produce", send)
        if code is not ErrorCode.NONE:
            raise TransactionFailed(f"produce: {code.name}")
        self.sequences[partition] = sequence + 1
        return answer[0].base_offset

    def _send_offsets(self) -> None:
        tid, group = transactional_id(self.slot), group_id(self.slot)
        add = messages.AddOffsetsToTxnRequest(transactional_id=tid, producer_id=self.producer_id,
                                              producer_epoch=self.producer_epoch, group_id=group)
        code = self._until_answered("add_offsets", lambda: self._request(ADD_OFFSETS_TO_TXN, 3, add).error_code)
        if code is not ErrorCode.NONE:
            raise TransactionFailed(f"add_offsets: {code.name}")
        Topic = messages.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        Partition = messages.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
        commit = messages.TxnOffsetCommitRequest(
            transactional_id=tid, group_id=group, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[Topic(name=self.topic, partitions=[
                Partition(partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=None)
                for p, o in sorted(self.polled.items())])])

        def send() -> int:
            response = self._request(TXN_OFFSET_COMMIT, 3, commit)
            codes = {p.error_code for t in response.topics for p in t.partitions}
            return max(codes, key=lambda c: c != 0) if codes else ErrorCode.UNKNOWN_SERVER_ERROR

        code = self._until_answered("txn_offset_commit", send)
        if code is not ErrorCode.NONE:
            raise TransactionFailed(f"txn_offset_commit: {code.name}")

    def _end(self, commit: bool) -> None:
        """EndTxn, sent again (same identity) until answered: the coordinator answers a retry of the
        EndTxn that ended the transaction as it answered the first. Raises TransactionFailed."""
        request = messages.EndTxnRequest(transactional_id=transactional_id(self.slot), producer_id=self.producer_id,
                                         producer_epoch=self.producer_epoch, committed=commit)
        answer: list = []

        def send() -> int:
            answer[:] = [self._request(END_TXN, self.END_TXN_VERSION, request)]
            return answer[0].error_code

        code = self._until_answered("end_txn", send, 3 * CALL_TIMEOUT_S)
        self._ended(code, answer[0] if answer else None)
        if code is not ErrorCode.NONE:
            raise TransactionFailed(f"end_txn: {code.name}")

    def _ended(self, code: ErrorCode, response) -> None:
        """After EndTxn's last answer. Version 2 (v5): a NONE answer carries the next transaction's producer
        id and epoch, whose sequences start at 0."""
        if code is ErrorCode.NONE:
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
            self.sequences.clear()

    # ------------------------------------------------------------------------------------ transactions

    def _await_given_up(self) -> bool:
        """The forced schedule, once the open transaction holds a write: while requests given up on are
        unanswered, say so and wait for their answers (LATE_WAIT_S at most); True when it waited."""
        pending = [g for g in self.given_up if not g.answered.is_set()]
        if not pending:
            return False
        self.emit("schedule", "late-wait", [g.describe() for g in pending])
        deadline = time.monotonic() + LATE_WAIT_S
        for given_up in pending:
            given_up.answered.wait(max(0.0, deadline - time.monotonic()))
        self.emit("schedule", "late-answered", [g.describe() for g in pending])
        self.given_up = [g for g in self.given_up if not g.answered.is_set()]
        return True

    def run(self, max_transactions: int | None = None) -> None:
        try:
            super().run(max_transactions)
        finally:
            self._disconnect()

    def transaction(self, mops: list[list]) -> str:
        assert self.consumer is not None
        self.emit("invoke", "txn", mops)
        completed: list[list] = []
        waited = False  # the forced schedule: a late answer landed while this transaction was open

        def finish(outcome: str) -> str:
            self.emit(outcome, "txn", completed + mops[len(completed):])
            if outcome != "ok":
                self._assign()
            if waited:
                self.emit("schedule", "late-done", outcome)
            return outcome

        commit_attempted = False
        try:
            polled_now = False
            for mop in mops:
                if mop[0] == "send":
                    partition = int(mop[1].rsplit("-", 1)[1])
                    completed.append(list(mop))
                    completed[-1].append(self._produce(partition, mop[2]))
                    if self.schedule is not None and len(completed) == 1:
                        waited = self._await_given_up()
                else:
                    completed.append(["poll", self._poll()])
                    polled_now = True
            if polled_now and self.polled:
                self._send_offsets()
            # The forced schedule aborts after a commit given up on, commits after an abort (or none).
            if (self.last_given_up_commit if self.schedule is not None
                    else self.random.random() < self.abort_rate):
                self._end(commit=False)
                return finish("fail")
            commit_attempted = True
            self._end(commit=True)
            return finish("ok")
        except TransactionFailed:
            if commit_attempted:
                self._drop_producer()  # the next InitProducerId settles it, whatever it was
                return finish("info")
            try:
                self._end(commit=False)
            except TransactionFailed:
                self._drop_producer()
                return finish("info")
            return finish("fail")
