"""What the transaction coordinator knows about one transactional id, and how it changes.

Contract
- A :class:`TransactionMetadata` is owned by the coordinator's cache and changed only on the broker's
  event-loop thread, by two steps and nothing else:
  1. ``prepare_*()`` checks the move against the state table, builds an immutable
     :class:`TxnTransitMetadata` and marks it pending (``pending_state``). Nothing else changes.
  2. The caller appends the transit to ``__transaction_state`` (log_format.encode_value). Once that
     append is durable it calls ``complete_transition(transit)``, which applies it; if the append
     failed it calls ``abort_transition()`` and the metadata is as if nothing had been prepared.
- While a transit is pending no other may be prepared (the decisions answer
  CONCURRENT_TRANSACTIONS), so the in-memory state never runs ahead of the log.
- ``(previous_producer_id, last_producer_epoch)`` is the one other identity a client may still hold
  legitimately besides ``(producer_id, producer_epoch)``: the one from before a KIP-360 bump, a producer
  id rotation, or a transaction timeout. It is (-1, -1) after any fence by a new producer. It is not
  in the v0 record, so it is lost on reload, as in Kafka (docs/transactions.md).
- Transaction version 2 (KIP-890 part 2, ``client_transaction_version`` 2): EndTxn bumps the epoch as it
  prepares the decision, so the Prepare record and the markers already carry epoch + 1, and the identity
  the EndTxn came with becomes ``(previous_producer_id, last_producer_epoch)``: the one whose EndTxn may be
  retried. When that bump reaches the last epoch (32767) a fresh producer id is allocated at prepare time,
  persisted as ``next_producer_id``, and taken over (at epoch 0) by the Complete record.

- Check-back (eoslog's extension, docs/transactions.md "Check-back transactions"): ``check_back_group`` names
  the producer group that resolves this transaction if its timeout passes. It is set by BeginCheckBack (an
  Empty record) and carried into the transaction that starts next; a transaction started from Complete*
  without it is plain. ``check_count`` >= 0 only in Checking (the checks asked so far), ``next_check_ms``
  when the next is due, ``abort_reason`` why the broker aborted it. ``check_lease_until_ms`` is memory
  only: a poll lent the current check out until then (a restart simply asks again).

Why eoslog has no unlogged PrepareEpochFence step: Kafka bumps the epoch in memory, marks
PrepareEpochFence, then rewrites the pending state to PrepareAbort and logs that (with a flag for a failed
fence write). Here the fence is one transit, Ongoing -> PrepareAbort carrying the bumped epoch, so a failed
append leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from eoslog.coordinator.transaction.state import IllegalStateTransition, TransactionState, check_transition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1
NO_CHECK = -1  # check_count of a transaction that is not Checking
MAX_PRODUCER_EPOCH = 32767  # Java's Short.MAX_VALUE: the epoch field is an int16
# KIP-890's transaction versions, as the client speaks them: 1 = today's protocol (EndTxn <= v4, explicit
# AddPartitionsToTxn); 2 = an epoch bump at every EndTxn (v5+) and partitions added by Produce (v12+).
TRANSACTION_VERSION_1 = 1
TRANSACTION_VERSION_2 = 2


# A new producer identity (InitProducerId) starts with no check-back state at all.
_PLAIN = {"check_back_group": None, "check_count": NO_CHECK, "next_check_ms": NO_TIMESTAMP, "abort_reason": None}


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka never hands 32767 to a client, so the coordinator can always fence by one more bump."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class TransactionResult(Enum):
    """The outcome written by the markers; values are the control record types (ABORT=0, COMMIT=1)."""

    ABORT = 0
    COMMIT = 1


_PREPARE_STATE = {TransactionResult.COMMIT: TransactionState.PREPARE_COMMIT,
                  TransactionResult.ABORT: TransactionState.PREPARE_ABORT}
_COMPLETE_STATE = {TransactionState.PREPARE_COMMIT: TransactionState.COMPLETE_COMMIT,
                   TransactionState.PREPARE_ABORT: TransactionState.COMPLETE_ABORT}


def result_of(state: TransactionState) -> TransactionResult | None:
    """The result a Prepare*/Complete* state stands for, else None."""
    if state in (TransactionState.PREPARE_COMMIT, TransactionState.COMPLETE_COMMIT):
        return TransactionResult.COMMIT
    if state in (TransactionState.PREPARE_ABORT, TransactionState.COMPLETE_ABORT,
                 TransactionState.PREPARE_EPOCH_FENCE):
        return TransactionResult.ABORT
    return None


@dataclass(frozen=True)
class WriteTxnMarkers:
    """Write a ``result`` control batch (producer_id, producer_epoch) on every partition, then report
    back through decisions.markers_written(). The caller adds the coordinator epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    result: TransactionResult
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class TxnTransitMetadata:
    """The whole next value of a TransactionMetadata: what gets logged, then applied."""

    transactional_id: str
    from_state: TransactionState
    state: TransactionState
    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int = 0  # 0 = not known (a v0 record), 1 or 2 otherwise
    # check-back (eoslog's extension; tags 32256-32259 of value version 1)
    check_back_group: str | None = None
    check_count: int = NO_CHECK
    next_check_ms: int = NO_TIMESTAMP
    abort_reason: str | None = None


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = NO_TIMESTAMP
    txn_last_update_timestamp: int = NO_TIMESTAMP
    previous_producer_id: int = NO_PRODUCER_ID
    # Transaction version 2 only: the producer id a Prepare record hands over to when its bump used up
    # the epoch space (see the contract); -1 otherwise.
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: int = 0
    check_back_group: str | None = None
    check_count: int = NO_CHECK
    next_check_ms: int = NO_TIMESTAMP
    abort_reason: str | None = None
    check_lease_until_ms: int = NO_TIMESTAMP  # memory only (see the contract)
    pending_state: TransactionState | None = None
    _pending: TxnTransitMetadata | None = field(default=None, repr=False)

    # ---- queries ------------------------------------------------------------------------------------

    @property
    def pending_transition_in_progress(self) -> bool:
        return self._pending is not None

    @property
    def pending_transit(self) -> TxnTransitMetadata | None:
        return self._pending

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_recoverable_identity(self) -> bool:
        return self.last_producer_epoch != NO_PRODUCER_EPOCH and self.previous_producer_id != NO_PRODUCER_ID

    def is_recoverable_identity(self, producer_id: int, producer_epoch: int) -> bool:
        """(pid, epoch) is the identity this id held just before a bump it did not ask a new producer for."""
        return (self.has_recoverable_identity and producer_id == self.previous_producer_id
                and producer_epoch == self.last_producer_epoch)

    def snapshot(self) -> TxnTransitMetadata:
        """The current value as a transit (for tests and DescribeTransactions); marks nothing pending."""
        return self._transit(self.state, self.producer_id, self.producer_epoch, self.txn_timeout_ms,
                             frozenset(self.topic_partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    # ---- prepare ------------------------------------------------------------------------------------

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int, now_ms: int, *,
                                         remember_current: bool) -> TxnTransitMetadata:
        """InitProducerId between transactions: epoch + 1. ``remember_current`` (KIP-360, the caller
        proved it holds the current identity) keeps the old identity recoverable; otherwise a new
        producer is fencing every older one."""
        if self.is_producer_epoch_exhausted:
            raise IllegalStateTransition(self.transactional_id, self.state, TransactionState.EMPTY,
                                         f"producer epoch {self.producer_epoch} is exhausted")
        previous = (self.producer_id, self.producer_epoch) if remember_current else (-1, -1)
        return self._prepare(TransactionState.EMPTY, self.producer_id, self.producer_epoch + 1,
                             txn_timeout_ms, frozenset(), NO_TIMESTAMP, now_ms,
                             previous_producer_id=previous[0], last_producer_epoch=previous[1], **_PLAIN)

    def prepare_keep_producer_epoch(self, txn_timeout_ms: int, now_ms: int) -> TxnTransitMetadata:
        """InitProducerId retried with the recoverable identity: hand back the current epoch, no bump."""
        return self._prepare(TransactionState.EMPTY, self.producer_id, self.producer_epoch, txn_timeout_ms,
                             frozenset(), NO_TIMESTAMP, now_ms, **_PLAIN)

    def prepare_producer_id_rotation(self, new_producer_id: int, txn_timeout_ms: int, now_ms: int, *,
                                     remember: tuple[int, int] | None) -> TxnTransitMetadata:
        """The epoch space of this producer id is used up: continue with a fresh id at epoch 0."""
        if new_producer_id < 0 or new_producer_id == self.producer_id:
            raise ValueError(f"bad new producer id {new_producer_id}")
        previous = remember if remember is not None else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        return self._prepare(TransactionState.EMPTY, new_producer_id, 0, txn_timeout_ms, frozenset(),
                             NO_TIMESTAMP, now_ms, previous_producer_id=previous[0],
                             last_producer_epoch=previous[1], **_PLAIN)

    def prepare_add_partitions(self, partitions: Iterable[TopicPartition], now_ms: int, *,
                               transaction_version: int | None = None) -> TxnTransitMetadata:
        """``transaction_version``: the client's, when the request tells it (2 for an add made by a
        Produce v12+); None keeps the one recorded."""
        starting = self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                  TransactionState.COMPLETE_ABORT)
        start = now_ms if starting else self.txn_start_timestamp
        # Check-back is for the transaction BeginCheckBack announced (an Empty record): one started after
        # a Complete* record is plain, whatever the transaction before it was.
        group = self.check_back_group if self.state in (TransactionState.EMPTY, TransactionState.ONGOING) else None
        return self._prepare(TransactionState.ONGOING, self.producer_id, self.producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions).union(partitions),
                             start, now_ms, client_transaction_version=transaction_version,
                             check_back_group=group, check_count=NO_CHECK, next_check_ms=NO_TIMESTAMP,
                             abort_reason=None)

    def prepare_abort_or_commit(self, result: TransactionResult, now_ms: int, *,
                                transaction_version: int = TRANSACTION_VERSION_1,
                                next_producer_id: int = NO_PRODUCER_ID,
                                abort_reason: str | None = None) -> TxnTransitMetadata:
        """EndTxn: the logged Prepare record is the decision; markers follow.

        Transaction version 2: the decision is taken under epoch + 1 (the markers carry it, so the
        partitions refuse anything the old epoch still sends), and the EndTxn's own identity is kept as
        the one whose retry is answered. ``next_producer_id`` (>= 0 only when the current epoch is
        exhausted) is the producer id the Complete record moves to."""
        if transaction_version < TRANSACTION_VERSION_2:
            return self._prepare(_PREPARE_STATE[result], self.producer_id, self.producer_epoch,
                                 self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
                                 now_ms, abort_reason=abort_reason)
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise IllegalStateTransition(self.transactional_id, self.state, _PREPARE_STATE[result],
                                         "cannot bump: producer epoch would overflow")
        if (next_producer_id != NO_PRODUCER_ID) != self.is_producer_epoch_exhausted:
            raise ValueError(f"a next producer id is needed exactly when epoch {self.producer_epoch} is exhausted")
        return self._prepare(_PREPARE_STATE[result], self.producer_id, self.producer_epoch + 1,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
                             now_ms, previous_producer_id=self.producer_id, last_producer_epoch=self.producer_epoch,
                             next_producer_id=next_producer_id, client_transaction_version=transaction_version,
                             abort_reason=abort_reason)

    def prepare_fence_and_abort(self, now_ms: int, *, recoverable: bool,
                                abort_reason: str | None = None) -> TxnTransitMetadata:
        """Abort the ongoing transaction under epoch + 1, so requests of the old epoch are refused.

        ``recoverable``: the bump was not caused by a new producer (transaction timeout, or a KIP-360
        InitProducerId from the current identity), so that identity stays recoverable (KIP-588)."""
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise IllegalStateTransition(self.transactional_id, self.state, TransactionState.PREPARE_ABORT,
                                         "cannot fence: producer epoch would overflow")
        previous = (self.producer_id, self.producer_epoch) if recoverable else (-1, -1)
        return self._prepare(TransactionState.PREPARE_ABORT, self.producer_id, self.producer_epoch + 1,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
                             now_ms, previous_producer_id=previous[0], last_producer_epoch=previous[1],
                             abort_reason=abort_reason)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """Every marker is written: Prepare* -> Complete*, and the partition set is cleared."""
        target = _COMPLETE_STATE.get(self.state)
        if target is None:
            raise IllegalStateTransition(self.transactional_id, self.state, TransactionState.COMPLETE_COMMIT,
                                         "markers can only complete a Prepare state")
        if self.next_producer_id != NO_PRODUCER_ID:
            # Transaction version 2, epoch space used up: continue as the fresh producer id at epoch 0.
            return self._prepare(target, self.next_producer_id, 0, self.txn_timeout_ms, frozenset(),
                                 self.txn_start_timestamp, now_ms, next_producer_id=NO_PRODUCER_ID)
        return self._prepare(target, self.producer_id, self.producer_epoch, self.txn_timeout_ms, frozenset(),
                             self.txn_start_timestamp, now_ms)

    def prepare_begin_check_back(self, group: str, now_ms: int) -> TxnTransitMetadata:
        """BeginCheckBack between transactions: the next transaction of this id is resolved by ``group``
        if its timeout passes. Logged as Empty (same producer id and epoch) so a restart keeps it."""
        return self._prepare(TransactionState.EMPTY, self.producer_id, self.producer_epoch, self.txn_timeout_ms,
                             frozenset(), NO_TIMESTAMP, now_ms, check_back_group=group, check_count=NO_CHECK,
                             next_check_ms=NO_TIMESTAMP, abort_reason=None)

    def prepare_checking(self, check_count: int, next_check_ms: int, now_ms: int) -> TxnTransitMetadata:
        """A check-back transaction's timeout passed (count 0), or a check went unanswered or was
        answered unknown (count + 1): ask its group again at ``next_check_ms``."""
        if self.check_back_group is None:
            raise IllegalStateTransition(self.transactional_id, self.state, TransactionState.CHECKING,
                                         "not a check-back transaction")
        return self._prepare(TransactionState.CHECKING, self.producer_id, self.producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
                             now_ms, check_count=check_count, next_check_ms=next_check_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        """transactional.id.expiration.ms: logged as a tombstone; the cache drops the id afterwards."""
        return self._prepare(TransactionState.DEAD, self.producer_id, self.producer_epoch, self.txn_timeout_ms,
                             frozenset(), self.txn_start_timestamp, self.txn_last_update_timestamp)

    # ---- apply ----------------------------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Apply ``transit`` once its record is durable in __transaction_state."""
        if self._pending is None:
            raise IllegalStateTransition(self.transactional_id, self.state, transit.state,
                                         "no transition is pending")
        if transit != self._pending:
            raise IllegalStateTransition(self.transactional_id, self.state, transit.state,
                                         f"completing a transit that is not the pending one ({self._pending})")
        # The table was checked at prepare time and nothing may change the state in between; check again
        # anyway because a wrong apply would silently diverge memory from the log.
        check_transition(self.state, transit.state, self.transactional_id)
        self._apply(transit)

    def abort_transition(self) -> None:
        """The append of the pending transit failed: forget it."""
        self._pending = None
        self.pending_state = None

    def _apply(self, t: TxnTransitMetadata) -> None:
        self.state = t.state
        self.producer_id = t.producer_id
        self.previous_producer_id = t.previous_producer_id
        self.next_producer_id = t.next_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.topic_partitions = set(t.topic_partitions)
        self.txn_start_timestamp = t.txn_start_timestamp
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.client_transaction_version = t.client_transaction_version
        self.check_back_group = t.check_back_group
        self.check_count = t.check_count
        self.next_check_ms = t.next_check_ms
        self.abort_reason = t.abort_reason
        self.check_lease_until_ms = NO_TIMESTAMP  # a logged change ends any lease of the check before it
        self._pending = None
        self.pending_state = None

    # ---- internals ------------------------------------------------------------------------------------

    def _transit(self, state: TransactionState, producer_id: int, producer_epoch: int, txn_timeout_ms: int,
                 topic_partitions: frozenset[TopicPartition], txn_start_timestamp: int, now_ms: int, *,
                 previous_producer_id: int | None = None,
                 last_producer_epoch: int | None = None, next_producer_id: int | None = None,
                 client_transaction_version: int | None = None, **check_back) -> TxnTransitMetadata:
        return TxnTransitMetadata(
            transactional_id=self.transactional_id,
            from_state=self.state,
            state=state,
            producer_id=producer_id,
            previous_producer_id=(self.previous_producer_id if previous_producer_id is None
                                  else previous_producer_id),
            next_producer_id=self.next_producer_id if next_producer_id is None else next_producer_id,
            producer_epoch=producer_epoch,
            last_producer_epoch=self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
            txn_timeout_ms=txn_timeout_ms,
            topic_partitions=topic_partitions,
            txn_start_timestamp=txn_start_timestamp,
            # The log's timestamps never go backwards, even if the wall clock does.
            txn_last_update_timestamp=max(now_ms, self.txn_last_update_timestamp),
            client_transaction_version=(self.client_transaction_version if client_transaction_version is None
                                        else client_transaction_version),
            check_back_group=check_back.get("check_back_group", self.check_back_group),
            check_count=check_back.get("check_count", self.check_count),
            next_check_ms=check_back.get("next_check_ms", self.next_check_ms),
            abort_reason=check_back.get("abort_reason", self.abort_reason),
        )

    def _prepare(self, state: TransactionState, *args, **kwargs) -> TxnTransitMetadata:
        if self._pending is not None:
            raise IllegalStateTransition(self.transactional_id, self.state, state,
                                         f"{self.pending_state.kafka_name} is still pending")
        check_transition(self.state, state, self.transactional_id)
        transit = self._transit(state, *args, **kwargs)
        if state is not TransactionState.DEAD and transit.producer_epoch < 0:
            raise IllegalStateTransition(self.transactional_id, self.state, state, "negative producer epoch")
        if transit.producer_id < 0:
            raise IllegalStateTransition(self.transactional_id, self.state, state, "negative producer id")
        self._pending = transit
        self.pending_state = state
        return transit

    @classmethod
    def from_transit(cls, transit: TxnTransitMetadata) -> TransactionMetadata:
        """A metadata holding ``transit`` as its value (what loading a record produces)."""
        metadata = cls(transactional_id=transit.transactional_id, producer_id=transit.producer_id)
        metadata._apply(transit)
        return metadata
