"""The share partitions this broker leads (Kafka's SharePartitionManager): the state of each share
partition (group, topic, partition) kept as a :class:`~eoslog.share.partition_state.SharePartition`,
loaded from and persisted to the share coordinator, and changed by ShareFetch and ShareAcknowledge
(share/fetch.py), lock expiry and departing members.

Contract
- Owns one holder per share partition touched here: its value (None until loaded), a lock, the timer of
  its earliest acquisition lock, and the futures of ShareFetch long polls waiting for records to come
  back. Only the broker's event loop calls it.
- The rules the pure core leaves to its caller (docs/share-groups.md, "Decisions step 3 inherits"):
  operations on one share partition run one at a time (an asyncio lock per share partition, held across
  the share coordinator's write); each starts with ``expire_locks(now)`` and the log start offset, so what
  expired can go out again at once; each Change's update is written through the ``Persister`` and only
  then does ``after`` replace the value (a failed write keeps the old value: Kafka's rollback; a fenced
  one drops it, to be read again). A timer per share partition, armed at ``next_deadline()``, gives
  expired records back even when nobody fetches.
- Loading: the share coordinator's state (ReadShareGroupState with this leader's epoch). A start offset
  of -1 (initialized by the group coordinator, never placed) is placed now by the group's
  ``share.auto.offset.reset`` (earliest: the log start; latest: the high watermark, or the last stable
  offset under read_committed; by_duration: the first batch written since then, else latest) and written
  at once, so a restart does not place it again.
- Acquisitions are written too (``persist_acquisitions``, docs/share-groups.md "Persisting acquisitions"):
  the delivery count a failover finds is then exact. Kafka does not write them; with the flag off eoslog
  behaves as Kafka does, and a crash may deliver a record once more than its limit.
- Departures: a member leaving or timing out (the group coordinator tells :meth:`member_left`), its share
  session closing or its connection dropping (share/fetch.py) gives back every record it holds here; a
  leave's release waits behind the member's share requests and session here (share/departures.py).
- Leadership (a cluster, docs/share-groups.md step 4): share partitions live on their partition's leader.
  Every operation checks, under the share partition's lock, that this broker still leads the partition
  (NOT_LEADER_OR_FOLLOWER otherwise) and that the value kept is of the current leader epoch: on a new
  epoch it is kept only if no other leader read the state since (ReadShareGroupStateSummary's leader
  epoch is the last reader's), else dropped and read again from the share coordinator. Each read and
  write carries the partition's leader epoch, so the share coordinator fences an older leader's writes.
  :meth:`leadership_lost` (the replica manager's resignation) drops the partition's share partitions at
  once: their acquisitions are then the new leader's, read from what was persisted.
- Acknowledgements inside a transaction (docs/share-groups.md "Step 6"): each holder keeps a
  :class:`~eoslog.share.transactional_acks.PendingAcknowledgements` (its ``partition`` is the value above),
  every write carries its whole pending set, and loading holds the pending records again. A transaction's
  outcome reaches the leader from the share coordinator: at once when that is this broker
  (:meth:`transactions_decided`), and by asking it every ``outcome_poll_ms`` while a transaction holds
  records here (and before a producer that still holds records acknowledges again); the outcome is applied
  (``complete``) and written like any other change.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from eoslog.coordinator.group.dynamic_configs import AutoOffsetReset
from eoslog.coordinator.share.log_format import (
    NO_START_OFFSET,
    OUTCOME_COMMITTED,
    OUTCOME_PENDING,
    PendingAckRange,
    PendingTransaction,
    SharePartitionKey,
)
from eoslog.coordinator.share.log_format import StateBatch as PersistedBatch
from eoslog.protocol.errors import ErrorCode
from eoslog.share.departures import MemberActivity
from eoslog.share.errors import ShareError
from eoslog.share.in_flight import (
    AcknowledgementBatch,
    OffsetRange,
    PersistedState,
    StateBatch,
    persisted_within,
)
from eoslog.share.partition_state import (
    AcquireMode,
    Acquisition,
    Change,
    SharePartition,
    SharePartitionConfig,
)
from eoslog.share.record_state import AcknowledgeType, RecordState
from eoslog.share.sessions import ShareSessions
from eoslog.share.state_errors import ACK_MESSAGES, TXN_MESSAGES, error_of, state_error
from eoslog.share.transactional_acks import (
    PendingAck,
    PendingAcknowledgements,
    PersistedHold,
    TxnAckError,
    TxnChange,
    TxnState,
)

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition
    from eoslog.coordinator.share.persister import Persister

log = logging.getLogger(__name__)
T = TypeVar("T")


# How long a leave's release waits for the member's open share session to close (share/departures.py).
LEAVE_SESSION_GRACE_MS = 1000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class ShareManagerConfig:
    """The broker's share-partition settings (group.share.*)."""

    max_record_locks: int = 2000  # group.share.partition.max.record.locks
    max_share_sessions: int = 2000  # group.share.max.share.sessions
    persist_acquisitions: bool = True  # eoslog.share.persist.acquisitions
    # Transactional acknowledgements (docs/share-groups.md "Step 6"): how often a share partition whose
    # records a transaction holds asks its share coordinator whether a marker decided it (a share
    # coordinator on this broker also says so at once), and the timeout a hold read back after a leader
    # change counts from (its first acknowledgement's deadline is not persisted).
    outcome_poll_ms: int = 1000
    loaded_transaction_timeout_ms: int = 900_000  # transaction.max.timeout.ms: no transaction runs longer
    # transactional.id.expiration.ms: a producer's epoch is remembered (to fence its zombies here) this long
    # after its last acknowledgement, once it holds nothing.
    producer_epoch_expiration_ms: int = 604_800_000


