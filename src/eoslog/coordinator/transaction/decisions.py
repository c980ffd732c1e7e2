"""What the transaction coordinator does with each request: pure functions, one per API.

Each handler takes the cached :class:`TransactionMetadata` for the transactional id (or None), the
request's fields and ``now_ms``, and returns a :class:`Decision`. The caller (the coordinator's I/O shell)
carries it out in this order:

1. ``new_metadata`` set: put it in the cache before logging (InitProducerId of an unknown id), so that a
   second request for the same id waits on its pending mark instead of allocating another producer id.
   If the append then fails, remove it again: it was never logged and its producer id never handed out.
2. ``transit`` set: append ``log_format.encode_key(id)`` / ``encode_value(transit)`` to the id's
   __transaction_state partition. When durable: ``metadata.complete_transition(transit)`` and answer
   ``error`` (with ``producer_id`` / ``producer_epoch`` for InitProducerId). If the append fails:
   ``metadata.abort_transition()`` and answer with the append's error instead.
   ``transit`` unset: answer ``error`` at once; nothing changed.
3. ``write_markers`` set (only after a successful append): write the control batches, and when every one
   is written call :func:`markers_written`, which yields the Complete transit to log the same way.

The only state a handler changes is the pending mark that ``prepare_*`` puts on the metadata, which is
what makes concurrent requests answer CONCURRENT_TRANSACTIONS until the caller completes or aborts it.

Errors are Kafka's names (:class:`TxnError`); ``eoslog.protocol.errors.ErrorCode[error.value]`` is the
wire code. Handlers speak transaction version 1 (KIP-98/360/588 and KIP-890 part 1) and, for clients
that send EndTxn v5+ / Produce v12+, transaction version 2 (KIP-890 part 2: an epoch bump at every
EndTxn, partitions added by the first Produce; see :func:`end_txn`).

Where eoslog differs from Kafka, on purpose (docs/transactions.md, "Differences from Kafka"):
- A coordinator-caused bump (transaction timeout, or a fence asked for by the current producer itself)
  leaves the old identity *recoverable*: its requests get INVALID_PRODUCER_EPOCH (abortable) rather than
  PRODUCER_FENCED, its EndTxn(abort) of the already aborted transaction succeeds, and its KIP-360
  InitProducerId returns the bumped epoch. Kafka answers PRODUCER_FENCED, which clients treat as fatal.
- EndTxn(abort) in Empty succeeds (nothing to abort) instead of INVALID_TXN_STATE.

Check-back transactions (eoslog's extension, docs/transactions.md "Check-back transactions") are at the end:
:func:`begin_check_back`, :func:`time_out_transaction` (Checking instead of an abort), :func:`lease_due_checks`
/ :func:`check_lease_expired` (the long poll), :func:`answer_check_back`. The check arithmetic itself is
``checkback.py``'s; here it meets the metadata and becomes transits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from eoslog.coordinator.transaction import checkback
from eoslog.coordinator.transaction.checkback import Answer, CheckPolicy, CheckState, Outcome
from eoslog.coordinator.transaction.log_format import CONSUMER_OFFSETS_TOPIC, partition_for
from eoslog.coordinator.transaction.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TRANSACTION_VERSION_1,
    TRANSACTION_VERSION_2,
    TopicPartition,
    TransactionMetadata,
    TransactionResult,
    TxnTransitMetadata,
    WriteTxnMarkers,
    result_of,
)
from eoslog.coordinator.transaction.state import TransactionState

S = TransactionState


class TxnError(Enum):
    """Kafka error names the coordinator answers with; each value is the ErrorCode member's name."""

    NONE = "NONE"
    INVALID_REQUEST = "INVALID_REQUEST"
    CONCURRENT_TRANSACTIONS = "CONCURRENT_TRANSACTIONS"
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
    PRODUCER_FENCED = "PRODUCER_FENCED"
    INVALID_TXN_STATE = "INVALID_TXN_STATE"
    INVALID_PRODUCER_ID_MAPPING = "INVALID_PRODUCER_ID_MAPPING"
    INVALID_TRANSACTION_TIMEOUT = "INVALID_TRANSACTION_TIMEOUT"
    TRANSACTIONAL_ID_NOT_FOUND = "TRANSACTIONAL_ID_NOT_FOUND"
    COORDINATOR_LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"
    COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
    NOT_COORDINATOR = "NOT_COORDINATOR"


