"""The group coordinator's shard: runs :class:`GroupCoordinator` (the pure core) on the coordinator
runtime, over ``__consumer_offsets``.

Contract
- Owns the one ``GroupCoordinator`` of the broker and the futures of its pending calls. The runtime
  (coordinator/runtime.py) owns which ``__consumer_offsets`` partitions are served here, when they load
  and unload, the order of the writes and the timer. Only the broker's event loop calls it.
- prepare -> log -> apply: every ``Write`` the core returns is appended at once (one batch, in the
  order returned) and reported back with ``complete_write`` only when the partition's high watermark
  has passed it, i.e. after the group-commit fsync; the runtime reports a partition's writes in append
  order, because the core applies them in that order.
- The transaction marker channel (coordinator/transaction/markers.py, wired by server/broker.py) calls
  :meth:`on_txn_marker` once a COMMIT/ABORT marker on a ``__consumer_offsets`` partition is durable;
  the producer's pending offsets there are then published or dropped. A marker on a partition not
  loaded yet is read with the rest of its log when it loads.
- API handlers call :meth:`call`; it returns the response, or an awaitable of it when the core answers
  later (a JoinGroup waiting for the barrier, a commit waiting for its fsync).
- Share groups (KIP-932) need the share coordinator, reached through a ``Persister``
  (coordinator/share/persister.py): the initializations a heartbeat plans run once its records are
  durable, in tasks of their own (the heartbeat is answered without waiting, as Kafka's is), and report
  back with ``share_group_initialized``; :meth:`delete_groups` deletes a share group's share-partition
  state before its records. Without a persister, share partitions are assigned without state (unit tests).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from eoslog.cluster.topics import CONSUMER_OFFSETS
from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.coordinator import GroupCoordinator
from eoslog.coordinator.group.dynamic_configs import ShareLimits
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.log_format import LogEntry, Marker
from eoslog.coordinator.group.results import DeletedGroup, DeleteGroupsResponse, Result, Write
from eoslog.coordinator.group.share_initialization import ShareInitialization
from eoslog.coordinator.runtime import CoordinatorRuntime, Ownership, now_ms
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import ErrorCode
from eoslog.records.batch import decode_batch
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.control import parse_control_batch

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition, PartitionAppend
    from eoslog.coordinator.share.persister import Persister
    from eoslog.log.log import Log

log = logging.getLogger(__name__)

# What a failed append to __consumer_offsets means to a group client (Kafka's GroupMetadataManager
# mapping): "the coordinator is not there right now" makes the client look it up again and retry.
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: Errors.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: Errors.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: Errors.INVALID_COMMIT_OFFSET_SIZE,
}


_GROUP_ERRORS = {ownership: Errors[ownership.value] for ownership in Ownership}


def write_error_for(exc: BaseException) -> Errors:
    """The group error a failed append or fsync of a coordinator write is reported with."""
    return _WRITE_ERRORS.get(error_code_for(exc), Errors.UNKNOWN_SERVER_ERROR)


DELETED_TOPIC_CHECK_MS = 5_000  # as the share coordinator's (coordinator/share/shard.py)


class GroupShard:
    def __init__(self, runtime: CoordinatorRuntime, config: GroupConfig, persister: Persister | None = None,
                 group_configs: Callable[[str], Any] | None = None, share_limits: ShareLimits | None = None,
                 topic_deleted: Callable[[Any], bool] | None = None) -> None:
        """``group_configs(group_id)``: a group's own configs; ``share_limits``: the broker's share-group
        settings the group configs are checked against (dynamic_configs.py); ``topic_deleted(topic_id)``:
        whether that topic is surely gone (None: never), checked every DELETED_TOPIC_CHECK_MS for the
        topics share groups hold (a topic gone at two checks in a row leaves them, Kafka's
        maybeCleanupShareGroupState)."""
        self.runtime = runtime
        self.share_limits = share_limits or ShareLimits()
        # The group -> partition hash must use the topic's real size, whatever the config says now.
        config = replace(config, offsets_topic_num_partitions=runtime.partition_count(CONSUMER_OFFSETS))
        self.persister = persister
        self.core = GroupCoordinator(config, ownership=self._ownership, share_state=persister is not None,
                                     group_configs=group_configs)
        self._futures: dict[int, asyncio.Future] = {}
        self._tasks: set[asyncio.Task] = set()
        # Told of share group members leaving or removed (``member_left(group_id, member_id)``: the
        # share-partition manager gives back their records) and of deleted share groups
        # (``group_deleted(group_id)``); added by the broker.
        self.share_listeners: list[Any] = []
        self._next_retention_ms = now_ms() + config.offsets_retention_check_interval_ms
        self._topic_deleted = topic_deleted
        self._gone_at_last_check: set = set()
        self._next_deleted_check_ms = now_ms() + DELETED_TOPIC_CHECK_MS if topic_deleted is not None else None

    def _ownership(self, index: int) -> Errors:
        return _GROUP_ERRORS[self.runtime.ownership(CONSUMER_OFFSETS, index)]

    # ---- the runtime's calls ----------------------------------------------------------------------

    def load(self, partitions: dict[int, Partition]) -> None:
        for index, partition in partitions.items():
            self.core.load_partition(index, read_entries(partition.log), now_ms=now_ms())
            log.info("group coordinator took over %s-%d (leader epoch %s): %d groups", CONSUMER_OFFSETS, index,
                     partition.leader_epoch, self.core.groups_in(index))

    def unload(self, index: int) -> None:
        """Leadership of ``__consumer_offsets``-``index`` moved away (cluster mode)."""
        groups = self.core.groups_in(index)
        result = self.core.unload_partition(index)
        log.info("group coordinator gave up %s-%d: %d groups now coordinated elsewhere, %d waiting calls "
                 "answered NOT_COORDINATOR", CONSUMER_OFFSETS, index, groups, len(result.completed))
        self._process(result)

    def next_deadline_ms(self) -> int | None:
        deadlines = [self.core.next_deadline(), self._next_retention_ms, self._next_deleted_check_ms]
        return min(d for d in deadlines if d is not None)

    def on_deadline(self, now: int) -> None:
        deadline = self.core.next_deadline()
        if deadline is not None and deadline <= now:
            self._process(self.core.tick(now))
        if self._next_retention_ms <= now:
            self._next_retention_ms = now + self.core.config.offsets_retention_check_interval_ms
            self._process(self.core.expire_offsets(now))
        if self._next_deleted_check_ms is not None and self._next_deleted_check_ms <= now:
            self._next_deleted_check_ms = now + DELETED_TOPIC_CHECK_MS
            gone = {t for t in self.core.share_group_topic_ids() if self._topic_deleted(t)}
            confirmed, self._gone_at_last_check = gone & self._gone_at_last_check, gone
            if confirmed:
                self._process(self.core.share_topics_deleted(confirmed, now_ms=now))

    async def stop(self) -> None:
        for future in self._futures.values():
            if not future.done():
                future.cancel()
        self._futures.clear()
        for task in list(self._tasks):
            task.cancel()

    # ---- calls from the API handlers --------------------------------------------------------------

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Runs ``GroupCoordinator.<method>(*args, now_ms=now, **kwargs)``: the response, or a future."""
        result: Result = getattr(self.core, method)(*args, now_ms=now_ms(), **kwargs)
        future = None
        if result.pending is not None:
            future = asyncio.get_running_loop().create_future()
            self._futures[result.pending.token] = future
        self._process(result)
        return result.response if future is None else future

    def fetch_offsets(self, group_id: str, topic_partitions=None, *, require_stable: bool = False,
                      member_id: str | None = None, member_epoch: int = -1) -> Any:
        """OffsetFetch (no clock, no writes)."""
        return self.core.fetch_offsets(group_id, topic_partitions, require_stable=require_stable,
                                       member_id=member_id, member_epoch=member_epoch).response

    async def delete_groups(self, group_ids: list[str]) -> Any:
        """DeleteGroups. An Empty share group's share-partition state is deleted at the share coordinator
        first (Kafka's DeleteShareGroupState before the group's tombstones); a group whose state could not
        be deleted answers that error and keeps its records, so a retry finds them."""
        refused: dict[str, Errors] = {}
        if self.persister is not None:
            for group_id in dict.fromkeys(group_ids):
                partitions = self.core.share_group_state_partitions(group_id)
                if partitions:
                    error = await self._delete_share_state(group_id, partitions)
                    if error is not Errors.NONE:
                        refused[group_id] = error
        wanted = [g for g in group_ids if g not in refused]
        answer = await _resolve(self.call("delete_groups", wanted)) if wanted else DeleteGroupsResponse(())
        by_id = {g.group_id: g for g in answer.groups}
        for group_id, deleted in by_id.items():
            if deleted.error is Errors.NONE:
                for listener in self.share_listeners:
                    listener.group_deleted(group_id)
        return DeleteGroupsResponse(tuple(
            by_id.get(g) or DeletedGroup(g, refused[g]) for g in dict.fromkeys(group_ids)))

    async def _delete_share_state(self, group_id: str, partitions: dict) -> Errors:
        answers = await asyncio.gather(*(
            self.persister.delete_state(group_id, topic_id, p)
            for topic_id, ps in partitions.items() for p in sorted(ps)))
        for answer in answers:
            if answer.error is not ErrorCode.NONE:
                log.warning("could not delete the share state of group %r: %s", group_id, answer.error.name)
                return Errors[answer.error.name] if answer.error.name in Errors.__members__ \
                    else Errors.COORDINATOR_NOT_AVAILABLE
        return Errors.NONE

    async def alter_share_group_offsets(self, group_id: str, offsets: dict) -> Any:
        """AlterShareGroupOffsets (share_offset_apis.py): the group coordinator's records, then the share
        coordinator's InitializeShareGroupState of each partition at its new start offset, then the outcome
        back to the group. Answers the accepted change and each partition's error code."""
        change = await _resolve(self.call("alter_share_group_offsets", group_id, offsets))
        if change.error is not Errors.NONE or self.persister is None:
            return change, {}
        calls = [(t, p, start) for t, starts in change.partitions.items() for p, start in sorted(starts.items())]
        answers = await asyncio.gather(*(
            self.persister.initialize_state(group_id, t, p, state_epoch=change.state_epoch, start_offset=start)
            for t, p, start in calls), return_exceptions=True)
        errors = {(t, p): _answer_error(answer) for (t, p, _), answer in zip(calls, answers)}
        succeeded: dict = {}
        failed: dict = {}
        for (t, p), error in errors.items():
            (succeeded if error is ErrorCode.NONE else failed).setdefault(t, set()).add(p)
        self.call("share_group_initialized", group_id, succeeded, failed, {t: name for t, (name, _) in offsets.items()})
        self._share_state_replaced(group_id)
        return change, errors

    async def delete_share_group_offsets(self, group_id: str, topics: dict) -> Any:
        """DeleteShareGroupOffsets (share_offset_apis.py): the topics move to ``deleting``, the share
        coordinator deletes their partitions' state, the topics deleted leave ``deleting``. Answers the
        accepted change and each topic's error code."""
        change = await _resolve(self.call("delete_share_group_offsets", group_id, topics))
        if change.error is not Errors.NONE or self.persister is None:
            return change, {}
        calls = [(t, p) for t, ps in change.partitions.items() for p in sorted(ps)]
        answers = await asyncio.gather(*(self.persister.delete_state(group_id, t, p) for t, p in calls),
                                       return_exceptions=True)
        errors = dict.fromkeys(change.partitions, ErrorCode.NONE)
        for (t, _), answer in zip(calls, answers):
            error = _answer_error(answer)
            if error is not ErrorCode.NONE and errors[t] is ErrorCode.NONE:
                errors[t] = error
        deleted = [t for t, error in errors.items() if error is ErrorCode.NONE]
        if deleted:
            await _resolve(self.call("share_group_offsets_deleted", group_id, deleted))
        self._share_state_replaced(group_id)
        return change, errors

    def _share_state_replaced(self, group_id: str) -> None:
        """The share coordinator's state of the group changed under its share-partition leaders: what they
        hold of it is read again (the group has no members, so nothing is acquired)."""
        for listener in self.share_listeners:
            listener.group_deleted(group_id)

    def on_txn_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` is durable on ``__consumer_offsets``-``partition``."""
        self._process(self.core.complete_txn(producer_id, committed, partitions=(partition,), now_ms=now_ms()))

    # ---- results ----------------------------------------------------------------------------------

    def _process(self, result: Result) -> None:
        for completion in result.completed:
            future = self._futures.pop(completion.token, None)
            if future is not None and not future.done():
                future.set_result(completion.response)
        for write in result.writes:
            self._append(write)
        self.runtime.schedule(CONSUMER_OFFSETS)
        departed, self.core.share.departed = self.core.share.departed, []
        for group_id, member_id in departed:
            for listener in self.share_listeners:
                listener.member_left(group_id, member_id)
        if self.core.share_initializations:
            initializations, self.core.share_initializations = self.core.share_initializations, []
            for initialization in initializations:
                if self.persister is not None:
                    self._spawn(self._initialize_share_state(initialization))

    def _spawn(self, work) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _initialize_share_state(self, initialization: ShareInitialization) -> None:
        """InitializeShareGroupState of every partition planned, then the outcome to the core (Kafka's
        persisterInitialize, run off the heartbeat's path)."""
        calls = [(item.topic_id, p, item.start_offset) for item in initialization.items for p in sorted(item.partitions)]
        answers = await asyncio.gather(*(
            self.persister.initialize_state(initialization.group_id, topic_id, p,
                                            state_epoch=initialization.state_epoch, start_offset=start)
            for topic_id, p, start in calls), return_exceptions=True)
        succeeded: dict = {}
        failed: dict = {}
        for (topic_id, p, _), answer in zip(calls, answers):
            ok = not isinstance(answer, BaseException) and answer.error is ErrorCode.NONE
            if not ok:
                log.warning("could not initialize the share state of %s %s-%d: %s", initialization.group_id,
                            topic_id, p, answer if isinstance(answer, BaseException) else answer.error.name)
            (succeeded if ok else failed).setdefault(topic_id, set()).add(p)
        names = {item.topic_id: item.topic_name for item in initialization.items}
        self.call("share_group_initialized", initialization.group_id, succeeded, failed, names)

    def _append(self, write: Write) -> None:
        batch = build_batch(
            [SimpleRecord(key, value) for key, value in write.records],
            producer_id=write.producer_id, producer_epoch=write.producer_epoch,
            # Like Kafka, a coordinator's transactional batch has sequence 0: the coordinator origin
            # skips sequence checks, only the epoch is validated.
            base_sequence=0 if write.is_transactional else -1,
            is_transactional=write.is_transactional)

        def durable(exc: BaseException | None, appended: PartitionAppend | None, write_id: int = write.write_id) -> None:
            if exc is not None:
                log.warning("write to %s-%d failed: %s", CONSUMER_OFFSETS, write.partition, exc)
            self._process(self.core.complete_write(
                write_id, now_ms=now_ms(), error=None if exc is None else write_error_for(exc),
                log_offset=appended.first_offset if appended is not None else -1))

        self.runtime.write(CONSUMER_OFFSETS, write.partition, batch, durable)


def _answer_error(answer: Any) -> ErrorCode:
    if isinstance(answer, BaseException):
        log.warning("share coordinator call failed: %s", answer)
        return error_code_for(answer)
    return answer.error


async def _resolve(answer: Any) -> Any:
    return await answer if isinstance(answer, asyncio.Future) else answer


def read_entries(partition_log: Log) -> Iterator[LogEntry]:
    """Every record (and every marker) of a ``__consumer_offsets`` partition, oldest first."""
    for data, header in partition_log.read_batches():
        if header.is_control:
            batch = decode_batch(data, header.position)
            marker = parse_control_batch(batch)
            yield LogEntry(header.last_offset, None, None, header.producer_id, True, Marker(int(marker.control_type)))
            continue
        for record in decode_batch(data, header.position).absolute_records():
            if record.offset < partition_log.log_start_offset:
                continue
            yield LogEntry(record.offset, record.key, record.value, header.producer_id, header.is_transactional)
