"""The share coordinator's shard: :class:`ShareStates` (the pure core) for each ``__share_group_state``
partition led here, on the coordinator runtime (after Kafka's ShareCoordinatorService and the runtime's
shard of ShareCoordinatorShard).

Contract
- Owns one :class:`ShareStates` per ``__share_group_state`` partition this broker coordinates, built by
  :meth:`load` from the partition's log (or empty, for a sole broker's partition of a topic created on
  first use), dropped by :meth:`unload`. The runtime (coordinator/runtime.py) owns ownership, loading,
  the order of the writes and the timer. Only the broker's event loop calls it.
- The operations (``initialize_state``, ``write_state``, ``read_state``, ``read_state_summary``,
  ``delete_state``) take one share partition (group id, topic id, partition) each, as Kafka's shard does:
  the handlers split a request per share partition, as ShareCoordinatorService does. Each answers a
  :class:`ShareAnswer`: NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when another broker, or not yet
  this one, coordinates it; the core's answer otherwise, once its record is durable.
- prepare -> log -> apply: a record is appended at once through ``runtime.write`` and applied to the core
  from the runtime's durable callback (so a caller that stops waiting cannot leave memory behind the log);
  a failed append or fsync answers COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR and changes nothing.
- One operation at a time per share partition: an operation waits until the previous record of its share
  partition is applied before deciding, so it decides on the state its record follows (Kafka's runtime
  gets the same from applying records as it appends them). Share partitions do not wait for each other.
- Timed work (Kafka's ShareCoordinatorService timers), every share.coordinator.cold.partition.snapshot
  .interval.ms: a new snapshot of each idle share partition (``ShareStates.cold_snapshots``); every
  share.coordinator.state.topic.prune.interval.ms: pruning. Kafka prunes with DeleteRecords of
  ``__share_group_state`` below the oldest newest-snapshot (ShareCoordinatorOffsetsManager); here that is
  ``Partition.delete_records_before`` on the partitions led here (followers follow the log start offset).
  The topic is ``cleanup.policy=delete`` and never deleted by time (server/broker.py registers it so):
  compaction would keep one update per share partition and lose the others.
- Deleted topics (Kafka's ShareCoordinatorService.onTopicsDeleted): every DELETED_TOPIC_CHECK_MS the
  share partitions coordinated here whose topic ``topic_deleted`` says is gone get a tombstone
  (``ShareStates.tombstones_for_topics``), once the topic was gone at the check before too, so a view
  that lags for a moment deletes nothing. ``topic_deleted`` answers False whenever it cannot be sure.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eoslog.cluster.topics import SHARE_GROUP_STATE
from eoslog.coordinator.runtime import CoordinatorRuntime, Ownership, now_ms
from eoslog.coordinator.share.config import ShareCoordinatorConfig
from eoslog.coordinator.share.log_format import (
    NO_DELIVERY_COMPLETE_COUNT,
    PendingTransaction,
    SharePartitionKey,
    ShareRecord,
    StateBatch,
)
from eoslog.coordinator.share.state import Decision, ShareGroupOffset, ShareStates, TxnMarker
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import ErrorCode
from eoslog.records.batch import decode_batch
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.control import ControlType, parse_control_batch

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition, PartitionAppend
    from eoslog.log.log import Log

log = logging.getLogger(__name__)

# A failed append of a coordinator record, as the writer is told (Kafka's CoordinatorOperationExceptionHelper):
# "not there right now" makes it look the coordinator up again and retry.
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
_OWNERSHIP_ERRORS = {Ownership.LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                     Ownership.NOT_COORDINATOR: ErrorCode.NOT_COORDINATOR}


def write_error_for(exc: BaseException) -> ErrorCode:
    return _WRITE_ERRORS.get(error_code_for(exc), ErrorCode.UNKNOWN_SERVER_ERROR)


@dataclass(frozen=True)
class ShareAnswer:
    """One share partition's answer: the error (NONE) and its message, and for a read or a summary the
    state (start offset, state epoch, batches; leader epoch and delivery complete count for a summary)."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    state: ShareGroupOffset | None = None