# KIP-588 added PRODUCER_FENCED in these request versions; older ones get INVALID_PRODUCER_EPOCH (api key:
# first version that knows PRODUCER_FENCED). InitProducerId 22, AddPartitionsToTxn 24, AddOffsetsToTxn 25,
# EndTxn 26.
_PRODUCER_FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2}


def error_for_version(error: TxnError, api_key: int, api_version: int) -> TxnError:
    """The error to put on the wire for a request of this API version."""
    since = _PRODUCER_FENCED_SINCE.get(api_key)
    if error is TxnError.PRODUCER_FENCED and since is not None and api_version < since:
        return TxnError.INVALID_PRODUCER_EPOCH
    return error


@dataclass(frozen=True)
class TransactionConfig:
    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms (15 min)
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms (7 days)
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions, for AddOffsetsToTxn
    # eoslog.transaction.check.max.checks / .backoff.ms / .backoff.max.ms (check-back transactions)
    check_policy: CheckPolicy = field(default_factory=CheckPolicy)
    check_lease_ms: int = 30_000  # eoslog.transaction.check.lease.ms: how long a polled check is lent out


@dataclass(frozen=True)
class Decision:
    error: TxnError = TxnError.NONE
    transit: TxnTransitMetadata | None = None
    new_metadata: TransactionMetadata | None = None
    write_markers: WriteTxnMarkers | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partition_errors: Mapping[TopicPartition, TxnError] = field(default_factory=dict)


def _fail(error: TxnError, new_metadata: TransactionMetadata | None = None) -> Decision:
    return Decision(error=error, new_metadata=new_metadata)


def _is_live(metadata: TransactionMetadata | None) -> bool:
    """A Dead metadata is on its way out of the cache: treat it as absent."""
    return metadata is not None and metadata.state is not S.DEAD


def _check_producer(metadata: TransactionMetadata | None, producer_id: int, producer_epoch: int
                    ) -> TxnError | None:
    """None when (producer_id, producer_epoch) is the id's current producer, else the error to answer."""
    if not _is_live(metadata):
        return TxnError.INVALID_PRODUCER_ID_MAPPING
    assert metadata is not None
    if producer_id == metadata.producer_id and producer_epoch == metadata.producer_epoch:
        return None
    if metadata.is_recoverable_identity(producer_id, producer_epoch):
        return TxnError.INVALID_PRODUCER_EPOCH  # KIP-588: abortable; InitProducerId recovers it
    if producer_id != metadata.producer_id:
        return TxnError.INVALID_PRODUCER_ID_MAPPING
    return TxnError.PRODUCER_FENCED


def validate_transaction_timeout(txn_timeout_ms: int, config: TransactionConfig) -> bool:
    return 0 < txn_timeout_ms <= config.transaction_max_timeout_ms


# ---- InitProducerId ----------------------------------------------------------------------------------

