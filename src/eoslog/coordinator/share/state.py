"""The share coordinator's pure core: the state of every share partition coordinated on one
``__share_group_state`` partition, and the decisions of Kafka's ShareCoordinatorShard over it.

Contract
- :class:`ShareStates` owns, per share partition (group id, topic id, partition): its
  :class:`ShareGroupOffset` (state epoch, leader epoch, start offset, delivery complete count, state
  batches, snapshot epoch, timestamps), the highest leader and state epochs any of its records carried (the
  fences), and how many updates it had since its snapshot. It also tracks, for pruning, the offset of each
  share partition's newest snapshot.
- Decisions (``initialize``, ``write``, ``read``, ``read_summary``, ``delete``, ``cold_snapshots``,
  ``tombstones_for_topics``) change nothing: each returns the record to append, if any, and the answer.
  Memory changes only in :meth:`ShareStates.apply`, which the shard calls once the record is durable, and
  which loading calls for every record of the log in order: prepare -> log -> apply, and one code path, so
  a reload gives the state memory had.
- Time comes in as ``now_ms``; no I/O. Only the broker's event loop calls it (through the shard).

Kafka's rules kept here (ShareCoordinatorShard, ShareGroupOffset and their tests in Kafka 4.2/4.3):
- InitializeShareGroupState writes a snapshot: the given state epoch and start offset, leader epoch 0, no
  batches, delivery complete count -1 when the start offset is -1 and 0 otherwise, snapshot epoch one
  above the previous one (0 for a new share partition). A state epoch below the highest seen is
  FENCED_STATE_EPOCH.
- WriteShareGroupState needs an initialized share partition (INVALID_REQUEST otherwise); a leader epoch or
  a state epoch below the highest seen is FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH (-1 means "not given"
  and is not fenced). It writes an update holding only the written batches, or, once the share partition
  has had ``snapshot_update_records_per_snapshot`` updates, a snapshot of the stored batches combined with
  the written ones. A write keeps the stored leader epoch: only a read raises it.
- ReadShareGroupState answers the stored state (INVALID_REQUEST if not initialized, FENCED_LEADER_EPOCH
  for an older leader epoch); a newer leader epoch is recorded by writing an update (or snapshot) with it,
  so that a later write from the older leader is fenced. -1 reads without recording anything.
- ReadShareGroupStateSummary answers state epoch, leader epoch, start offset and delivery complete count,
  or Kafka's defaults (0, 0, -1, -1) for a share partition with no state; it records nothing.
- DeleteShareGroupState writes a tombstone (none for a share partition with no state).
- eoslog's own (issue 37 step 6): each share partition's pending transactional acknowledgements (the last
  record's set; see ``apply_marker`` for what markers do), and InitializeShareGroupState and
  DeleteShareGroupState refused (NON_EMPTY_GROUP) while a transaction holds records and its marker has
  not come, so
  AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups cannot lose its acknowledgements.
- A negative partition index is INVALID_REQUEST, a topic partition that does not exist
  UNKNOWN_TOPIC_OR_PARTITION (asked of ``partition_exists``).

Where eoslog differs: Kafka's replay counts the first update after a share partition's first snapshot as
0, and restarts the count only at a snapshot written because the count was reached (not at an initialize
or a cold snapshot). Here every update counts and every snapshot restarts the count, so a write becomes a
snapshot after exactly ``snapshot_update_records_per_snapshot`` updates since the newest snapshot, and a
share partition's state depends only on its newest snapshot and the updates after it, which is what
pruning keeps: the state loaded from a pruned log is the state memory had. (The fences are the exception,
as in Kafka: an initialize writes leader epoch 0, and the state epoch it is given, -1 included, so once the
records before it are pruned the fences are what the records after it carried; the group coordinator
initializes with a new state epoch, which fences the old leader.) And a written batch whose last offset is
below its first is refused (INVALID_REQUEST).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import NamedTuple

from eoslog.coordinator.share.batches import combine_state_batches
from eoslog.coordinator.share.log_format import (
    NO_DELIVERY_COMPLETE_COUNT,
    NO_START_OFFSET,
    OUTCOME_ABORTED,
    OUTCOME_COMMITTED,
    OUTCOME_PENDING,
    PendingTransaction,
    SharePartitionKey,
    ShareRecord,
    ShareSnapshotValue,
    ShareUpdateValue,
    StateBatch,
    UnknownRecordTypeError,
    decode_record,
    record_of,
)
from eoslog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NO_EPOCH = -1  # a leader or state epoch a request does not give: never fenced
DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0


@dataclass(frozen=True)
class ShareGroupOffset:
    """One share partition's persisted state, as the last snapshot and the updates since make it."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT
    state_batches: tuple[StateBatch, ...] = ()
    create_timestamp: int = 0
    write_timestamp: int = 0
    # The pending transactional acknowledgements (eoslog's tagged field): the last record's set, with the
    # outcomes markers gave since (keep_outcomes).
    pending_transactions: tuple[PendingTransaction, ...] = ()

    @classmethod
    def from_snapshot(cls, value: ShareSnapshotValue, before: ShareGroupOffset | None = None) -> ShareGroupOffset:
        return cls(value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset,
                   value.delivery_complete_count, value.state_batches, value.create_timestamp,
                   value.write_timestamp, keep_outcomes(value.pending_transactions, before))

    @classmethod
    def from_update(cls, value: ShareUpdateValue) -> ShareGroupOffset:
        """An update with no snapshot before it (its snapshot pruned away by another tool): state epoch 0
        and no timestamps, as Kafka builds it."""
        return cls(value.snapshot_epoch, DEFAULT_STATE_EPOCH, value.leader_epoch, value.start_offset,
                   value.delivery_complete_count, value.state_batches,
                   pending_transactions=value.pending_transactions)

    def merge(self, update: ShareUpdateValue) -> ShareGroupOffset:
        """This state with ``update`` applied: a start offset or leader epoch of -1 keeps the stored one;
        the batches are combined and cut at the start offset; epochs of the snapshot and timestamps stay;
        the update's pending set is the set (outcomes already known are kept)."""
        start_offset = self.start_offset if update.start_offset == NO_START_OFFSET else update.start_offset
        leader_epoch = self.leader_epoch if update.leader_epoch == NO_EPOCH else update.leader_epoch
        return ShareGroupOffset(
            self.snapshot_epoch, self.state_epoch, leader_epoch, start_offset, update.delivery_complete_count,
            combine_state_batches(self.state_batches, update.state_batches, start_offset),
            self.create_timestamp, self.write_timestamp, keep_outcomes(update.pending_transactions, self))

    def snapshot(self, snapshot_epoch: int, write_timestamp: int) -> ShareSnapshotValue:
        return ShareSnapshotValue(snapshot_epoch, self.state_epoch, self.leader_epoch, self.start_offset,
                                  self.create_timestamp, write_timestamp, self.state_batches,
                                  self.delivery_complete_count, self.pending_transactions)

    def undecided(self) -> bool:
        """Whether a transaction holds records here whose marker has not come. (Once every one is decided,
        replacing or deleting the state loses nothing: the outcomes only wait for a leader to apply them.)"""
        return any(txn.outcome == OUTCOME_PENDING for txn in self.pending_transactions)


