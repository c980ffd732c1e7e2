"""The state of one share partition (group, topic, partition) on its leader (KIP-932): a pure core.

What it owns: the share-partition start offset (SPSO: every offset below it is done), the end offset
(SPEO: offsets at or above it were never handed out; acquisition of new records continues there), the
state epoch the share coordinator gave it, and every offset in between as runs of
:class:`~eoslog.share.in_flight.InFlightBatch` (state, delivery count, owner, lock deadline).

What is always true (checked by ``__post_init__``): the runs cover [start_offset, end_offset) exactly,
with no gap; the first run is not done (the SPSO moves past done records at once); a run is Acquired
exactly when it has an owner and a lock deadline. The operations keep more (the property tests check
them): no offset is held by two members; a delivery count never passes the delivery count limit; an
acknowledged or archived record never moves again.

Style: a :class:`SharePartition` is an immutable value. Every operation returns a :class:`Change` whose
``after`` is the share partition after it, and whose ``update`` is what to write to the share
coordinator, or None when nothing needs writing: the start offset, and the state batches of every
in-flight record the operation moved (as Kafka writes each batch it transitions; the share coordinator
lays them over what it has).
The caller writes ``update``, and only when the write succeeded does ``after`` replace the value it holds
(prepare -> log -> apply; on a failed write it keeps the old value, which is Kafka's rollback). Operations
on one share partition must therefore be serialized by the caller: each starts from the value the
previous one left. Kafka writes acknowledgements, releases and lock expiries, but not acquisitions (their
raised delivery counts reach the share coordinator with the next write) nor a moved log start offset;
the caller chooses.

Time is a value: ``now_ms`` comes in, lock deadlines are ``now_ms + lock_ms``. A lock whose deadline has
come (``deadline <= now_ms``) no longer holds: its records cannot be acknowledged, and
:meth:`SharePartition.expire_locks` (the caller's timer, at :meth:`SharePartition.next_deadline`) gives
them back. Call it before acquiring, so that the records it frees can go out again at once.

Where eoslog differs from Kafka, on purpose:
- Offsets between the SPEO and the first batch read from the log (removed by retention or compaction)
  are archived instead of being left out of the in-flight state, so that the runs have no gaps.
- Records of aborted transactions are archived without a delivery (Kafka acquires them, counting a
  delivery, and archives them in the same step; nobody sees the difference but the stored count).
- A moved log start offset drops every run below it, acquired ones too (Kafka keeps those until their
  lock runs out).
- Two acknowledgement batches of one request may not share an offset (Kafka's request check lets a batch
  start at the last offset of the one before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from eoslog.share.errors import ShareError
from eoslog.share.in_flight import (
    AcknowledgementBatch,
    AcquiredRecords,
    InFlightBatch,
    OffsetRange,
    PersistedState,
    StateBatch,
    batch_end,
    check_ranges,
    cut,
    merge_ranges,
    normalize,
    persisted_runs,
    persisted_within,
    split_by,
)
from eoslog.share.record_state import ACKNOWLEDGE_EVENTS, AcknowledgeType, Event, RecordState, transition

S = RecordState

_ACKNOWLEDGE_TYPES = frozenset(t.value for t in AcknowledgeType)


@dataclass(frozen=True)
class SharePartitionConfig:
    """Kafka's broker settings for share partitions (ShareGroupConfig), with Kafka 4.2's defaults.

    Kafka's valid ranges are the config layer's to enforce; the core only refuses nonsense."""

    delivery_count_limit: int = 5  # group.share.delivery.count.limit, 2..10
    max_record_locks: int = 2000  # group.share.partition.max.record.locks, 100..10000
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms, 1000..3600000

    def __post_init__(self) -> None:
        if self.delivery_count_limit < 2 or self.max_record_locks < 1 or self.record_lock_duration_ms < 1:
            raise ValueError(f"invalid share partition config {self}")

    @property
    def throttle_delivery_count(self) -> int:
        """From this delivery count on, a record is suspected of failing its consumers, and it goes out in
        ever smaller runs, alone at its last attempt (Kafka's throttleRecordsDeliveryLimit, KAFKA-17541)."""
        return max(2, -(-self.delivery_count_limit // 2))


class AcquireMode(Enum):
    """ShareFetch v2's ShareAcquireMode (KIP-1206); persisted on the wire as these bytes."""

    BATCH_OPTIMIZED = 0  # whole log batches: MaxRecords may be passed to end at a batch boundary
    RECORD_LIMIT = 1  # never more than MaxRecords


@dataclass(frozen=True)
class Change:
    """The share partition after an operation, and what to persist for it."""

    after: SharePartition
    state_batches: tuple[StateBatch, ...] = ()
    write_needed: bool = False  # state batches changed or the start offset moved
    snapshot_required: bool = False  # reset: the old state batches must go, so write a whole snapshot

    @property
    def update(self) -> PersistedState | None:
        if not self.write_needed:
            return None
        return PersistedState(self.after.start_offset, self.after.state_epoch, self.state_batches)


@dataclass(frozen=True)
class Acquisition(Change):
    acquired_records: tuple[AcquiredRecords, ...] = ()  # ShareFetchResponse's AcquiredRecords
    archived: tuple[OffsetRange, ...] = ()  # skipped: aborted, gone from the log, or at the delivery limit

    @property
    def acquired_count(self) -> int:
        return sum(r.last_offset - r.first_offset + 1 for r in self.acquired_records)


@dataclass(frozen=True)
class Acknowledgement(Change):
    error: ShareError = ShareError.NONE  # the partition's AcknowledgeErrorCode; on error nothing changed
    failed_batch: int | None = None  # the index of the acknowledgement batch that caused ``error``


@dataclass(frozen=True)
class Release(Change):
    released: tuple[OffsetRange, ...] = ()  # the acquired ranges that went back (or were archived)


@dataclass(frozen=True)
class SharePartition:
    config: SharePartitionConfig
    start_offset: int
    end_offset: int
    state_epoch: int = 0
    in_flight: tuple[InFlightBatch, ...] = field(default=())
    # Records that entered ARCHIVED since this value was loaded or reset (rejected, delivered too often,
    # aborted, not records): a counter for the metrics (share/metrics.py), never persisted nor compared.
    archived_total: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        expected = self.start_offset
        for run in self.in_flight:
            acquired = run.state is S.ACQUIRED
            if (run.first_offset != expected or run.last_offset < run.first_offset or run.delivery_count < 0
                    or acquired != (run.member_id is not None) or acquired != (run.lock_deadline_ms is not None)):
                raise ValueError(f"broken share partition runs at offset {expected}: {run}")
            expected = run.last_offset + 1
        if expected != self.end_offset or self.start_offset < 0:
            raise ValueError(f"runs end at {expected}, the end offset is {self.end_offset}")
        if self.in_flight and self.in_flight[0].state.is_done:
            raise ValueError("the start offset must move past done records")

    # ---- creation and persistence -------------------------------------------------------------------

    @classmethod
    def initial(cls, config: SharePartitionConfig, start_offset: int, state_epoch: int = 0) -> SharePartition:
        """A share partition with nothing in flight: the SPSO that share.auto.offset.reset chose."""
        return cls(config, start_offset, start_offset, state_epoch)

    @classmethod
    def load(cls, config: SharePartitionConfig, persisted: PersistedState) -> SharePartition:
        """The share partition the share coordinator's state describes, as a new leader takes it over.

        Acquired records come back Available (no lock survives a leader change); offsets between state
        batches were never recorded and are offered again with delivery count 0 (Kafka's gap window);
        batches below the start offset are ignored (their records are done)."""
        check_ranges([OffsetRange(b.first_offset, b.last_offset) for b in persisted.state_batches], "state batches")
        runs: list[InFlightBatch] = []
        offset = persisted.start_offset
        for batch in persisted.state_batches:
            if batch.last_offset < persisted.start_offset:
                continue
            if batch.delivery_count < 0:
                raise ValueError(f"negative delivery count in {batch}")
            first = max(batch.first_offset, persisted.start_offset)
            if first > offset:
                runs.append(InFlightBatch(offset, first - 1, S.AVAILABLE, 0))
            runs.append(InFlightBatch(first, batch.last_offset, batch.delivery_state.persisted, batch.delivery_count))
            offset = batch.last_offset + 1
        start, kept = normalize(offset, runs)
        return cls(config, start, offset, persisted.state_epoch, kept)

    def snapshot(self) -> PersistedState:
        """Every in-flight record as the share coordinator stores it (ShareSnapshotValue)."""
        return PersistedState(self.start_offset, self.state_epoch, persisted_runs(self.in_flight))

    def reset(self, start_offset: int, state_epoch: int | None = None) -> Change:
        """AlterShareGroupOffsets / share.auto.offset.reset: a new SPSO, nothing in flight.

        The group coordinator allows it only for a group without members. Write ``after.snapshot()``, not
        an update: the old state batches must not survive (Kafka initializes the state again)."""
        epoch = self.state_epoch if state_epoch is None else state_epoch
        return Change(after=SharePartition.initial(self.config, start_offset, epoch), snapshot_required=True)

    def advance_log_start_offset(self, log_start_offset: int) -> Change:
        """Records below the log start offset were deleted: the SPSO (and the SPEO if need be) move to it."""
        if log_start_offset <= self.start_offset:
            return Change(after=self)
        end = max(self.end_offset, log_start_offset)
        _, kept, _ = cut(self.in_flight, log_start_offset, end)
        return self.changed(kept, end, ())

    # ---- queries ---------------------------------------------------------------------------------------

    def next_fetch_offset(self) -> int:
        """Where to read the log from: the first Available record, else the SPEO."""
        for run in self.in_flight:
            if run.state is S.AVAILABLE:
                return run.first_offset
        return self.end_offset

    def can_acquire(self) -> bool:
        """Kafka's canAcquireRecords: a record to deliver again, or room under max.record.locks."""
        return (self.next_fetch_offset() < self.end_offset
                or self.end_offset - self.start_offset < self.config.max_record_locks)

    def next_deadline(self) -> int | None:
        """The earliest acquisition lock deadline, for the caller's timer; None if nothing is acquired."""
        deadlines = [run.lock_deadline_ms for run in self.in_flight if run.state is S.ACQUIRED]
        return min(deadlines) if deadlines else None

    def record(self, offset: int) -> InFlightBatch | None:
        """The in-flight state of one offset (as a one-offset run), or None outside [SPSO, SPEO)."""
        for run in self.in_flight:
            if run.first_offset <= offset <= run.last_offset:
                return run.part(offset, offset)
        return None

    @property
    def delivery_complete_count(self) -> int:
        """The records done (acknowledged or archived) above the start offset: Kafka's
        DeliveryCompleteCount (KIP-1226), which the lag of a share partition subtracts."""
        return sum(run.offset_count for run in self.in_flight if run.state.is_done)

    def acquired_count(self, member_id: str | None = None) -> int:
        return sum(run.offset_count for run in self.in_flight
                   if run.state is S.ACQUIRED and (member_id is None or run.member_id == member_id))

    # ---- operations --------------------------------------------------------------------------------------

    def acquire(self, member_id: str, fetch_offset: int, batches: Sequence[OffsetRange], *, now_ms: int,
                max_records: int, upper_bound: int, aborted: Sequence[OffsetRange] = (),
                mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED, batch_size: int = 0,
                lock_ms: int | None = None) -> Acquisition:
        """ShareFetch: hand Available records of the ``batches`` read from the log at ``fetch_offset`` to
        ``member_id``, each with its delivery count raised, under a lock until ``now_ms + lock_ms``.

        ``batches`` are the log batches read (base and last offset, ascending); every offset from the first
        batch's base to the last batch's end is handed out, the offsets between batches too, which the
        client acknowledges as GAP. Nothing at or past ``upper_bound`` (the high watermark, or the last
        stable offset for read_committed) is handed out. ``aborted`` are the batches of aborted
        transactions among them (read_committed): archived, never delivered. At most ``max_records`` are
        handed out (BATCH_OPTIMIZED may go past it to the end of a log batch), and new records (past the
        SPEO) only while fewer than max.record.locks offsets are in flight. A record at the delivery
        limit is archived; a record at the throttle count goes out in a smaller run, and alone at its
        last attempt. ``batch_size`` > 0 splits the answer's AcquiredRecords at log batch boundaries."""
        check_ranges(batches, "batches")
        check_ranges(aborted, "aborted")
        log = [batch for batch in batches if batch.last_offset < upper_bound]
        if max_records <= 0 or not log:
            return Acquisition(after=self)
        span_first, span_last = max(log[0].first_offset, self.start_offset), log[-1].last_offset
        if span_last < span_first:
            return Acquisition(after=self)
        deadline = now_ms + (self.config.record_lock_duration_ms if lock_ms is None else lock_ms)
        limit = self.config.delivery_count_limit
        archived: list[OffsetRange] = []
        taken: list[AcquiredRecords] = []

        def skip(run: InFlightBatch) -> InFlightBatch:
            archived.append(run.as_range())
            return _moved(run, Event.SKIP, limit)

        def take(run: InFlightBatch) -> InFlightBatch:
            moved = _moved(run, Event.ACQUIRE, limit, member_id=member_id, deadline_ms=deadline)
            if moved.state is S.ACQUIRED:
                taken.append(AcquiredRecords(moved.first_offset, moved.last_offset, moved.delivery_count))
            else:
                archived.append(run.as_range())
            return moved

        runs = list(self.in_flight)
        # Available records between the fetch offset and the first batch read are gone from the log.
        stale_first, stale_last = max(fetch_offset, self.start_offset), min(log[0].first_offset, self.end_offset) - 1
        if stale_first <= stale_last:
            below, inside, above = cut(runs, stale_first, stale_last)
            runs = below + [skip(run) if run.state is S.AVAILABLE else run for run in inside] + above

        budget, stopped = max_records, False
        in_flight_last = min(span_last, self.end_offset - 1)
        if span_first <= in_flight_last:
            below, inside, above = cut(runs, span_first, in_flight_last)
            visited: list[InFlightBatch] = []
            for run in inside:
                if stopped or budget <= 0 or run.state is not S.AVAILABLE:
                    visited.append(run)
                    continue
                for first, last, is_aborted in split_by(run.first_offset, run.last_offset, aborted):
                    piece = run.part(first, last)
                    if stopped or budget <= 0:
                        visited.append(piece)
                    elif is_aborted:
                        visited.append(skip(piece))
                        budget -= piece.offset_count
                    elif piece.delivery_count >= limit:
                        visited.append(take(piece))  # archived by the table: no delivery left
                    else:
                        last_taken, stopped = self._redelivery_end(piece, budget, mode, log, bool(taken))
                        if last_taken is None:
                            visited.append(piece)
                            continue
                        visited.append(take(piece.part(first, last_taken)))
                        budget -= last_taken - first + 1
                        if last_taken < last:
                            visited.append(piece.part(last_taken + 1, last))
            runs = below + visited + above

        end = self.end_offset
        new_first = max(end, span_first)
        room = self.config.max_record_locks - (self.end_offset - self.start_offset)
        if not stopped and budget > 0 and room > 0 and span_last >= new_first:
            new_last = new_first + min(budget, room) - 1
            if mode is AcquireMode.BATCH_OPTIMIZED:
                new_last = batch_end(log, new_last)
            new_last = min(new_last, span_last)
            if new_first > end:  # nothing in the log between the SPEO and the first batch read
                runs.append(skip(InFlightBatch(end, new_first - 1, S.AVAILABLE, 0)))
            for first, last, is_aborted in split_by(new_first, new_last, aborted):
                fresh = InFlightBatch(first, last, S.AVAILABLE, 0)
                runs.append(skip(fresh) if is_aborted else take(fresh))
            end = new_last + 1

        records = _split_for_batch_size(_merge_acquired(taken), log, batch_size
                                        if mode is AcquireMode.BATCH_OPTIMIZED else 0)
        change = self.changed(runs, end, [OffsetRange(r.first_offset, r.last_offset) for r in taken] + archived)
        return Acquisition(after=change.after, state_batches=change.state_batches, write_needed=change.write_needed,
                           acquired_records=records, archived=merge_ranges(sorted(archived)))

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], *, now_ms: int,
                    lock_ms: int | None = None) -> Acknowledgement:
        """ShareFetch's or ShareAcknowledge's AcknowledgementBatches for this partition, as one unit.

        INVALID_REQUEST: a malformed batch (first past last, no type, a type list that is neither one type
        nor one per offset, an unknown type, batches out of order or overlapping), or a batch reaching past
        the records handed out (the SPEO). INVALID_RECORD_STATE: an offset not acquired by ``member_id``,
        or whose lock has run out, or a batch wholly below the SPSO (as Kafka: those records are done, and
        not by this member's hand if its lock ran out and another member's acknowledgement moved the SPSO;
        answering NONE would tell it that its ACCEPT was the one that counted). On either nothing changes
        (Kafka rolls back the whole partition). The part below the SPSO of a batch that reaches above it is
        ignored, as Kafka acknowledges such a batch from the SPSO on. ACCEPT acknowledges, RELEASE makes Available
        (archived at the delivery limit), REJECT and GAP archive, RENEW restarts the lock at
        ``now_ms + lock_ms`` (nothing to persist)."""
        malformed = first_malformed(batches)
        if malformed is not None:
            return Acknowledgement(after=self, error=ShareError.INVALID_REQUEST, failed_batch=malformed)
        deadline = now_ms + (self.config.record_lock_duration_ms if lock_ms is None else lock_ms)
        limit = self.config.delivery_count_limit
        runs = list(self.in_flight)
        touched: list[OffsetRange] = []
        for index, batch in enumerate(batches):
            if batch.last_offset < self.start_offset:
                return Acknowledgement(after=self, error=ShareError.INVALID_RECORD_STATE, failed_batch=index)
            first = max(batch.first_offset, self.start_offset)
            if batch.last_offset >= self.end_offset:
                return Acknowledgement(after=self, error=ShareError.INVALID_REQUEST, failed_batch=index)
            below, inside, above = cut(runs, first, batch.last_offset)
            if any(run.state is not S.ACQUIRED or run.member_id != member_id or run.lock_deadline_ms <= now_ms
                   for run in inside):
                return Acknowledgement(after=self, error=ShareError.INVALID_RECORD_STATE, failed_batch=index)
            moved = []
            for run in inside:
                for piece_first, piece_last, ack_type in type_runs(batch, run.first_offset, run.last_offset):
                    event = ACKNOWLEDGE_EVENTS[AcknowledgeType(ack_type)]
                    moved.append(_moved(run.part(piece_first, piece_last), event, limit, deadline_ms=deadline))
                    if event is not Event.RENEW:  # a lock deadline is not persisted
                        touched.append(OffsetRange(piece_first, piece_last))
            runs = below + moved + above
        change = self.changed(runs, self.end_offset, touched)
        return Acknowledgement(after=change.after, state_batches=change.state_batches,
                               write_needed=change.write_needed)

    def expire_locks(self, now_ms: int) -> Release:
        """Acquired records whose lock deadline has come go back: Available, or archived at the limit."""
        return self._release(Event.LOCK_TIMEOUT, lambda run: run.lock_deadline_ms <= now_ms)

    def release_member(self, member_id: str) -> Release:
        """Everything ``member_id`` holds goes back, as a release (its share session closed, or its
        connection went away); the deliveries count (Kafka 4.2)."""
        return self._release(Event.MEMBER_RELEASE, lambda run: run.member_id == member_id)

    # ---- helpers -----------------------------------------------------------------------------------------

    def _release(self, event: Event, chosen) -> Release:
        released: list[OffsetRange] = []
        runs = []
        for run in self.in_flight:
            if run.state is S.ACQUIRED and chosen(run):
                released.append(run.as_range())
                run = _moved(run, event, self.config.delivery_count_limit)
            runs.append(run)
        if not released:
            return Release(after=self)
        change = self.changed(runs, self.end_offset, released)
        return Release(after=change.after, state_batches=change.state_batches, write_needed=change.write_needed,
                       released=merge_ranges(released))

    def changed(self, runs: Sequence[InFlightBatch], end_offset: int, touched: Sequence[OffsetRange]) -> Change:
        """The share partition made of ``runs``, and the state batches of the ``touched`` offsets still in
        flight (those the SPSO passed need no batch: the start offset says they are done)."""
        start, kept = normalize(end_offset, runs)
        # An archived record never moves again, so an archived offset among those touched is newly archived.
        archived = sum(max(min(run.last_offset, t.last_offset) - max(run.first_offset, t.first_offset) + 1, 0)
                       for run in runs if run.state is S.ARCHIVED for t in touched)
        after = SharePartition(self.config, start, end_offset, self.state_epoch, kept, self.archived_total + archived)
        batches = persisted_within(kept, touched)
        return Change(after=after, state_batches=batches, write_needed=bool(batches) or start != self.start_offset)

    def _redelivery_end(self, run: InFlightBatch, budget: int, mode: AcquireMode, log: Sequence[OffsetRange],
                        taken_any: bool) -> tuple[int | None, bool]:
        """The last offset of ``run`` (Available, below the limit) to hand out, or None to leave it for a
        fetch of its own; and whether acquisition stops after it (throttled delivery)."""
        count, config = run.delivery_count, self.config
        if count >= config.throttle_delivery_count:
            if taken_any:
                return None, True
            if count == config.delivery_count_limit - 1:
                size = 1
            else:
                size = max(1, run.offset_count >> (count - config.throttle_delivery_count + 1))
            return run.first_offset + min(size, budget) - 1, True
        last = run.first_offset + budget - 1
        if mode is AcquireMode.BATCH_OPTIMIZED:
            last = batch_end(log, last)
        return min(last, run.last_offset), False


def _moved(run: InFlightBatch, event: Event, limit: int, *, member_id: str | None = None,
           deadline_ms: int | None = None) -> InFlightBatch:
    """``run`` after ``event``, through the transition table. An acquired run keeps its owner unless a new
    one is given; every other state has no owner and no lock."""
    state, count = transition(run.state, event, run.delivery_count, limit)
    if state is not S.ACQUIRED:
        return InFlightBatch(run.first_offset, run.last_offset, state, count)
    return InFlightBatch(run.first_offset, run.last_offset, state, count,
                         run.member_id if member_id is None else member_id,
                         run.lock_deadline_ms if deadline_ms is None else deadline_ms)


def first_malformed(batches: Sequence[AcknowledgementBatch]) -> int | None:
    """The index of the first batch Kafka's request check refuses with INVALID_REQUEST, or None."""
    previous_last = None
    for index, (first, last, types) in enumerate(batches):
        if (first < 0 or first > last or not types or (len(types) != 1 and len(types) != last - first + 1)
                or any(t not in _ACKNOWLEDGE_TYPES for t in types)
                or (previous_last is not None and first <= previous_last)):
            return index
        previous_last = last
    return None


def type_runs(batch: AcknowledgementBatch, first: int, last: int):
    """[first, last] (inside ``batch``) in runs of one acknowledge type."""
    types = batch.acknowledge_types
    if len(types) == 1:
        yield first, last, types[0]
        return
    run_first = first
    for offset in range(first + 1, last + 2):
        if offset > last or types[offset - batch.first_offset] != types[run_first - batch.first_offset]:
            yield run_first, offset - 1, types[run_first - batch.first_offset]
            run_first = offset


def _merge_acquired(taken: Sequence[AcquiredRecords]) -> list[AcquiredRecords]:
    out: list[AcquiredRecords] = []
    for records in sorted(taken):
        if out and out[-1].last_offset + 1 == records.first_offset and out[-1].delivery_count == records.delivery_count:
            out[-1] = out[-1]._replace(last_offset=records.last_offset)
        else:
            out.append(records)
    return out


def _split_for_batch_size(records: Sequence[AcquiredRecords], log: Sequence[OffsetRange], batch_size: int
                          ) -> tuple[AcquiredRecords, ...]:
    """Kafka's createBatches: a range longer than ``batch_size`` is cut at the first log batch boundary at
    least ``batch_size`` records after the previous cut."""
    if batch_size <= 0:
        return tuple(records)
    out: list[AcquiredRecords] = []
    for first, last, count in records:
        start = first
        for batch in log:
            if start < batch.first_offset <= last and batch.first_offset - start >= batch_size:
                out.append(AcquiredRecords(start, batch.first_offset - 1, count))
                start = batch.first_offset
        out.append(AcquiredRecords(start, last, count))
    return tuple(out)