def init_producer_id(metadata: TransactionMetadata | None, transactional_id: str | None,
                     transaction_timeout_ms: int, now_ms: int, config: TransactionConfig,
                     allocate_producer_id: Callable[[], int], *,
                     producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> Decision:
    """InitProducerId. ``producer_id`` / ``producer_epoch`` are the v3+ (KIP-360) fields, -1 when absent.

    ``allocate_producer_id`` hands out a never-used producer id (producer_id_block); it is called only
    when one is needed (a new id, or an exhausted epoch)."""
    if transactional_id is None:
        # Idempotent producer: a fresh id every time; there is nothing to log.
        return Decision(producer_id=allocate_producer_id(), producer_epoch=0)
    if transactional_id == "":
        return _fail(TxnError.INVALID_REQUEST)
    if not validate_transaction_timeout(transaction_timeout_ms, config):
        return _fail(TxnError.INVALID_TRANSACTION_TIMEOUT)
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return _fail(TxnError.INVALID_REQUEST)
    expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)

    created = None
    if not _is_live(metadata):
        created = TransactionMetadata(transactional_id=transactional_id, producer_id=allocate_producer_id(),
                                      producer_epoch=NO_PRODUCER_EPOCH, txn_timeout_ms=transaction_timeout_ms,
                                      state=S.EMPTY, txn_last_update_timestamp=now_ms)
        metadata = created
    assert metadata is not None
    if metadata.pending_transition_in_progress:
        return _fail(TxnError.CONCURRENT_TRANSACTIONS, created)

    current = (metadata.producer_id, metadata.producer_epoch)
    state = metadata.state
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
        return _fail(TxnError.CONCURRENT_TRANSACTIONS, created)

    if state in (S.ONGOING, S.CHECKING):
        # Abort the open transaction under a bumped epoch first; the client retries on
        # CONCURRENT_TRANSACTIONS and then gets its epoch from a Complete state. The bumped epoch is
        # never handed out by this request. A Checking transaction is fenced the same way: the new
        # instance must not inherit an undecided check.
        if expected is not None and expected != current:
            return _fail(TxnError.PRODUCER_FENCED, created)
        reason = FENCED_WHILE_CHECKING if state is S.CHECKING else None
        transit = metadata.prepare_fence_and_abort(now_ms, recoverable=expected is not None, abort_reason=reason)
        return Decision(error=TxnError.CONCURRENT_TRANSACTIONS, transit=transit, new_metadata=created,
                        write_markers=_markers_for(transit, TransactionResult.ABORT))

    # Empty, CompleteCommit, CompleteAbort: between transactions.
    if expected is None:
        # A new producer instance: fence every older one, remember nothing.
        transit = (_rotate(metadata, transaction_timeout_ms, now_ms, allocate_producer_id, None)
                   if metadata.is_producer_epoch_exhausted
                   else metadata.prepare_increment_producer_epoch(transaction_timeout_ms, now_ms,
                                                                  remember_current=False))
    elif metadata.producer_epoch == NO_PRODUCER_EPOCH or expected == current:
        # KIP-360: the current producer asks for a bump (e.g. after UNKNOWN_PRODUCER_ID); a fresh
        # metadata accepts any expected identity, the client's old producer id being unknown here.
        remember = expected if metadata.producer_epoch != NO_PRODUCER_EPOCH else None
        transit = (_rotate(metadata, transaction_timeout_ms, now_ms, allocate_producer_id, remember)
                   if metadata.is_producer_epoch_exhausted
                   else metadata.prepare_increment_producer_epoch(transaction_timeout_ms, now_ms,
                                                                  remember_current=remember is not None))
    elif metadata.is_recoverable_identity(*expected):
        # A retry of a bump whose answer was lost, or a producer recovering after a timeout abort:
        # hand back the current epoch without bumping again. Never hand out 32767, though.
        transit = (_rotate(metadata, transaction_timeout_ms, now_ms, allocate_producer_id, expected)
                   if metadata.producer_epoch >= MAX_PRODUCER_EPOCH
                   else metadata.prepare_keep_producer_epoch(transaction_timeout_ms, now_ms))
    else:
        return _fail(TxnError.PRODUCER_FENCED, created)
    return Decision(transit=transit, new_metadata=created, producer_id=transit.producer_id,
                    producer_epoch=transit.producer_epoch)


def _rotate(metadata: TransactionMetadata, txn_timeout_ms: int, now_ms: int,
            allocate_producer_id: Callable[[], int], remember: tuple[int, int] | None) -> TxnTransitMetadata:
    return metadata.prepare_producer_id_rotation(allocate_producer_id(), txn_timeout_ms, now_ms,
                                                 remember=remember)


def _markers_for(transit: TxnTransitMetadata, result: TransactionResult) -> WriteTxnMarkers:
    return WriteTxnMarkers(transit.transactional_id, transit.producer_id, transit.producer_epoch, result,
                           transit.topic_partitions)


# ---- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------------------

