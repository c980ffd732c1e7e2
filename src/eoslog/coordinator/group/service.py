"""The group coordinator's I/O shell: runs :class:`GroupCoordinator` on the broker's event loop.

Contract
- Owns the one ``GroupCoordinator`` of the broker, the futures of its pending calls, its timers, and
  the order in which its writes reach ``__consumer_offsets``. Only the broker's event loop calls it.
- prepare -> log -> apply: every ``Write`` the core returns is appended at once (one batch, in the
  order returned) and reported back with ``complete_write`` only when the partition's high watermark
  has passed it, i.e. after the group-commit fsync. Reports go out per partition in append order (one
  drain task per partition), because the core applies them in that order.
- Loading happens in :meth:`start`, synchronously, before the listener accepts connections and before
  the transaction coordinator's recovery writes any marker, so no group is ever served half-loaded.
- The transaction coordinator calls :meth:`on_txn_marker` once a COMMIT/ABORT marker on a
  ``__consumer_offsets`` partition is durable; the producer's pending offsets there are then published
  or dropped.
- API handlers call :meth:`call`; it returns the response, or an awaitable of it when the core answers
  later (a JoinGroup waiting for the barrier, a commit waiting for its fsync).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from eoslog.api.errors import error_code_for
from eoslog.cluster.topics import CONSUMER_OFFSETS
from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.coordinator import GroupCoordinator
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.log_format import LogEntry, Marker
from eoslog.coordinator.group.results import Result, Write
from eoslog.protocol.errors import ErrorCode
from eoslog.records.batch import iter_batches
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.control import parse_control_batch

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition
    from eoslog.server.broker import Broker

log = logging.getLogger(__name__)

LOAD_CHUNK = 8 * 1024 * 1024
# What a failed append to __consumer_offsets means to a group client (Kafka's GroupMetadataManager
# mapping): "the coordinator is not there right now" makes the client look it up again and retry.
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: Errors.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: Errors.INVALID_COMMIT_OFFSET_SIZE,
}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def write_error_for(exc: BaseException) -> Errors:
    """The group error a failed append or fsync of a coordinator write is reported with."""
    return _WRITE_ERRORS.get(error_code_for(exc), Errors.UNKNOWN_SERVER_ERROR)


class _Appended(NamedTuple):
    write_id: int
    first_offset: int
    end_offset: int  # the high watermark that makes the write durable
    error: Errors | None


class GroupService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.registry = broker.registry  # topics and partitions (cluster/registry.py)
        config = broker.config
        info = broker.registry.topics.get(CONSUMER_OFFSETS) if broker.registry.topics is not None else None
        # The group -> partition hash must use the topic's real size, whatever the config says now.
        num_partitions = info.partitions if info is not None else config.offsets_topic_num_partitions
        self.coordinator = GroupCoordinator(GroupConfig(
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            offsets_retention_ms=config.offsets_retention_minutes * 60_000,
            offsets_topic_num_partitions=num_partitions,
            consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            consumer_assignors=config.group_consumer_assignors,
        ), elected=self._elected_here)
        self._futures: dict[int, asyncio.Future] = {}
        self._queues: dict[int, deque[_Appended]] = {}
        self._drainers: dict[int, asyncio.Task] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms: int | None = None
        self._retention_task: asyncio.Task | None = None
        self._stopping = False

    # ---- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Loads every ``__consumer_offsets`` partition (without yielding to the loop) and registers
        for transaction markers."""
        started = time.monotonic()
        if self.registry.topics.get(CONSUMER_OFFSETS) is not None:
            for index in self.registry.coordinator_partitions(
                    CONSUMER_OFFSETS, self.coordinator.config.offsets_topic_num_partitions):
                self.load_partition(index)
        txn = getattr(self.broker, "transaction_coordinator", None)
        if txn is not None:
            txn.offsets_marker_listeners.append(self.on_txn_marker)
        self._retention_task = asyncio.get_running_loop().create_task(self._retention_loop())
        self._schedule()
        groups = len(self.coordinator.groups)
        if groups:
            log.info("group coordinator loaded %d groups in %.0f ms", groups, (time.monotonic() - started) * 1000)

    async def stop(self) -> None:
        self._stopping = True
        if self._timer is not None:
            self._timer.cancel()
        tasks = [t for t in [self._retention_task, *self._drainers.values()] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
        for future in self._futures.values():
            if not future.done():
                future.cancel()
        self._futures.clear()

    def unload_partition(self, index: int) -> None:
        """Leadership of ``__consumer_offsets``-``index`` moved away (cluster mode)."""
        groups = self.coordinator.groups_in(index)
        result = self.coordinator.unload_partition(index)
        log.info("group coordinator gave up %s-%d: %d groups now coordinated elsewhere, %d waiting calls "
                 "answered NOT_COORDINATOR", CONSUMER_OFFSETS, index, groups, len(result.completed))
        self._process(result)

    def _elected_here(self, index: int) -> bool:
        """The cluster view names this broker leader of ``__consumer_offsets``-``index``."""
        cluster = self.registry.cluster
        state = cluster.view.states.get((CONSUMER_OFFSETS, index)) if cluster is not None else None
        return state is not None and state.leader == self.broker.config.node_id

    def load_partition(self, index: int) -> None:
        """This broker leads ``__consumer_offsets``-``index`` (at start-up, or from now on)."""
        partition = self.registry.partition(CONSUMER_OFFSETS, index)
        if self.coordinator.is_loaded(index):
            # A new leader epoch of a partition this broker never stopped leading (in ZooKeeper mode an
            # ISR change bumps it). The groups in memory are newer than the log: joins waiting for the
            # rebalance, members' session deadlines. Reading them again from the log would drop the
            # waiting JoinGroup responses, and their clients would wait out their request timeouts
            # (minutes). Kafka keeps its cached groups too.
            log.info("group coordinator keeps %s-%d: led here without interruption, now in leader epoch %s",
                     CONSUMER_OFFSETS, index, partition.leader_epoch)
            return
        started = time.monotonic()
        self.coordinator.begin_loading(index)
        self.coordinator.load_partition(index, read_entries(partition), now_ms=now_ms())
        if partition.leader_epoch is not None:  # a cluster's takeover (start-up logs its own line)
            log.info("group coordinator took over %s-%d (leader epoch %s): %d groups in %.0f ms", CONSUMER_OFFSETS,
                     index, partition.leader_epoch, self.coordinator.groups_in(index),
                     (time.monotonic() - started) * 1000)

    # ---- calls from the API handlers --------------------------------------------------------------

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Runs ``GroupCoordinator.<method>(*args, now_ms=now, **kwargs)``: the response, or a future."""
        result: Result = getattr(self.coordinator, method)(*args, now_ms=now_ms(), **kwargs)
        future = None
        if result.pending is not None:
            future = asyncio.get_running_loop().create_future()
            self._futures[result.pending.token] = future
        self._process(result)
        return result.response if future is None else future

    def fetch_offsets(self, group_id: str, topic_partitions=None, *, require_stable: bool = False,
                      member_id: str | None = None, member_epoch: int = -1) -> Any:
        """OffsetFetch (no clock, no writes)."""
        return self.coordinator.fetch_offsets(group_id, topic_partitions, require_stable=require_stable,
                                              member_id=member_id, member_epoch=member_epoch).response

    def on_txn_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` is durable on ``__consumer_offsets``-``partition``."""
        self._process(self.coordinator.complete_txn(producer_id, committed, partitions=(partition,),
                                                    now_ms=now_ms()))

    # ---- results ----------------------------------------------------------------------------------

    def _process(self, result: Result) -> None:
        for completion in result.completed:
            future = self._futures.pop(completion.token, None)
            if future is not None and not future.done():
                future.set_result(completion.response)
        for write in result.writes:
            self._append(write)
        self._schedule()

    def _append(self, write: Write) -> None:
        try:
            partition = self._offsets_partition(write.partition)
            batch = build_batch(
                [SimpleRecord(key, value) for key, value in write.records],
                producer_id=write.producer_id, producer_epoch=write.producer_epoch,
                # Like Kafka, a coordinator's transactional batch has sequence 0: the coordinator origin
                # skips sequence checks, only the epoch is validated.
                base_sequence=0 if write.is_transactional else -1,
                is_transactional=write.is_transactional)
            appended = partition.append_internal(batch)
            entry = _Appended(write.write_id, appended.first_offset, appended.last_offset + 1, None)
        except Exception as exc:  # noqa: BLE001 - reported to the core, which answers the waiting calls
            log.warning("write to %s-%d failed: %s", CONSUMER_OFFSETS, write.partition, exc)
            entry = _Appended(write.write_id, -1, -1, write_error_for(exc))
        self._queues.setdefault(write.partition, deque()).append(entry)
        if write.partition not in self._drainers:
            self._drainers[write.partition] = asyncio.get_running_loop().create_task(self._drain(write.partition))

    def _offsets_partition(self, index: int) -> Partition:
        partition = self.registry.partitions.get((CONSUMER_OFFSETS, index))
        if partition is None:
            self.registry.ensure_internal_topic(CONSUMER_OFFSETS)  # created on first use, as in Kafka
            partition = self.registry.partition(CONSUMER_OFFSETS, index)
        return partition

    async def _drain(self, index: int) -> None:
        """Reports the writes of one partition to the core, in append order, once each is durable."""
        queue = self._queues[index]
        try:
            while queue:
                appended = queue[0]
                error = appended.error
                if error is None:
                    try:
                        partition = self.registry.partition(CONSUMER_OFFSETS, index)
                        await partition.wait_for_high_watermark(appended.end_offset)
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:  # noqa: BLE001 - an fsync failure fails the write
                        error = write_error_for(exc)
                queue.popleft()
                self._process(self.coordinator.complete_write(
                    appended.write_id, now_ms=now_ms(), error=error, log_offset=appended.first_offset))
        finally:
            del self._drainers[index]

    # ---- time -------------------------------------------------------------------------------------

    def _schedule(self) -> None:
        """Arms the timer for the core's next deadline, if earlier than the armed one. A deadline that
        moved later (a heartbeat) just makes the timer fire early and re-arm."""
        if self._stopping:
            return
        deadline = self.coordinator.next_deadline()
        if deadline is None or (self._timer_at_ms is not None and self._timer_at_ms <= deadline):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at_ms = deadline
        delay = max(0.001, (deadline - now_ms()) / 1000)  # never spin on a deadline just passed
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at_ms = None
        try:
            self._process(self.coordinator.tick(now_ms()))
        except Exception:
            log.exception("group coordinator tick failed")
            self._schedule()

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.broker.config.offsets_retention_check_interval_ms / 1000)
            try:
                self._process(self.coordinator.expire_offsets(now_ms()))
            except Exception:
                log.exception("offset expiry failed")


def read_entries(partition: Partition) -> Iterator[LogEntry]:
    """Every record (and every marker) of a ``__consumer_offsets`` partition, oldest first."""
    partition_log = partition.log
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        result = partition_log.read(offset, LOAD_CHUNK, min_one_batch=True)
        if not result.regions:
            return
        data = b"".join(os.pread(r.fd, r.length, r.position) for r in result.regions)
        for batch in iter_batches(data):
            header = batch.header
            if header.next_offset <= offset:
                continue
            offset = header.next_offset
            if header.is_control:
                marker = parse_control_batch(batch)
                yield LogEntry(header.last_offset, None, None, header.producer_id, True,
                               Marker(int(marker.control_type)))
                continue
            for record in batch.absolute_records():
                if record.offset < partition_log.log_start_offset:
                    continue
                yield LogEntry(record.offset, record.key, record.value, header.producer_id,
                               header.is_transactional)