class ShareGroupSettings(NamedTuple):
    """A share group's configs as a share partition uses them (group config, else the broker's)."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    auto_offset_reset: AutoOffsetReset = AutoOffsetReset("latest")
    isolation_level: int = 0  # READ_UNCOMMITTED, or READ_COMMITTED


@dataclass(eq=False)
class _Holder:
    key: SharePartitionKey
    topic: str
    # The share partition with what transactions hold of it (None until loaded); ``value`` is its
    # SharePartition, which every operation but the transactional ones changes.
    acks: PendingAcknowledgements | None = None
    leader_epoch: int = -1  # the partition's leader epoch ``value`` is known to be exact in
    read_epoch: int = -1  # the leader epoch ``value`` was read from the share coordinator with
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: asyncio.TimerHandle | None = None
    poll: asyncio.TimerHandle | None = None  # asks for markers' outcomes while a transaction holds records
    producers_seen: dict[int, int] = field(default_factory=dict)  # producer id -> its last acknowledgement here
    waiters: set[asyncio.Future] = field(default_factory=set)

    @property
    def value(self) -> SharePartition | None:
        return None if self.acks is None else self.acks.partition

    @value.setter
    def value(self, partition: SharePartition | None) -> None:
        if partition is None:
            self.acks = None
        elif self.acks is None:
            self.acks = PendingAcknowledgements.of(partition)
        else:
            self.acks = self.acks.with_partition(partition)

    def cancel_timers(self) -> None:
        for timer in (self.timer, self.poll):
            if timer is not None:
                timer.cancel()
        self.timer = self.poll = None


class Acquired(NamedTuple):
    """What one share partition handed out to one ShareFetch."""

    acquired: tuple  # AcquiredRecords, ascending
    read: object  # the LogRead the records came from (share/log_reads.py), or None
    lock_duration_ms: int


class SharePartitionManager:
    def __init__(self, replicas, topics_by_id: Callable[[uuid.UUID], str | None], persister: Persister,
                 settings: Callable[[str], ShareGroupSettings], config: ShareManagerConfig | None = None) -> None:
        """``replicas``: the replica manager (which partitions this broker leads); ``topics_by_id``: a
        topic id's name, or None; ``settings(group_id)``: the group's share settings now."""
        self.replicas = replicas
        self.topic_name = topics_by_id
        self.persister = persister
        self.settings = settings
        self.config = config or ShareManagerConfig()
        self.sessions = ShareSessions(self.config.max_share_sessions)
        # Each member's share requests running here, which a leave's release waits for (member_left).
        self.activity = MemberActivity(lambda group_id, member_id: self.sessions.get(group_id, member_id) is not None)
        self._holders: dict[SharePartitionKey, _Holder] = {}
        self._tasks: set[asyncio.Task] = set()
        if hasattr(replicas, "resign_listeners"):  # the replica manager (unit tests may pass a stand-in)
            replicas.resign_listeners.append(self.leadership_lost)
        self.writes = 0  # share-state writes made (bench/ and tests read it)

    # ---- reading ------------------------------------------------------------------------------------

    def value(self, key: SharePartitionKey) -> SharePartition | None:
        holder = self._holders.get(key)
        return None if holder is None else holder.value

    def loaded(self) -> list[tuple[SharePartitionKey, str, SharePartition]]:
        """(key, topic name, value) of every share partition loaded here, for the metrics."""
        return [(key, holder.topic, holder.value) for key, holder in self._holders.items() if holder.value is not None]

    def transactions(self, key: SharePartitionKey) -> tuple[int, int]:
        """(records transactions hold, transactions past their timeout) of a share partition loaded here."""
        holder = self._holders.get(key)
        if holder is None or holder.acks is None:
            return 0, 0
        acks = holder.acks
        return acks.held_count(), sum(1 for hold in acks.holds.values() if hold.state is TxnState.OVERDUE)

    def partition(self, topic: str, index: int) -> Partition:
        return self.replicas.leader_partition(topic, index)

    # ---- operations -----------------------------------------------------------------------------------

    async def acquire(self, key: SharePartitionKey, topic: str, member_id: str, *, max_records: int,
                      max_bytes: int, min_one_batch: bool, mode: AcquireMode, batch_size: int) -> Acquired:
        """ShareFetch: the records of ``key`` handed to ``member_id`` and the log batches holding them.
        Raises the partition's error (not the leader, no such partition, the state unavailable)."""
        from eoslog.share.log_reads import read_for_share

        settings = self.settings(key.group_id)
        partition = self.partition(topic, key.partition)
        reads = []

        def operation(value: SharePartition, now: int) -> Change:
            if not value.can_acquire():
                return Change(after=value)
            read = read_for_share(partition, value.next_fetch_offset(), max_bytes, settings.isolation_level,
                                  min_one_batch)
            reads.append(read)
            if not read.batches:
                return Change(after=value)
            return value.acquire(member_id, value.next_fetch_offset(), read.ranges, now_ms=now,
                                 max_records=max_records, upper_bound=read.upper_bound, aborted=read.aborted,
                                 mode=mode, batch_size=batch_size, lock_ms=settings.record_lock_duration_ms)

        change = await self._run(key, topic, partition, settings, operation,
                                 persist=self.config.persist_acquisitions, to_the_end=False)
        acquired = getattr(change, "acquired_records", ())
        return Acquired(tuple(acquired), reads[0] if reads and acquired else None, settings.record_lock_duration_ms)

    async def acknowledge(self, key: SharePartitionKey, topic: str, member_id: str,
                          batches: Sequence[AcknowledgementBatch]) -> tuple[ErrorCode, str | None]:
        """ShareFetch's or ShareAcknowledge's batches for one share partition, as one unit."""
        settings = self.settings(key.group_id)
        try:
            partition = self.partition(topic, key.partition)
            change = await self._run(key, topic, partition, settings, lambda value, now: value.acknowledge(
                member_id, batches, now_ms=now, lock_ms=settings.record_lock_duration_ms))
        except Exception as exc:  # noqa: BLE001 - the partition's AcknowledgeErrorCode, mapped in one place
            return error_of(exc)
        error = getattr(change, "error", ShareError.NONE)
        if error is not ShareError.NONE:
            return ErrorCode[error.value], ACK_MESSAGES.get(error)
        return ErrorCode.NONE, None

    async def acknowledge_in_transaction(self, key: SharePartitionKey, topic: str, member_id: str | None,
                                         producer_id: int, producer_epoch: int, transaction_timeout_ms: int,
                                         batches: Sequence[AcknowledgementBatch], delivery_counts: Sequence[int] = ()
                                         ) -> tuple[ErrorCode, str | None]:
        """ShareAcknowledgeTxn for one share partition, once the transaction coordinator has verified that
        the share partition's state partition is in this producer's ongoing transaction: the records move
        from ``member_id`` (None: whichever one member holds them, at the ``delivery_counts`` the client
        saw) to the transaction, pending until its marker. Written (the whole pending set) before it is kept."""
        settings = self.settings(key.group_id)
        try:
            self.partition(topic, key.partition)  # not the leader: refused before a holder is made
            holder = self._holders.get(key)
            if holder is None:
                holder = self._holders[key] = _Holder(key, topic)
            change = await self._to_the_end(self._acknowledge_in_transaction_locked(
                holder, key, topic, settings, member_id, producer_id, producer_epoch, transaction_timeout_ms,
                batches, delivery_counts))
        except Exception as exc:  # noqa: BLE001 - the partition's error, mapped in one place
            return error_of(exc)
        if change.error is not TxnAckError.NONE:
            return ErrorCode[change.error.value], TXN_MESSAGES.get(change.error)
        return ErrorCode.NONE, None

    async def _acknowledge_in_transaction_locked(self, holder: _Holder, key: SharePartitionKey, topic: str,
                                                 settings: ShareGroupSettings, member_id: str | None,
                                                 producer_id: int, producer_epoch: int, transaction_timeout_ms: int,
                                                 batches: Sequence[AcknowledgementBatch],
                                                 delivery_counts: Sequence[int]) -> TxnChange:
        async with holder.lock:
            partition = self.partition(topic, key.partition)
            await self._prepared(holder, partition, settings)
            if producer_id in holder.acks.holds:
                # The transaction before this one of the same producer (transaction version 1 keeps the
                # epoch) may be decided already: its marker is durable before this one could register.
                await self._refresh_outcomes(holder, partition)
            owner = member_id if member_id is not None else _owner_of(holder.acks.partition, batches)
            change = holder.acks.acknowledge(owner or "", producer_id, producer_epoch, batches, now_ms=now_ms(),
                                             transaction_timeout_ms=transaction_timeout_ms,
                                             delivery_counts=delivery_counts)
            if change.error is TxnAckError.NONE and change.write_needed:
                touched = [OffsetRange(b.first_offset, b.last_offset)
                           for b in (change.update.state_batches if change.update else ())]
                await self._write(holder, partition, change.after.partition, touched, change.after)
                holder.acks = change.after
                holder.producers_seen[producer_id] = now_ms()
            self._arm(holder)
            return change

    def transactions_decided(self, keys: Iterable[SharePartitionKey]) -> None:
        """The share coordinator on this broker saw a marker decide transactions holding records of these
        share partitions: the ones led here apply the outcome now (others learn it by their poll)."""
        for key in keys:
            holder = self._holders.get(key)
            if holder is not None and holder.acks is not None and holder.acks.holds:
                self._spawn(self._poll_outcomes(holder))

    async def release_member(self, key: SharePartitionKey, member_id: str) -> None:
        """Everything ``member_id`` holds in ``key`` goes back (its session closed, its connection dropped,
        it left the group); a failure leaves them to their locks."""
        holder = self._holders.get(key)
        if holder is None or holder.value is None or not holder.value.acquired_count(member_id):
            return
        try:
            partition = self.partition(holder.topic, key.partition)
            await self._run(key, holder.topic, partition, self.settings(key.group_id),
                            lambda value, now: value.release_member(member_id))
        except Exception as exc:  # noqa: BLE001 - the locks run out instead
            log.info("could not release the records of %s in %s: %s", member_id, key, exc)

    # ---- departures ---------------------------------------------------------------------------------------

    def member_left(self, group_id: str, member_id: str) -> None:
        """The group coordinator removed ``member_id`` (it left, or its session timed out). The release
        waits behind the member's share requests and session here (share/departures.py): a leave must
        not overtake an acknowledgement already received. On a cluster only the coordinator's broker
        hears of it; other leaders release on the session's close, its connection's drop, or the locks."""
        self._spawn(self._release_departed(group_id, member_id))

    async def _release_departed(self, group_id: str, member_id: str) -> None:
        # The final request of a closing member (sent before its leave, on another connection) closes its
        # session after its acknowledgements; a member that leaves and keeps its session open is released
        # after the grace. A request running is never overtaken (within its locks' duration).
        await self.activity.until_quiet(group_id, member_id, LEAVE_SESSION_GRACE_MS / 1000)
        await self.activity.until_quiet(group_id, member_id, self.settings(group_id).record_lock_duration_ms / 1000,
                                        session=False)
        await asyncio.gather(*(self.release_member(key, member_id)
                               for key in [k for k in self._holders if k.group_id == group_id]))

    def group_deleted(self, group_id: str) -> None:
        """DeleteGroups removed the group and its share state: forget what is held of it here."""
        for key in [k for k in self._holders if k.group_id == group_id]:
            self._holders.pop(key).cancel_timers()

    def leadership_lost(self, topic: str, index: int) -> None:
        """This broker stopped leading ``topic``-``index``: its share partitions are forgotten here (timers
        cancelled, long polls woken to find the new leader); an operation already running finishes against
        the share coordinator, which fences it once the new leader has read the state."""
        for key in [k for k, h in self._holders.items() if h.topic == topic and k.partition == index]:
            holder = self._holders.pop(key)
            holder.cancel_timers()
            self._wake(holder)
            log.info("share partition %s dropped: leadership of %s-%d moved away", key, topic, index)

    def session_released(self, group_id: str, member_id: str, partitions: Iterable) -> list:
        """The coroutines giving back what a closed share session's member holds in ``partitions``
        ((topic id, partition) pairs)."""
        return [self.release_member(SharePartitionKey(group_id, topic_id, index), member_id)
                for topic_id, index in partitions]

    def connection_closed(self, connection_id: str) -> None:
        session = self.sessions.connection_closed(connection_id)
        if session is not None:
            for work in self.session_released(session.key.group_id, session.key.member_id, session.partitions):
                self._spawn(work)
            self.activity.changed(session.key.group_id, session.key.member_id)

    # ---- waiting for records --------------------------------------------------------------------------

    def add_waiter(self, key: SharePartitionKey, future: asyncio.Future) -> None:
        holder = self._holders.get(key)
        if holder is not None:
            holder.waiters.add(future)

    def remove_waiter(self, key: SharePartitionKey, future: asyncio.Future) -> None:
        holder = self._holders.get(key)
        if holder is not None:
            holder.waiters.discard(future)

    async def stop(self) -> None:
        for holder in self._holders.values():
            holder.cancel_timers()
        for task in list(self._tasks):
            task.cancel()

    # ---- carrying out ---------------------------------------------------------------------------------------

    async def _run(self, key: SharePartitionKey, topic: str, partition: Partition, settings: ShareGroupSettings,
                   operation: Callable[[SharePartition, int], Change], persist: bool = True,
                   to_the_end: bool = True) -> Change:
        """``operation`` on the share partition, after the locks that ran out and the log start offset;
        what changed is written, then kept. Returns the operation's own Change. Only an acquisition
        (``to_the_end`` False) stops where its request is cancelled: its records would be held for a
        member that never gets them, each such acquisition counting a delivery nobody saw."""
        holder = self._holders.get(key)
        if holder is None:
            holder = self._holders[key] = _Holder(key, topic)
        work = self._run_locked(holder, key, topic, settings, operation, persist)
        return await (self._to_the_end(work) if to_the_end else work)

    async def _run_locked(self, holder: _Holder, key: SharePartitionKey, topic: str, settings: ShareGroupSettings,
                          operation: Callable[[SharePartition, int], Change], persist: bool) -> Change:
        async with holder.lock:
            partition = self.partition(topic, key.partition)  # still the leader, after waiting for the lock
            before = await self._loaded(holder, partition, settings)
            now = now_ms()
            expired = before.expire_locks(now)
            moved = expired.after.advance_log_start_offset(partition.log_start_offset)
            change = operation(moved.after, now)
            steps = (expired, moved, change) if persist else (expired, moved)
            if any(step.write_needed for step in steps):
                await self._write(holder, partition, change.after, _touched((expired, moved, change)), holder.acks)
            holder.value = change.after
            holder.acks = forget_expired_producers(holder.acks.expire_transactions(now).after, holder.producers_seen,
                                                   now, self.config.producer_epoch_expiration_ms)
            self._arm(holder)
            if expired.write_needed or (not isinstance(change, Acquisition) and change.after is not moved.after):
                self._wake(holder)  # records may be free again: long polls of other members look
            return change

    async def _write(self, holder: _Holder, partition: Partition, after: SharePartition,
                     touched: Sequence[OffsetRange], pending: PendingAcknowledgements) -> None:
        """Writes the ``touched`` ranges of ``after`` and the whole pending set of ``pending`` (every write
        carries it: a write without it means none)."""
        batches = persisted_within(after.in_flight, touched)
        key = holder.key
        try:
            answer = await self.persister.write_state(
                key.group_id, key.topic_id, key.partition, state_epoch=after.state_epoch,
                leader_epoch=_leader_epoch(partition), start_offset=after.start_offset,
                state_batches=[PersistedBatch(b.first_offset, b.last_offset, b.delivery_state.value,
                                              b.delivery_count) for b in batches],
                delivery_complete_count=after.delivery_complete_count,
                pending_transactions=_persisted(pending.persisted_holds()))
        except asyncio.CancelledError:
            raise  # only an acquisition (the rest run to their end): the next write restates its ranges
        except BaseException:
            holder.value = None  # the write's outcome is unknown: read the state again (below)
            raise
        self.writes += 1
        if answer.error is not ErrorCode.NONE:
            # Fenced: a newer leader or a new initialization wrote it. Any other error may come after the
            # record was appended (a timeout, a coordinator that moved before its high watermark passed
            # it), so the share coordinator may have applied it. Keeping the value from before and writing
            # the next update against it (an update names only what changed, and may move the start offset)
            # would undo there what this write did: read the state again before the next operation.
            holder.value = None
            raise state_error(answer.error, answer.message)

    async def _loaded(self, holder: _Holder, partition: Partition, settings: ShareGroupSettings) -> SharePartition:
        config = SharePartitionConfig(settings.delivery_count_limit, self.config.max_record_locks,
                                      settings.record_lock_duration_ms)
        value = holder.value
        epoch = _leader_epoch(partition)
        if value is not None and holder.leader_epoch != epoch:
            value = await self._kept_across_epochs(holder, epoch)
        if value is not None:
            if value.config != config:  # a group config changed
                value = holder.value = dataclasses.replace(value, config=config)
            return value
        key = holder.key
        answer = await self.persister.read_state(key.group_id, key.topic_id, key.partition, leader_epoch=epoch)
        if answer.error is not ErrorCode.NONE:
            raise state_error(answer.error, answer.message)
        state = answer.state
        if state.start_offset == NO_START_OFFSET:
            start = _reset_offset(partition, settings)
            placed = await self.persister.write_state(key.group_id, key.topic_id, key.partition,
                                                      state_epoch=state.state_epoch, leader_epoch=epoch,
                                                      start_offset=start, state_batches=(),
                                                      delivery_complete_count=0)
            if placed.error is not ErrorCode.NONE:
                raise state_error(placed.error, placed.message)
            value = SharePartition.initial(config, start, state.state_epoch)
            log.info("share partition %s starts at offset %d (share.auto.offset.reset=%s)", key, start,
                     settings.auto_offset_reset.strategy)
            holder.acks = PendingAcknowledgements.of(value)
        else:
            batches = tuple(StateBatch(b.first_offset, b.last_offset, RecordState.from_id(b.delivery_state),
                                       b.delivery_count) for b in state.state_batches)
            value = SharePartition.load(config, PersistedState(state.start_offset, state.state_epoch, batches))
            # Records a transaction holds were written Available; the pending set holds them again.
            holder.acks = PendingAcknowledgements.load(
                value, [_hold_of(t) for t in state.pending_transactions], now_ms=now_ms(),
                transaction_timeout_ms=self.config.loaded_transaction_timeout_ms)
        holder.leader_epoch, holder.read_epoch = epoch, epoch
        decided = [t for t in state.pending_transactions if t.outcome != OUTCOME_PENDING]
        if decided:  # markers came while no leader had it loaded: apply them now
            await self._complete(holder, partition, decided)
        return holder.value

    async def _prepared(self, holder: _Holder, partition: Partition, settings: ShareGroupSettings) -> None:
        """Under the lock: the value loaded, what ran out given back and the log start offset applied (and
        written if that changed anything), open transactions past their timeout made overdue."""
        before = await self._loaded(holder, partition, settings)
        now = now_ms()
        expired = before.expire_locks(now)
        moved = expired.after.advance_log_start_offset(partition.log_start_offset)
        if expired.write_needed or moved.write_needed:
            await self._write(holder, partition, moved.after, _touched((expired, moved)), holder.acks)
        holder.value = moved.after
        holder.acks = holder.acks.expire_transactions(now).after
        holder.acks = forget_expired_producers(holder.acks, holder.producers_seen, now,
                                               self.config.producer_epoch_expiration_ms)
        if expired.write_needed:
            self._wake(holder)

    async def _complete(self, holder: _Holder, partition: Partition, decided: Sequence[PendingTransaction]) -> None:
        """Under the lock: the markers' outcomes applied to what the transactions hold (COMMIT applies each
        pending type, ABORT releases with the delivery count kept), each written before it is kept."""
        for txn in decided:
            hold = holder.acks.holds.get(txn.producer_id)
            if hold is None or hold.producer_epoch != txn.producer_epoch:
                continue  # applied already (a write of it is what the share coordinator has not seen yet)
            change = holder.acks.complete(txn.producer_id, txn.producer_epoch, txn.outcome == OUTCOME_COMMITTED)
            if change.error is not TxnAckError.NONE:
                log.warning("share partition %s: the outcome of producer %d epoch %d was refused: %s", holder.key,
                            txn.producer_id, txn.producer_epoch, change.error.value)
                continue
            touched = [OffsetRange(b.first_offset, b.last_offset)
                       for b in (change.update.state_batches if change.update else ())]
            await self._write(holder, partition, change.after.partition, touched, change.after)
            holder.acks = change.after
            log.debug("share partition %s: transaction of producer %d %s", holder.key, txn.producer_id,
                      "committed" if txn.outcome == OUTCOME_COMMITTED else "aborted")
        self._wake(holder)  # aborted records are Available again

    async def _refresh_outcomes(self, holder: _Holder, partition: Partition) -> None:
        """Under the lock: asks the share coordinator which transactions holding records here a marker
        decided (ReadShareGroupState at this leader's epoch records nothing), and applies them."""
        key = holder.key
        answer = await self.persister.read_state(key.group_id, key.topic_id, key.partition,
                                                 leader_epoch=_leader_epoch(partition))
        if answer.error is not ErrorCode.NONE:
            raise state_error(answer.error, answer.message)
        decided = [t for t in answer.state.pending_transactions if t.outcome != OUTCOME_PENDING]
        if decided:
            await self._complete(holder, partition, decided)

    def _on_poll(self, holder: _Holder) -> None:
        holder.poll = None
        if self._holders.get(holder.key) is holder:
            self._spawn(self._poll_outcomes(holder))

    async def _poll_outcomes(self, holder: _Holder) -> None:
        try:
            async with holder.lock:
                if self._holders.get(holder.key) is not holder or holder.acks is None or not holder.acks.holds:
                    return
                partition = self.partition(holder.topic, holder.key.partition)
                await self._refresh_outcomes(holder, partition)
        except Exception as exc:  # noqa: BLE001 - asked again at the next poll
            log.info("could not learn the transactions' outcomes of %s: %s", holder.key, exc)
        if self._holders.get(holder.key) is holder:
            self._arm(holder)

    async def _kept_across_epochs(self, holder: _Holder, epoch: int) -> SharePartition | None:
        """A new leader epoch of a partition this broker leads now: the value kept is still exact when no
        other leader read the state since this one did (ZooKeeper mode also bumps the epoch when the ISR
        shrinks, and views may coalesce a move away and back); the share coordinator's leader epoch is the
        last reader's. Otherwise the value is dropped, to be read again."""
        key = holder.key
        summary = await self.persister.read_state_summary(key.group_id, key.topic_id, key.partition)
        if summary.error is not ErrorCode.NONE:
            raise state_error(summary.error, summary.message)
        if summary.state is not None and summary.state.leader_epoch == holder.read_epoch:
            holder.leader_epoch = epoch
            return holder.value
        log.info("share partition %s: leader epoch %d, the state kept is of %d and another leader read it since; "
                 "reading it again", key, epoch, holder.leader_epoch)
        holder.value = None
        return None

    def _arm(self, holder: _Holder) -> None:
        if holder.timer is not None:
            holder.timer.cancel()
            holder.timer = None
        # PendingAcknowledgements.next_deadline, not the partition's (which names the sentinel of held records).
        deadline = holder.acks.next_deadline() if holder.acks is not None else None
        if deadline is not None:
            delay = max(deadline - now_ms(), 0) / 1000
            holder.timer = asyncio.get_running_loop().call_later(delay, self._on_deadline, holder)
        if holder.acks is not None and holder.acks.holds and holder.poll is None:
            holder.poll = asyncio.get_running_loop().call_later(self.config.outcome_poll_ms / 1000,
                                                                self._on_poll, holder)

    def _on_deadline(self, holder: _Holder) -> None:
        holder.timer = None
        if self._holders.get(holder.key) is holder:
            self._spawn(self._expire(holder))

    async def _expire(self, holder: _Holder) -> None:
        try:
            partition = self.partition(holder.topic, holder.key.partition)
            await self._run(holder.key, holder.topic, partition, self.settings(holder.key.group_id),
                            lambda value, now: Change(after=value))
        except Exception as exc:  # noqa: BLE001 - tried again at the next deadline or fetch
            log.info("could not expire the locks of %s: %s", holder.key, exc)
            if self._holders.get(holder.key) is holder and holder.timer is None:
                holder.timer = asyncio.get_running_loop().call_later(1.0, self._on_deadline, holder)

    def _wake(self, holder: _Holder) -> None:
        waiters, holder.waiters = holder.waiters, set()
        for future in waiters:
            if not future.done():
                future.set_result(None)

    async def _to_the_end(self, work: Awaitable[T]) -> T:
        """Awaits ``work`` (an operation under a share partition's lock), which runs to its end even when
        the request awaiting it is cancelled (its connection closed, its client killed). Cut between the
        share coordinator's write and keeping its result, the value kept would be older than the state
        written, and the next write, an update against it, would undo there what was written: an ACCEPT
        the coordinator applied would come back Available (and its record be delivered again with the same
        delivery count)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_retrieved)
        return await asyncio.shield(task)

    def _spawn(self, work) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _leader_epoch(partition: Partition) -> int:
    return partition.leader_epoch if partition.leader_epoch is not None else 0


def _reset_offset(partition: Partition, settings: ShareGroupSettings) -> int:
    latest = partition.fetch_upper_bound(settings.isolation_level)
    reset = settings.auto_offset_reset
    if reset.strategy == "earliest":
        return partition.log_start_offset
    if reset.strategy == "by_duration":
        found = partition.log.offset_for_timestamp(now_ms() - reset.duration_ms)
        return latest if found is None else min(found.offset, latest)
    return latest


def forget_expired_producers(acks: PendingAcknowledgements, seen: dict[int, int], now: int, expiration_ms: int
                             ) -> PendingAcknowledgements:
    """``acks`` without the epochs of producers that hold nothing here and last acknowledged here more than
    ``expiration_ms`` ago (as the transaction coordinator forgets a transactional id); ``seen`` (producer id
    -> last acknowledgement) is updated. A producer never seen (its epoch read back at a load) counts from now.
    The core fences a zombie with these epochs; the transaction coordinator's check fences it in any case."""
    for producer_id in acks.producer_epochs:
        seen.setdefault(producer_id, now)
    expired = {pid for pid, at in seen.items() if now - at > expiration_ms and pid not in acks.holds}
    for producer_id in expired | (set(seen) - set(acks.producer_epochs)):
        seen.pop(producer_id, None)
    if not expired:
        return acks
    return dataclasses.replace(acks, producer_epochs={pid: epoch for pid, epoch in acks.producer_epochs.items()
                                                      if pid not in expired})