def add_partitions_to_txn(metadata: TransactionMetadata | None, transactional_id: str, producer_id: int,
                          producer_epoch: int, partitions: Iterable[TopicPartition], now_ms: int, *,
                          transaction_version: int | None = None) -> Decision:
    """AddPartitionsToTxn: start the transaction (Empty / Complete*) or widen the ongoing one.
    ``transaction_version`` 2: the add a partition leader makes for a Produce v12+ (KIP-890 part 2)."""
    if not transactional_id:
        return _fail(TxnError.INVALID_REQUEST)
    partitions = frozenset(TopicPartition(tp[0], tp[1]) for tp in partitions)
    error = _check_producer(metadata, producer_id, producer_epoch)
    if error is not None:
        return _fail(error)
    assert metadata is not None
    if metadata.pending_transition_in_progress or metadata.state.is_prepare:
        return _fail(TxnError.CONCURRENT_TRANSACTIONS)
    if metadata.state is S.ONGOING and partitions <= metadata.topic_partitions:
        return Decision()  # already there: nothing to log
    if metadata.state not in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return _fail(TxnError.INVALID_TXN_STATE)
    return Decision(transit=metadata.prepare_add_partitions(partitions, now_ms,
                                                            transaction_version=transaction_version))


def consumer_offsets_partition(group_id: str, config: TransactionConfig) -> TopicPartition:
    return TopicPartition(CONSUMER_OFFSETS_TOPIC, partition_for(group_id, config.offsets_topic_num_partitions))


def add_offsets_to_txn(metadata: TransactionMetadata | None, transactional_id: str, producer_id: int,
                       producer_epoch: int, group_id: str, now_ms: int, config: TransactionConfig) -> Decision:
    """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction, so the
    TxnOffsetCommit written there is committed or aborted by the same markers."""
    return add_partitions_to_txn(metadata, transactional_id, producer_id, producer_epoch,
                                 [consumer_offsets_partition(group_id, config)], now_ms)


def verify_partitions_in_txn(metadata: TransactionMetadata | None, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: Iterable[TopicPartition]) -> Decision:
    """KIP-890 part 1 (AddPartitionsToTxn verify-only): is each partition in the ongoing transaction of
    (producer_id, producer_epoch)? Changes nothing. ``partition_errors`` has one entry per partition."""
    tps = [TopicPartition(tp[0], tp[1]) for tp in partitions]
    error = TxnError.INVALID_REQUEST if not transactional_id else _check_producer(metadata, producer_id,
                                                                                  producer_epoch)
    if error is None:
        assert metadata is not None
        if metadata.pending_transition_in_progress or metadata.state.is_prepare:
            error = TxnError.CONCURRENT_TRANSACTIONS
    if error is not None:
        return Decision(error=error, partition_errors={tp: error for tp in tps})
    ongoing = metadata.state is S.ONGOING
    return Decision(partition_errors={
        tp: TxnError.NONE if ongoing and tp in metadata.topic_partitions else TxnError.INVALID_TXN_STATE
        for tp in tps})


def is_partition_in_transaction(metadata: TransactionMetadata | None, producer_id: int, producer_epoch: int,
                                topic_partition: TopicPartition) -> bool:
    """The yes/no form of verify_partitions_in_txn, for the produce path on this same node."""
    return (_check_producer(metadata, producer_id, producer_epoch) is None and metadata is not None
            and metadata.state is S.ONGOING and not metadata.pending_transition_in_progress
            and topic_partition in metadata.topic_partitions)


# ---- EndTxn and the markers ------------------------------------------------------------------------------