def keep_outcomes(written: tuple[PendingTransaction, ...], before: ShareGroupOffset | None
                  ) -> tuple[PendingTransaction, ...]:
    """The pending set a record makes: its own, except that a transaction a marker already decided stays
    decided while the record still names it at the same epoch. A leader's write decided before the marker
    came (or without having seen it yet) names the transaction as pending; the marker, durable before that
    write, still holds. Once the leader writes the set without it (it applied the outcome), it is gone."""
    if before is None or not before.pending_transactions:
        return written
    outcomes = {(t.producer_id, t.producer_epoch): t.outcome for t in before.pending_transactions
                if t.outcome != OUTCOME_PENDING}
    if not outcomes:
        return written
    return tuple(t._replace(outcome=outcomes[(t.producer_id, t.producer_epoch)])
                 if t.outcome == OUTCOME_PENDING and (t.producer_id, t.producer_epoch) in outcomes else t
                 for t in written)


# What ReadShareGroupStateSummary answers for a share partition with no state (Kafka's PartitionFactory).
UNINITIALIZED = ShareGroupOffset(0, DEFAULT_STATE_EPOCH, DEFAULT_LEADER_EPOCH, NO_START_OFFSET)


class TxnMarker(NamedTuple):
    """A COMMIT or ABORT marker in ``__share_group_state`` (a transaction that registered this partition)."""

    offset: int
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(frozen=True)
class Decision:
    """What an operation decided: the record to append (None: nothing to write) and the answer, which
    holds once the record is durable (``state`` is what a read or summary answers)."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    record: ShareRecord | None = None
    state: ShareGroupOffset | None = None


def _refuse(error: ErrorCode, message: str | None = None) -> Decision:
    return Decision(error=error, message=message)


_NEGATIVE_PARTITION = _refuse(ErrorCode.INVALID_REQUEST, "a partition index cannot be negative")
_UNKNOWN_PARTITION = _refuse(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
_FENCED_LEADER_EPOCH = _refuse(ErrorCode.FENCED_LEADER_EPOCH)
_FENCED_STATE_EPOCH = _refuse(ErrorCode.FENCED_STATE_EPOCH)
# eoslog (issue 37 step 6): resetting or deleting a share partition whose records a transaction holds would
# lose the transaction's acknowledgements, as deleting a group with pending transactional offsets would
# lose those (Kafka refuses that with NON_EMPTY_GROUP too). Retry once the transaction ended.
_HELD_BY_TRANSACTIONS = _refuse(ErrorCode.NON_EMPTY_GROUP,
                                "a transaction holds records of this share partition until its marker")


class ShareStates:
    def __init__(self, snapshot_update_records_per_snapshot: int = 500,
                 partition_exists: Callable[[uuid.UUID, int], bool] | None = None) -> None:
        """``partition_exists(topic_id, partition)``: whether that topic partition exists (None: any)."""
        self.updates_per_snapshot = snapshot_update_records_per_snapshot
        self._partition_exists = partition_exists
        self._offsets: dict[SharePartitionKey, ShareGroupOffset] = {}
        self._leader_epochs: dict[SharePartitionKey, int] = {}  # the highest any record carried
        self._state_epochs: dict[SharePartitionKey, int] = {}  # the highest any snapshot carried
        self._update_counts: dict[SharePartitionKey, int] = {}
        self._snapshot_offsets: dict[SharePartitionKey, int] = {}  # the newest snapshot's log offset
        self._redundant_offset: int | None = None

    # ---- reading ------------------------------------------------------------------------------------

    def get(self, key: SharePartitionKey) -> ShareGroupOffset | None:
        return self._offsets.get(key)

    def __len__(self) -> int:
        return len(self._offsets)

    def __contains__(self, key: object) -> bool:
        return key in self._offsets

    def __iter__(self) -> Iterator[SharePartitionKey]:
        """The share partitions with state, in key order."""
        return iter(sorted(self._offsets))

    def leader_epoch_fence(self, key: SharePartitionKey) -> int | None:
        return self._leader_epochs.get(key)

    def state_epoch_fence(self, key: SharePartitionKey) -> int | None:
        return self._state_epochs.get(key)

    def updates_since_snapshot(self, key: SharePartitionKey) -> int:
        return self._update_counts.get(key, 0)

    def last_redundant_offset(self) -> int | None:
        """Every record below this offset has a newer snapshot of its share partition (or its share
        partition was deleted): what pruning may delete. None when nothing is."""
        offset = self._redundant_offset
        return offset if offset is not None and offset > 0 else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShareStates):
            return NotImplemented
        return self._everything() == other._everything()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def _everything(self) -> tuple:
        return (self._offsets, self._leader_epochs, self._state_epochs, self._update_counts,
                self._snapshot_offsets, self._redundant_offset)

    # ---- decisions ----------------------------------------------------------------------------------

    def _missing(self, key: SharePartitionKey) -> bool:
        return self._partition_exists is not None and not self._partition_exists(key.topic_id, key.partition)

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int, *, now_ms: int) -> Decision:
        """InitializeShareGroupState: a new snapshot with ``state_epoch`` and ``start_offset``."""
        if key.partition < 0:
            return _NEGATIVE_PARTITION
        fence = self._state_epochs.get(key)
        if state_epoch != NO_EPOCH and fence is not None and fence > state_epoch:
            return _FENCED_STATE_EPOCH
        if self._missing(key):
            return _UNKNOWN_PARTITION
        current = self._offsets.get(key)
        if current is not None and current.undecided():
            return _HELD_BY_TRANSACTIONS
        snapshot = ShareSnapshotValue(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
            state_epoch=state_epoch, leader_epoch=DEFAULT_LEADER_EPOCH, start_offset=start_offset,
            create_timestamp=now_ms, write_timestamp=now_ms, state_batches=(),
            # Lag cannot be known before the start offset is: -1 until it is, then counted from 0.
            delivery_complete_count=NO_DELIVERY_COMPLETE_COUNT if start_offset == NO_START_OFFSET else 0)
        return Decision(record=record_of(key, snapshot))

    def write(self, key: SharePartitionKey, *, state_epoch: int, leader_epoch: int, start_offset: int,
              state_batches: Iterable[StateBatch], now_ms: int,
              delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT,
              pending_transactions: Iterable[PendingTransaction] = ()) -> Decision:
        """WriteShareGroupState: the changed ranges (and a new start offset, or -1) of a share partition,
        and its whole pending set (none when empty)."""
        batches = tuple(StateBatch(*b) for b in state_batches)
        if key.partition < 0:
            return _NEGATIVE_PARTITION
        current = self._offsets.get(key)
        if current is None:
            return _refuse(ErrorCode.INVALID_REQUEST, "the share partition's state was never initialized")
        if leader_epoch != NO_EPOCH and self._leader_epochs.get(key, NO_EPOCH) > leader_epoch:
            return _FENCED_LEADER_EPOCH
        if state_epoch != NO_EPOCH and self._state_epochs.get(key, NO_EPOCH) > state_epoch:
            return _FENCED_STATE_EPOCH
        if self._missing(key):
            return _UNKNOWN_PARTITION
        for batch in batches:
            if batch.last_offset < batch.first_offset:
                return _refuse(ErrorCode.INVALID_REQUEST, f"state batch {batch.first_offset}-{batch.last_offset} "
                                                          "ends before it starts")
        pending = keep_outcomes(tuple(PendingTransaction(*t) for t in pending_transactions), current)
        return Decision(record=self._state_record(key, current, current.leader_epoch, start_offset,
                                                  delivery_complete_count, batches, now_ms, pending))

    def read(self, key: SharePartitionKey, leader_epoch: int, *, now_ms: int) -> Decision:
        """ReadShareGroupState: the stored state; a newer ``leader_epoch`` is recorded before answering."""
        if key.partition < 0:
            return _NEGATIVE_PARTITION
        current = self._offsets.get(key)
        if current is None:
            return _refuse(ErrorCode.INVALID_REQUEST, "the share partition's state was never initialized")
        fence = self._leader_epochs.get(key, NO_EPOCH)
        if leader_epoch != NO_EPOCH and fence > leader_epoch:
            return _FENCED_LEADER_EPOCH
        if self._missing(key):
            return _UNKNOWN_PARTITION
        if leader_epoch == NO_EPOCH or leader_epoch == fence:
            return Decision(state=current)
        record = self._state_record(key, current, leader_epoch, current.start_offset,
                                    current.delivery_complete_count, (), now_ms, current.pending_transactions)
        return Decision(record=record, state=current)

    def read_summary(self, key: SharePartitionKey) -> Decision:
        """ReadShareGroupStateSummary: epochs, start offset and delivery complete count; records nothing."""
        if key.partition < 0:
            return _NEGATIVE_PARTITION
        if self._missing(key):
            return _UNKNOWN_PARTITION
        return Decision(state=self._offsets.get(key, UNINITIALIZED))

    def delete(self, key: SharePartitionKey) -> Decision:
        """DeleteShareGroupState: a tombstone, if the share partition has state."""
        if key.partition < 0:
            return _NEGATIVE_PARTITION
        if self._missing(key):
            return _UNKNOWN_PARTITION
        if key not in self._offsets:
            return Decision()
        if self._offsets[key].undecided():
            return _HELD_BY_TRANSACTIONS
        return Decision(record=ShareRecord.tombstone(key))

    def _state_record(self, key: SharePartitionKey, current: ShareGroupOffset, leader_epoch: int,
                      start_offset: int, delivery_complete_count: int, batches: tuple[StateBatch, ...],
                      now_ms: int, pending: tuple[PendingTransaction, ...]) -> ShareRecord:
        """An update with only ``batches``, or a snapshot of everything once enough updates were written;
        either carries the whole pending set."""
        if self._update_counts.get(key, 0) >= self.updates_per_snapshot:
            start = current.start_offset if start_offset == NO_START_OFFSET else start_offset
            return record_of(key, ShareSnapshotValue(
                current.snapshot_epoch + 1, current.state_epoch, leader_epoch, start, now_ms, now_ms,
                combine_state_batches(current.state_batches, batches, start), delivery_complete_count, pending))
        return record_of(key, ShareUpdateValue(current.snapshot_epoch, leader_epoch, start_offset,
                                               combine_state_batches((), batches, start_offset),
                                               delivery_complete_count, pending))

    def cold_snapshots(self, *, now_ms: int, interval_ms: int,
                       busy: Callable[[SharePartitionKey], bool] = lambda key: False) -> list[ShareRecord]:
        """Kafka's cold-partition snapshot: a new snapshot of each share partition whose last snapshot is
        ``interval_ms`` old, so an idle one does not hold pruning back. When every share partition's last
        snapshot already is such a snapshot (write time after creation time) nothing moved, and nothing is
        written. ``busy`` share partitions (a write in flight) are left for the next round."""
        if all(state.create_timestamp != state.write_timestamp for state in self._offsets.values()):
            return []
        records = []
        for key in self:
            state = self._offsets[key]
            if now_ms - state.write_timestamp >= interval_ms and not busy(key):
                records.append(record_of(key, state.snapshot(state.snapshot_epoch + 1, now_ms)))
        return records

    def tombstones_for_topics(self, topic_ids: Iterable[uuid.UUID]) -> list[ShareRecord]:
        """Tombstones for every share partition of deleted topics (Kafka's maybeCleanupShareState)."""
        deleted = set(topic_ids)
        return [ShareRecord.tombstone(key) for key in self if key.topic_id in deleted]

    # ---- applying -----------------------------------------------------------------------------------

    def apply(self, record: ShareRecord, offset: int) -> None:
        """A record now durable at ``offset`` (written here, or read from the log when loading)."""
        key, value = record.key, record.value
        if value is None:
            for table in (self._offsets, self._leader_epochs, self._state_epochs, self._update_counts):
                table.pop(key, None)
            self._track_snapshot(key, offset, deleted=True)
            return
        self._leader_epochs[key] = max(self._leader_epochs.get(key, value.leader_epoch), value.leader_epoch)
        current = self._offsets.get(key)
        if isinstance(value, ShareSnapshotValue):
            self._state_epochs[key] = max(self._state_epochs.get(key, value.state_epoch), value.state_epoch)
            state = self._offsets[key] = ShareGroupOffset.from_snapshot(value, current)
            self._update_counts[key] = 0
            # A snapshot decided before a marker came and appended after it names the transaction as pending:
            # the outcome is only in the marker, which needs the records before it. Until a snapshot carries
            # the outcome, the previous one stays this share partition's bound for pruning.
            if state.pending_transactions == value.pending_transactions:
                self._track_snapshot(key, offset, deleted=False)
            return
        self._offsets[key] = ShareGroupOffset.from_update(value) if current is None else current.merge(value)
        self._update_counts[key] = self._update_counts.get(key, 0) + 1

    def apply_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> list[SharePartitionKey]:
        """A COMMIT or ABORT marker of ``producer_id`` durable in this partition (written by
        the transaction coordinator, or read from the log when loading): each share partition whose pending
        set holds that producer's transaction at or below the marker's epoch (markers may carry a bumped
        epoch) now has its outcome; the leader applies it (PendingAcknowledgements.complete) and writes the
        set without it. Returns the share partitions decided now."""
        outcome = OUTCOME_COMMITTED if committed else OUTCOME_ABORTED
        decided = []
        for key, state in self._offsets.items():
            if not any(t.producer_id == producer_id and t.producer_epoch <= producer_epoch
                       and t.outcome == OUTCOME_PENDING for t in state.pending_transactions):
                continue
            pending = tuple(t._replace(outcome=outcome) if t.producer_id == producer_id
                            and t.producer_epoch <= producer_epoch and t.outcome == OUTCOME_PENDING else t
                            for t in state.pending_transactions)
            self._offsets[key] = replace(state, pending_transactions=pending)
            decided.append(key)
        # Pruning needs no more: this share partition's newest snapshot is below the marker (so is the
        # redundant offset), and a snapshot decided after the marker carries the outcome.
        return sorted(decided)

    def _track_snapshot(self, key: SharePartitionKey, offset: int, *, deleted: bool) -> None:
        # Kafka's ShareCoordinatorOffsetsManager: everything below the oldest "newest snapshot" of the
        # share partitions is redundant. A tombstone counts once (the records before it are redundant),
        # then its share partition holds nothing back.
        self._snapshot_offsets[key] = offset
        self._redundant_offset = min(self._snapshot_offsets.values())
        if deleted:
            del self._snapshot_offsets[key]

    def load(self, entries: Iterable[tuple[int, bytes | memoryview, bytes | memoryview | None] | TxnMarker]) -> int:
        """Applies every (offset, key, value) of a ``__share_group_state`` partition, oldest first, and every
        transaction marker (:class:`TxnMarker`) where it stands among them, so pending sets followed by their
        producer's marker are decided as they were in memory; a damaged record raises ShareStateFormatError.
        Records of a type this version does not know are skipped. Returns how many records were applied."""
        applied = 0
        for entry in entries:
            if isinstance(entry, TxnMarker):
                self.apply_marker(entry.producer_id, entry.producer_epoch, entry.committed)
                continue
            offset, key, value = entry
            try:
                record = decode_record(key, value)
            except UnknownRecordTypeError as exc:
                log.warning("skipping the record at offset %d of __share_group_state: %s", offset, exc)
                continue
            self.apply(record, offset)
            applied += 1
        return applied