def _touched(steps: Sequence[Change]) -> list[OffsetRange]:
    return [OffsetRange(b.first_offset, b.last_offset) for step in steps for b in step.state_batches]


def _persisted(holds: Sequence[PersistedHold]) -> tuple[PendingTransaction, ...]:
    return tuple(PendingTransaction(h.producer_id, h.producer_epoch, tuple(
        PendingAckRange(a.first_offset, a.last_offset, int(a.acknowledge_type)) for a in h.acks)) for h in holds)


def _hold_of(txn: PendingTransaction) -> PersistedHold:
    return PersistedHold(txn.producer_id, txn.producer_epoch, tuple(
        PendingAck(a.first_offset, a.last_offset, AcknowledgeType(a.acknowledge_type)) for a in txn.acks))


def _retrieved(task: asyncio.Task) -> None:
    """A task of :meth:`SharePartitionManager._to_the_end` ended: its error read, since whoever awaited it
    may have been cancelled meanwhile (the error was then nobody's to see)."""
    if not task.cancelled():
        task.exception()


def _owner_of(partition: SharePartition, batches: Sequence[AcknowledgementBatch]) -> str | None:
    """The one member holding the acknowledged records, for a ShareAcknowledgeTxn that names none (a client
    such as librdkafka's ShareConsumer does not tell its member id); None when there is not exactly one."""
    owners = {run.member_id for run in partition.in_flight if run.state is RecordState.ACQUIRED
              and isinstance(run.member_id, str)
              and any(run.first_offset <= b.last_offset and b.first_offset <= run.last_offset for b in batches)}
    return owners.pop() if len(owners) == 1 else None