def end_txn(metadata: TransactionMetadata | None, transactional_id: str, producer_id: int, producer_epoch: int,
            result: TransactionResult, now_ms: int, *, transaction_version: int = TRANSACTION_VERSION_1,
            allocate_producer_id: Callable[[], int] | None = None) -> Decision:
    """EndTxn: Ongoing -> PrepareCommit / PrepareAbort (the commit point), then markers. A retry of an
    EndTxn that already happened answers as the first did.

    ``transaction_version`` 2 (EndTxn v5+) is :func:`_end_txn_v2`; ``allocate_producer_id`` is then
    called when the bump uses up the epoch space."""
    if not transactional_id:
        return _fail(TxnError.INVALID_REQUEST)
    if transaction_version >= TRANSACTION_VERSION_2:
        assert allocate_producer_id is not None
        return _end_txn_v2(metadata, producer_id, producer_epoch, result, now_ms, allocate_producer_id)
    error = _check_producer(metadata, producer_id, producer_epoch)
    if error is not None:
        # The recoverable identity may still abort the transaction that was aborted under it (a timeout):
        # the client's abortTransaction() then succeeds and its InitProducerId recovers the producer.
        retried_abort = (error is TxnError.INVALID_PRODUCER_EPOCH and result is TransactionResult.ABORT
                         and metadata is not None and metadata.state in (S.PREPARE_ABORT, S.COMPLETE_ABORT))
        if not retried_abort:
            return _fail(error)
    assert metadata is not None
    if metadata.pending_transition_in_progress:
        return _fail(TxnError.CONCURRENT_TRANSACTIONS)
    state = metadata.state
    if state in (S.ONGOING, S.CHECKING):
        # Checking: the owning producer came back in time to decide itself; that wins like an answer.
        transit = metadata.prepare_abort_or_commit(result, now_ms)
        return Decision(transit=transit, write_markers=_markers_for(transit, result))
    if state is S.EMPTY:
        # Nothing is open; aborting nothing is harmless. Committing nothing is a client bug.
        return _fail(TxnError.NONE if result is TransactionResult.ABORT else TxnError.INVALID_TXN_STATE)
    if result_of(state) is not result:
        return _fail(TxnError.INVALID_TXN_STATE)
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return _fail(TxnError.NONE)
    return _fail(TxnError.CONCURRENT_TRANSACTIONS)  # Prepare*: markers still being written


def _end_txn_v2(metadata: TransactionMetadata | None, producer_id: int, producer_epoch: int,
                result: TransactionResult, now_ms: int, allocate_producer_id: Callable[[], int]) -> Decision:
    """EndTxn v5+ (KIP-890 part 2). The decision is taken under epoch + 1 and the answer carries the
    identity the producer continues with, so nothing the old epoch still has in flight (a delayed Produce,
    a delayed EndTxn) can join or end the next transaction:

    - the current identity, Ongoing: prepare under epoch + 1 (a fresh producer id at epoch 0 after the
      last epoch). Empty / Complete*: an abort is still taken, under epoch + 1 with no partitions, because
      the producer may have a Produce in flight whose implicit add the coordinator has not seen yet
      ("abort when unsure"); a commit is INVALID_TXN_STATE.
    - the identity the last EndTxn came with (``is_recoverable_identity``): its retry, answered with the
      same result if the decision matches (CONCURRENT_TRANSACTIONS while its markers are still being
      written); INVALID_PRODUCER_EPOCH (abortable) if the result differs; PRODUCER_FENCED if the id has
      moved on to another transaction (Ongoing / Empty): it is a stale request, never a retry.
    - anything else: PRODUCER_FENCED, or INVALID_PRODUCER_ID_MAPPING for an unknown producer id.
    """
    if not _is_live(metadata):
        return _fail(TxnError.INVALID_PRODUCER_ID_MAPPING)
    assert metadata is not None
    if metadata.pending_transition_in_progress:
        return _fail(TxnError.CONCURRENT_TRANSACTIONS)
    state = metadata.state
    current = (producer_id, producer_epoch) == (metadata.producer_id, metadata.producer_epoch)
    if not current:
        if not metadata.is_recoverable_identity(producer_id, producer_epoch):
            error = _check_producer(metadata, producer_id, producer_epoch)
            return _fail(TxnError.PRODUCER_FENCED if error is TxnError.INVALID_PRODUCER_EPOCH else error)
        if state in (S.ONGOING, S.EMPTY, S.CHECKING):
            return _fail(TxnError.PRODUCER_FENCED)
        if result_of(state) is not result:
            return _fail(TxnError.INVALID_PRODUCER_EPOCH)
        if state.is_prepare:
            return _fail(TxnError.CONCURRENT_TRANSACTIONS)
        return Decision(producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch)
    if state.is_prepare:
        return _fail(TxnError.CONCURRENT_TRANSACTIONS)
    if state not in (S.ONGOING, S.CHECKING) and result is TransactionResult.COMMIT:
        return _fail(TxnError.INVALID_TXN_STATE)
    next_producer_id = allocate_producer_id() if metadata.is_producer_epoch_exhausted else NO_PRODUCER_ID
    transit = metadata.prepare_abort_or_commit(result, now_ms, transaction_version=TRANSACTION_VERSION_2,
                                               next_producer_id=next_producer_id)
    if next_producer_id != NO_PRODUCER_ID:
        continues_as = (next_producer_id, 0)
    else:
        continues_as = (transit.producer_id, transit.producer_epoch)
    return Decision(transit=transit, write_markers=_markers_for(transit, result),
                    producer_id=continues_as[0], producer_epoch=continues_as[1])