_STOPPED = ShareAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the broker is stopping")
DELETED_TOPIC_CHECK_MS = 5_000


class ShareShard:
    def __init__(self, runtime: CoordinatorRuntime, config: ShareCoordinatorConfig,
                 partition_exists: Callable[[uuid.UUID, int], bool] | None = None,
                 topic_deleted: Callable[[uuid.UUID], bool] | None = None) -> None:
        """``partition_exists(topic_id, partition)``: whether that topic partition exists (None: any does);
        ``topic_deleted(topic_id)``: whether that topic is surely gone (None: never)."""
        self.runtime = runtime
        self.config = config
        self._partition_exists = partition_exists
        self._topic_deleted = topic_deleted
        self._gone_at_last_check: set[uuid.UUID] = set()
        self._states: dict[int, ShareStates] = {}
        self._pending: dict[SharePartitionKey, asyncio.Future] = {}  # the record in flight, per share partition
        now = now_ms()
        self._next_cold_snapshot_ms = now + config.cold_partition_snapshot_interval_ms
        self._next_prune_ms = now + config.state_topic_prune_interval_ms
        # no check without a way to tell a topic deleted
        self._next_deleted_check_ms = now + DELETED_TOPIC_CHECK_MS if topic_deleted is not None else None

    def _new_states(self) -> ShareStates:
        return ShareStates(self.config.snapshot_update_records_per_snapshot, self._partition_exists)

    def partition_for(self, key: SharePartitionKey) -> int:
        """The ``__share_group_state`` partition of a share partition (Kafka's hash of its coordinator key)."""
        return partition_for(key.coordinator_key(), self.runtime.partition_count(SHARE_GROUP_STATE))

    def states(self, index: int) -> ShareStates | None:
        """The core of a partition coordinated here (tests and tools read it; nothing may change it)."""
        return self._states.get(index)

    # ---- the runtime's calls ----------------------------------------------------------------------

    def load(self, partitions: dict[int, Partition]) -> None:
        for index, partition in partitions.items():
            states = self._new_states()
            applied = states.load(read_records(partition.log))
            self._states[index] = states
            log.info("share coordinator took over %s-%d (leader epoch %s): %d share partitions from %d records",
                     SHARE_GROUP_STATE, index, partition.leader_epoch, len(states), applied)

    def unload(self, index: int) -> None:
        """Leadership of ``__share_group_state``-``index`` moved away: its writes in flight are answered by
        their append's outcome and no longer applied here."""
        states = self._states.pop(index, None)
        if states is not None:
            log.info("share coordinator gave up %s-%d: %d share partitions now coordinated elsewhere",
                     SHARE_GROUP_STATE, index, len(states))

    def next_deadline_ms(self) -> int | None:
        deadlines = [self._next_cold_snapshot_ms, self._next_prune_ms, self._next_deleted_check_ms]
        return min(d for d in deadlines if d is not None)

    def on_deadline(self, now: int) -> Awaitable[None] | None:
        cold = self._next_cold_snapshot_ms <= now
        prune = self._next_prune_ms <= now
        deleted = self._next_deleted_check_ms is not None and self._next_deleted_check_ms <= now
        if cold:
            self._next_cold_snapshot_ms = now + self.config.cold_partition_snapshot_interval_ms
        if prune:
            self._next_prune_ms = now + self.config.state_topic_prune_interval_ms
        if deleted:
            self._next_deleted_check_ms = now + DELETED_TOPIC_CHECK_MS
        if not (cold or prune or deleted):
            return None
        return self._timed_work(now, cold, prune, deleted)

    async def _timed_work(self, now: int, cold: bool, prune: bool, deleted: bool = False) -> None:
        if deleted:
            await self.tombstone_deleted_topics()
        if cold:
            await self.snapshot_cold_partitions(now)
        if prune:
            self.prune()

    async def stop(self) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_result(_STOPPED)

    # ---- the operations ---------------------------------------------------------------------------

    async def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                               start_offset: int) -> ShareAnswer:
        """InitializeShareGroupState of one share partition."""
        key = SharePartitionKey(group_id, topic_id, partition)
        return await self._operate(key, lambda states: states.initialize(key, state_epoch, start_offset,
                                                                         now_ms=now_ms()))

    async def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *, state_epoch: int,
                          leader_epoch: int, start_offset: int, state_batches: Iterable[StateBatch],
                          delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT,
                          pending_transactions: Iterable[PendingTransaction] = ()) -> ShareAnswer:
        """WriteShareGroupState of one share partition (with its whole pending set, eoslog's tagged field)."""
        key = SharePartitionKey(group_id, topic_id, partition)
        batches = tuple(state_batches)
        pending = tuple(pending_transactions)
        return await self._operate(key, lambda states: states.write(
            key, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            state_batches=batches, delivery_complete_count=delivery_complete_count, now_ms=now_ms(),
            pending_transactions=pending))

    async def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int, *,
                         leader_epoch: int) -> ShareAnswer:
        """ReadShareGroupState of one share partition (a newer leader epoch is made durable first)."""
        key = SharePartitionKey(group_id, topic_id, partition)
        return await self._operate(key, lambda states: states.read(key, leader_epoch, now_ms=now_ms()))

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareAnswer:
        """DeleteShareGroupState of one share partition."""
        key = SharePartitionKey(group_id, topic_id, partition)
        return await self._operate(key, lambda states: states.delete(key))

    async def read_state_summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareAnswer:
        """ReadShareGroupStateSummary of one share partition: what is durable now (it writes nothing, so it
        waits for no write in flight)."""
        key = SharePartitionKey(group_id, topic_id, partition)
        states, refusal = self._owned(self.partition_for(key))
        if refusal is not None:
            return refusal
        decision = states.read_summary(key)
        return ShareAnswer(decision.error, decision.message, decision.state)

    def on_txn_marker(self, index: int, producer_id: int, producer_epoch: int, committed: bool
                      ) -> list[SharePartitionKey]:
        """A COMMIT/ABORT marker is durable in ``__share_group_state``-``index`` (coordinated
        here): the share partitions whose pending acknowledgements it decides, now decided in memory (the
        marker is in the log, so a reload decides them the same way). Their leaders are told by the caller.
        A partition not loaded yet reads the marker with the rest of its log."""
        states = self._states.get(index)
        if states is None:
            return []
        return states.apply_marker(producer_id, producer_epoch, committed)

    # ---- carrying out -----------------------------------------------------------------------------

    async def _operate(self, key: SharePartitionKey, decide: Callable[[ShareStates], Decision]) -> ShareAnswer:
        while (pending := self._pending.get(key)) is not None:
            await asyncio.shield(pending)  # the previous record of this share partition, applied
        index = self.partition_for(key)
        states, refusal = self._owned(index)
        if refusal is not None:
            return refusal
        decision = decide(states)
        answer = ShareAnswer(decision.error, decision.message, decision.state)
        if decision.record is None:
            return answer
        return await asyncio.shield(self._write(index, states, decision.record, answer))

    def _owned(self, index: int) -> tuple[ShareStates, None] | tuple[None, ShareAnswer]:
        ownership = self.runtime.ownership(SHARE_GROUP_STATE, index)
        if ownership is not Ownership.OWNED:
            return None, ShareAnswer(_OWNERSHIP_ERRORS[ownership])
        states = self._states.get(index)
        if states is None:  # a sole broker's partition of the topic it creates empty on first use
            states = self._states[index] = self._new_states()
        return states, None

    def _write(self, index: int, states: ShareStates, record: ShareRecord, answer: ShareAnswer) -> asyncio.Future:
        """Appends ``record``; the future is ``answer`` once it is durable and applied, else the error."""
        key_bytes, value_bytes = record.encode()
        batch = build_batch([SimpleRecord(key_bytes, value_bytes)])
        future = asyncio.get_running_loop().create_future()
        self._pending[record.key] = future

        def durable(exc: BaseException | None, appended: PartitionAppend | None) -> None:
            if self._pending.get(record.key) is future:
                del self._pending[record.key]
            if exc is None:
                if self._states.get(index) is states:  # still coordinated by the load that decided it
                    states.apply(record, appended.first_offset)
                result = answer
            else:
                log.warning("write to %s-%d for %s failed: %s", SHARE_GROUP_STATE, index, record.key, exc)
                result = ShareAnswer(write_error_for(exc), str(exc) or None)
            if not future.done():
                future.set_result(result)

        self.runtime.write(SHARE_GROUP_STATE, index, batch, durable)
        return future

    # ---- timed work -------------------------------------------------------------------------------

    async def snapshot_cold_partitions(self, now: int | None = None) -> int:
        """A new snapshot of every idle share partition coordinated here; how many were made durable."""
        writes = []
        now = now_ms() if now is None else now
        for index, states in list(self._states.items()):
            if self.runtime.ownership(SHARE_GROUP_STATE, index) is not Ownership.OWNED:
                continue
            interval = self.config.cold_partition_snapshot_interval_ms
            for record in states.cold_snapshots(now_ms=now, interval_ms=interval, busy=self._pending.__contains__):
                writes.append(self._write(index, states, record, ShareAnswer()))
        answers = await asyncio.gather(*writes)
        return sum(1 for answer in answers if answer.error is ErrorCode.NONE)

    async def tombstone_deleted_topics(self) -> int:
        """A tombstone for every share partition coordinated here whose topic was deleted (gone at this
        check and the one before); how many were made durable."""
        if self._topic_deleted is None:
            return 0
        gone: set[uuid.UUID] = set()
        writes = []
        for index, states in list(self._states.items()):
            if self.runtime.ownership(SHARE_GROUP_STATE, index) is not Ownership.OWNED:
                continue
            here = {key.topic_id for key in states if self._topic_deleted(key.topic_id)}
            gone |= here
            for record in states.tombstones_for_topics(here & self._gone_at_last_check):
                if record.key not in self._pending:  # else the next check
                    writes.append(self._write(index, states, record, ShareAnswer()))
        self._gone_at_last_check = gone
        answers = await asyncio.gather(*writes)
        if writes:
            log.info("share coordinator: %d share partitions of deleted topics tombstoned", len(writes))
        return sum(1 for answer in answers if answer.error is ErrorCode.NONE)

    def prune(self) -> dict[int, int]:
        """Deletes, from each ``__share_group_state`` partition coordinated here, the records every share
        partition has a newer snapshot of; the new log start offset of each partition pruned."""
        pruned = {}
        for index, states in list(self._states.items()):
            offset = states.last_redundant_offset()
            if offset is None or self.runtime.ownership(SHARE_GROUP_STATE, index) is not Ownership.OWNED:
                continue
            try:
                partition = self.runtime.partition(SHARE_GROUP_STATE, index)
                if offset > partition.log_start_offset:
                    pruned[index] = partition.delete_records_before(offset)
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.warning("could not prune %s-%d below offset %d: %s", SHARE_GROUP_STATE, index, offset, exc)
        return pruned


def read_records(partition_log: Log) -> Iterator[tuple[int, bytes | None, bytes | None] | TxnMarker]:
    """Every record of a ``__share_group_state`` partition from its log start, oldest first, as
    (offset, key, value), and every transaction marker as a :class:`TxnMarker`: the share coordinator writes
    no transactions, but a transaction that acknowledged share records registered this partition, and its
    marker decides them (docs/share-groups.md, "Step 6")."""
    for data, header in partition_log.read_batches():
        if header.is_control:
            if header.last_offset >= partition_log.log_start_offset:
                marker = parse_control_batch(decode_batch(data, header.position))
                if marker.control_type in (ControlType.COMMIT, ControlType.ABORT):
                    yield TxnMarker(header.last_offset, header.producer_id, header.producer_epoch,
                                    marker.control_type is ControlType.COMMIT)
            continue
        for record in decode_batch(data, header.position).absolute_records():
            if record.offset >= partition_log.log_start_offset:
                yield record.offset, record.key, record.value