def markers_written(metadata: TransactionMetadata | None, markers: WriteTxnMarkers, now_ms: int) -> Decision:
    """Every marker of ``markers`` is written: Prepare* -> Complete* (clears the partitions).

    Answers an error, with nothing to log, if the id has moved on since ``markers`` was issued."""
    error = _check_producer(metadata, markers.producer_id, markers.producer_epoch)
    if error is not None:
        return _fail(error)
    assert metadata is not None
    if metadata.pending_transition_in_progress:
        return _fail(TxnError.CONCURRENT_TRANSACTIONS)
    if not metadata.state.is_prepare or result_of(metadata.state) is not markers.result:
        return _fail(TxnError.INVALID_TXN_STATE)
    return Decision(transit=metadata.prepare_complete(now_ms))


# ---- timers: transaction timeout, transactional id expiration ------------------------------------------

def expired_transactions(states: Mapping[str, TransactionMetadata], now_ms: int) -> list[str]:
    """Ids whose Ongoing transaction has outlived its transaction.timeout.ms (checked every 10 s)."""
    return sorted(tid for tid, m in states.items()
                  if m.state is S.ONGOING and not m.pending_transition_in_progress
                  and m.txn_start_timestamp + m.txn_timeout_ms < now_ms)


def abort_timed_out_transaction(metadata: TransactionMetadata, now_ms: int) -> Decision:
    """Abort an expired transaction under epoch + 1. The producer's old identity stays recoverable, so it
    hears INVALID_PRODUCER_EPOCH (abortable, KIP-588) rather than PRODUCER_FENCED. Nothing to do (no
    transit) if the transaction ended or is busy in the meantime."""
    if (metadata.state is not S.ONGOING or metadata.pending_transition_in_progress
            or metadata.check_back_group is not None  # checked, never aborted, by the timeout
            or metadata.txn_start_timestamp + metadata.txn_timeout_ms >= now_ms):
        return Decision()
    transit = metadata.prepare_fence_and_abort(now_ms, recoverable=True)
    return Decision(transit=transit, write_markers=_markers_for(transit, TransactionResult.ABORT))


def expired_transactional_ids(states: Mapping[str, TransactionMetadata], now_ms: int,
                              config: TransactionConfig) -> list[str]:
    """Ids resting (Empty / Complete*) for longer than transactional.id.expiration.ms."""
    return sorted(tid for tid, m in states.items()
                  if m.state.expiration_allowed and not m.pending_transition_in_progress
                  and m.txn_last_update_timestamp <= now_ms - config.transactional_id_expiration_ms)


def expire_transactional_id(metadata: TransactionMetadata, now_ms: int, config: TransactionConfig) -> Decision:
    """Retire an idle id: log a tombstone (encode_value gives None for Dead), complete the transition,
    then drop the id from the cache if it is still Dead. Nothing to do if it became busy meanwhile."""
    if (not metadata.state.expiration_allowed or metadata.pending_transition_in_progress
            or metadata.txn_last_update_timestamp > now_ms - config.transactional_id_expiration_ms):
        return Decision()
    return Decision(transit=metadata.prepare_dead())


# ---- check-back transactions (eoslog's extension) ----------------------------------------------------------

FENCED_WHILE_CHECKING = "check-back: fenced by a new producer instance (InitProducerId) while checking"


def begin_check_back(metadata: TransactionMetadata | None, transactional_id: str, producer_id: int,
                     producer_epoch: int, group: str, now_ms: int) -> Decision:
    """BeginCheckBack: the next transaction of this id is resolved by ``group`` if its timeout passes.
    Logged as an Empty record (so a restart keeps it); a repeat with the same group changes nothing."""
    if not transactional_id or not group:
        return _fail(TxnError.INVALID_REQUEST)
    error = _check_producer(metadata, producer_id, producer_epoch)
    if error is not None:
        return _fail(error)
    assert metadata is not None
    if metadata.pending_transition_in_progress:
        return _fail(TxnError.CONCURRENT_TRANSACTIONS)
    state = metadata.state
    if state in (S.EMPTY, S.ONGOING, S.CHECKING) and metadata.check_back_group == group:
        return Decision()  # idempotent
    if state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        # A transaction is already open (plain, or for another group), or being decided.
        return _fail(TxnError.CONCURRENT_TRANSACTIONS)
    return Decision(transit=metadata.prepare_begin_check_back(group, now_ms))


def time_out_transaction(metadata: TransactionMetadata, now_ms: int) -> Decision:
    """The transaction timeout: a plain transaction is aborted (:func:`abort_timed_out_transaction`); a
    check-back one moves to Checking with its first check due at once (``checkback.on_timeout``)."""
    if metadata.check_back_group is None:
        return abort_timed_out_transaction(metadata, now_ms)
    if (metadata.state is not S.ONGOING or metadata.pending_transition_in_progress
            or metadata.txn_start_timestamp + metadata.txn_timeout_ms >= now_ms):
        return Decision()
    decided = checkback.on_timeout(_check_state(metadata), now_ms)
    if decided.outcome is not Outcome.KEEP_CHECKING:
        return Decision()
    return Decision(transit=metadata.prepare_checking(decided.state.check_count, decided.state.next_check_ms,
                                                      now_ms))


def _check_state(metadata: TransactionMetadata) -> CheckState:
    assert metadata.check_back_group is not None
    return CheckState(metadata.check_back_group, metadata.producer_id, metadata.producer_epoch,
                      metadata.check_count, metadata.next_check_ms)


def _is_due(metadata: TransactionMetadata, now_ms: int) -> bool:
    return (metadata.state is S.CHECKING and not metadata.pending_transition_in_progress
            and metadata.check_lease_until_ms < 0 and checkback.is_due(_check_state(metadata), now_ms))


def lease_due_checks(states: Iterable[TransactionMetadata], group: str, now_ms: int, lease_ms: int,
                     limit: int) -> list[TransactionMetadata]:
    """PollCheckBack: up to ``limit`` due checks of ``group``, oldest first, each lent out until
    ``now_ms + lease_ms``. The lease is memory only (a restart asks again; answers are idempotent): it is
    the one change besides a pending mark that a decision makes without a log append."""
    due = sorted((m for m in states if m.check_back_group == group and _is_due(m, now_ms)),
                 key=lambda m: (m.next_check_ms, m.transactional_id))[:max(limit, 0)]
    for metadata in due:
        metadata.check_lease_until_ms = now_ms + lease_ms
    return due


def next_check_due_ms(states: Iterable[TransactionMetadata], group: str) -> int | None:
    """When the next check of ``group`` falls due or its lease runs out (None: nothing is checking)."""
    times = [m.check_lease_until_ms if m.check_lease_until_ms >= 0 else m.next_check_ms
             for m in states if m.state is S.CHECKING and m.check_back_group == group]
    return min(times) if times else None


def expired_check_leases(states: Mapping[str, TransactionMetadata], now_ms: int) -> list[str]:
    return sorted(tid for tid, m in states.items()
                  if m.state is S.CHECKING and not m.pending_transition_in_progress
                  and 0 <= m.check_lease_until_ms <= now_ms)


def check_lease_expired(metadata: TransactionMetadata, now_ms: int, policy: CheckPolicy) -> Decision:
    """Nobody answered a lent-out check in time: it counts as an unknown answer."""
    if (metadata.state is not S.CHECKING or metadata.pending_transition_in_progress
            or not 0 <= metadata.check_lease_until_ms <= now_ms):
        return Decision()
    return _carry_check(metadata, checkback.on_lease_expired(_check_state(metadata), now_ms, policy), now_ms)


def _carry_check(metadata: TransactionMetadata, decided: checkback.Decision, now_ms: int) -> Decision:
    if decided.outcome is Outcome.KEEP_CHECKING:
        return Decision(transit=metadata.prepare_checking(decided.state.check_count, decided.state.next_check_ms,
                                                          now_ms))
    if decided.outcome is Outcome.COMMIT:
        transit = metadata.prepare_abort_or_commit(TransactionResult.COMMIT, now_ms)
        return Decision(transit=transit, write_markers=_markers_for(transit, TransactionResult.COMMIT))
    if decided.outcome is Outcome.ABORT:
        # Under epoch + 1, as the timeout abort: a producer still alive somewhere is fenced rather than
        # allowed to start its next transaction with the epoch whose transaction the broker ended.
        transit = metadata.prepare_fence_and_abort(now_ms, recoverable=True, abort_reason=decided.reason)
        return Decision(transit=transit, write_markers=_markers_for(transit, TransactionResult.ABORT))
    if decided.outcome is Outcome.FENCED:
        return _fail(TxnError.PRODUCER_FENCED)
    return Decision()  # IGNORE: stale or repeated


def answer_check_back(metadata: TransactionMetadata | None, transactional_id: str, producer_id: int,
                      producer_epoch: int, check_number: int, answer: Answer, now_ms: int,
                      policy: CheckPolicy) -> Decision:
    """AnswerCheckBack: commit -> PrepareCommit; rollback -> PrepareAbort (epoch + 1, reason recorded);
    unknown -> one more check after the back-off, or PrepareAbort once max checks are reached.

    Idempotent: an answer to an earlier check number is a no-op success; one to a transaction already
    decided the same way answers NONE, a contradicting one INVALID_TXN_STATE. An identity that is neither
    the transaction's nor the one it was aborted under is PRODUCER_FENCED: a zombie cannot resolve."""
    if not transactional_id:
        return _fail(TxnError.INVALID_REQUEST)
    if not _is_live(metadata):
        return _fail(TxnError.INVALID_PRODUCER_ID_MAPPING)
    assert metadata is not None
    if metadata.pending_transition_in_progress:
        return _fail(TxnError.CONCURRENT_TRANSACTIONS)
    state = metadata.state
    current = (producer_id, producer_epoch) == (metadata.producer_id, metadata.producer_epoch)
    decided = result_of(state) if state not in (S.EMPTY,) else None
    if not current:
        # The broker's own aborts bump the epoch: their identity stays recoverable for this retry.
        if (metadata.is_recoverable_identity(producer_id, producer_epoch)
                and decided is TransactionResult.ABORT):
            return _fail(TxnError.INVALID_TXN_STATE if answer is Answer.COMMIT else TxnError.NONE)
        error = _check_producer(metadata, producer_id, producer_epoch)
        return _fail(TxnError.PRODUCER_FENCED if error is TxnError.INVALID_PRODUCER_EPOCH else error)
    if decided is not None:
        contradicts = ((decided is TransactionResult.COMMIT and answer is Answer.ROLLBACK)
                       or (decided is TransactionResult.ABORT and answer is Answer.COMMIT))
        return _fail(TxnError.INVALID_TXN_STATE if contradicts else TxnError.NONE)
    if metadata.check_back_group is None:
        return _fail(TxnError.INVALID_TXN_STATE)  # a plain transaction is never checked
    return _carry_check(metadata, checkback.on_answer(_check_state(metadata), producer_id, producer_epoch,
                                                      check_number, answer, now_ms, policy), now_ms)
