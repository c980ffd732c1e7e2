"""ShareFetch and ShareAcknowledge as the share-partition manager carries them out (Kafka's
SharePartitionManager.fetchMessages / acknowledge / newContext and DelayedShareFetch), without the wire:
the handlers (api/share_fetch.py, api/share_acknowledge.py) turn requests into these calls and the
answers into responses.

Order within one request, as Kafka's:
1. the share session check (share/sessions.py): epochs, the partition set, the session limit; a refusal
   answers the whole request and changes nothing;
2. the acknowledgements, each partition's batches as one unit (its AcknowledgeErrorCode);
3. a final epoch (-1) gives back what the member holds in the closed session's partitions, and fetches
   nothing; so does a request that only renews locks (IsRenewAck, KIP-1222);
4. otherwise records are acquired from the session's partitions, in a rotating order so that no partition
   starves, within MaxRecords and MaxBytes for the whole request (the first batch is sent whole even past
   MaxBytes, KIP-74); with nothing to hand out, the request waits up to MaxWaitMs for new records (the
   partition's high watermark or last stable offset moving) or for records coming back (released, or
   their lock run out), and looks again.

Where eoslog differs: MinBytes is met by any acquired record (Kafka waits for MinBytes of records before
acquiring them; acquiring early and holding them would lock records nobody is sent). Unknown members are
not refused here: the group coordinator fences members, and a share session belongs to its connection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from eoslog.coordinator.share.log_format import SharePartitionKey
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import ErrorCode
from eoslog.share.errors import ShareError
from eoslog.share.in_flight import AcknowledgementBatch, OffsetRange
from eoslog.share.log_reads import regions_for
from eoslog.share.partition_state import AcquireMode
from eoslog.share.record_state import AcknowledgeType
from eoslog.share.state_errors import ShareStateUnavailable

if TYPE_CHECKING:
    from eoslog.share.manager import SharePartitionManager

log = logging.getLogger(__name__)

TopicIdPartition = tuple[uuid.UUID, int]
_SESSION_MESSAGES = {
    ShareError.SHARE_SESSION_NOT_FOUND: "no share session is open for this member",
    ShareError.INVALID_SHARE_SESSION_EPOCH: "the share session epoch is not the one expected",
    ShareError.SHARE_SESSION_LIMIT_REACHED: "group.share.max.share.sessions share sessions are open",
    ShareError.INVALID_REQUEST: "a request opening a share session (epoch 0) cannot acknowledge",
}


class PartitionAsk(NamedTuple):
    """One partition of a request: its acknowledgements, and a refusal the handler already found
    (unknown topic id, not authorized) or NONE."""

    topic_id: uuid.UUID
    partition: int
    acknowledgements: tuple[AcknowledgementBatch, ...] = ()
    error: ErrorCode = ErrorCode.NONE
    acknowledge_error: ErrorCode = ErrorCode.NONE  # the acknowledgements refused as a whole (RENEW misused)


@dataclass
class PartitionAnswer:
    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    acknowledge_error: ErrorCode | None = None  # None: the request did not acknowledge in this partition
    acknowledge_message: str | None = None
    records: list = field(default_factory=list)  # FileRegions of the batches holding the acquired records
    acquired: tuple = ()  # AcquiredRecords


@dataclass
class ShareAnswer:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    partitions: list[PartitionAnswer] = field(default_factory=list)
    lock_duration_ms: int = 0


@dataclass(frozen=True)
class FetchLimits:
    max_wait_ms: int
    max_bytes: int
    max_records: int
    batch_size: int
    mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED


_rotation = itertools.count()


async def share_fetch(manager: SharePartitionManager, group_id: str, member_id: str, epoch: int,
                      asks: Sequence[PartitionAsk], forgotten: Sequence[TopicIdPartition], limits: FetchLimits, *,
                      renew_only: bool, connection_id: str) -> ShareAnswer:
    with manager.activity.request(group_id, member_id):  # before the session check: a leave waits for it
        return await _share_fetch(manager, group_id, member_id, epoch, asks, forgotten, limits,
                                  renew_only=renew_only, connection_id=connection_id)


async def _share_fetch(manager: SharePartitionManager, group_id: str, member_id: str, epoch: int,
                       asks: Sequence[PartitionAsk], forgotten: Sequence[TopicIdPartition], limits: FetchLimits, *,
                       renew_only: bool, connection_id: str) -> ShareAnswer:
    acknowledges = any(ask.acknowledgements for ask in asks)
    update = manager.sessions.share_fetch(group_id, member_id, epoch, [(a.topic_id, a.partition) for a in asks],
                                          forgotten, acknowledges=acknowledges, connection_id=connection_id)
    answer = ShareAnswer(lock_duration_ms=manager.settings(group_id).record_lock_duration_ms)
    if update.error is not ShareError.NONE:
        answer.error, answer.error_message = ErrorCode[update.error.value], _SESSION_MESSAGES.get(update.error)
        return answer
    answers: dict[TopicIdPartition, PartitionAnswer] = {}
    await _acknowledge_all(manager, group_id, member_id, asks, answers)
    if update.final:
        await asyncio.gather(*manager.session_released(group_id, member_id, update.release))
    elif not renew_only:
        refused = {(a.topic_id, a.partition) for a in asks if a.error is not ErrorCode.NONE}
        await _fetch(manager, group_id, member_id, update.fetch, refused, limits, answers)
    answer.partitions = list(answers.values())
    return answer


async def share_acknowledge(manager: SharePartitionManager, group_id: str, member_id: str, epoch: int,
                            asks: Sequence[PartitionAsk]) -> ShareAnswer:
    with manager.activity.request(group_id, member_id):  # before the session check: a leave waits for it
        return await _share_acknowledge(manager, group_id, member_id, epoch, asks)


async def _share_acknowledge(manager: SharePartitionManager, group_id: str, member_id: str, epoch: int,
                             asks: Sequence[PartitionAsk]) -> ShareAnswer:
    update = manager.sessions.share_acknowledge(group_id, member_id, epoch)
    answer = ShareAnswer(lock_duration_ms=manager.settings(group_id).record_lock_duration_ms)
    if update.error is not ShareError.NONE:
        answer.error, answer.error_message = ErrorCode[update.error.value], _SESSION_MESSAGES.get(update.error)
        return answer
    answers: dict[TopicIdPartition, PartitionAnswer] = {}
    await _acknowledge_all(manager, group_id, member_id, asks, answers, every=True)
    if update.final:
        await asyncio.gather(*manager.session_released(group_id, member_id, update.release))
    answer.partitions = list(answers.values())
    return answer


async def _acknowledge_all(manager: SharePartitionManager, group_id: str, member_id: str,
                           asks: Sequence[PartitionAsk], answers: dict[TopicIdPartition, PartitionAnswer],
                           every: bool = False) -> None:
    """Each partition's acknowledgements, partitions side by side (``every``: answer the partitions that
    acknowledge nothing too, as ShareAcknowledge does)."""
    work = []
    for ask in asks:
        if not ask.acknowledgements and not every and ask.error is ErrorCode.NONE:
            continue
        entry = answers.setdefault((ask.topic_id, ask.partition), PartitionAnswer(ask.topic_id, ask.partition))
        if ask.error is not ErrorCode.NONE:
            entry.error = ask.error
            entry.acknowledge_error = ask.error if ask.acknowledgements else None
            continue
        if not ask.acknowledgements or ask.acknowledge_error is not ErrorCode.NONE:
            entry.acknowledge_error = ask.acknowledge_error
            continue
        topic = manager.topic_name(ask.topic_id)
        if topic is None:
            entry.acknowledge_error = ErrorCode.UNKNOWN_TOPIC_ID
            continue
        key = SharePartitionKey(group_id, ask.topic_id, ask.partition)
        work.append((entry, manager.acknowledge(key, topic, member_id, ask.acknowledgements)))
    results = await asyncio.gather(*(call for _, call in work))
    for (entry, _), (error, message) in zip(work, results):
        entry.acknowledge_error, entry.acknowledge_message = error, message


async def _fetch(manager: SharePartitionManager, group_id: str, member_id: str, session: Sequence[TopicIdPartition],
                 refused: set[TopicIdPartition], limits: FetchLimits,
                 answers: dict[TopicIdPartition, PartitionAnswer]) -> None:
    if not session:
        return
    start = next(_rotation) % len(session)
    order = [tp for tp in (*session[start:], *session[:start]) if tp not in refused]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(limits.max_wait_ms, 0) / 1000
    while True:
        got, failed = await _acquire_once(manager, group_id, member_id, order, limits, answers)
        if got or failed or loop.time() >= deadline:
            return
        waiter = loop.create_future()
        watched = _watch(manager, group_id, order, waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), max(deadline - loop.time(), 0))
        except TimeoutError:
            pass
        finally:
            for unwatch in watched:
                unwatch()


async def _acquire_once(manager: SharePartitionManager, group_id: str, member_id: str,
                        order: Sequence[TopicIdPartition], limits: FetchLimits,
                        answers: dict[TopicIdPartition, PartitionAnswer]) -> tuple[bool, bool]:
    """One pass over the partitions; whether records were acquired, and whether a partition failed."""
    records_left = limits.max_records
    bytes_left = limits.max_bytes if limits.max_bytes > 0 else 0x7FFFFFFF
    got = failed = False
    for topic_id, index in order:
        if records_left <= 0 or bytes_left <= 0:
            break
        topic = manager.topic_name(topic_id)
        if topic is None:
            _answer(answers, topic_id, index).error = ErrorCode.UNKNOWN_TOPIC_ID
            failed = True
            continue
        key = SharePartitionKey(group_id, topic_id, index)
        try:
            taken = await manager.acquire(key, topic, member_id, max_records=records_left, max_bytes=bytes_left,
                                          min_one_batch=not got, mode=limits.mode, batch_size=limits.batch_size)
        except ShareStateUnavailable as exc:
            log.debug("share partition %s not available yet: %s", key, exc)
            continue
        except Exception as exc:  # noqa: BLE001 - the partition's error, mapped in one place
            entry = _answer(answers, topic_id, index)
            entry.error, entry.error_message = error_code_for(exc), str(exc) or None
            failed = True
            continue
        if not taken.acquired:
            continue
        ranges = [OffsetRange(r.first_offset, r.last_offset) for r in taken.acquired]
        entry = _answer(answers, topic_id, index)
        entry.records = regions_for(taken.read.batches, ranges)
        entry.acquired = taken.acquired
        bytes_left -= sum(region.length for region in entry.records)
        records_left -= sum(r.offset_count for r in ranges)
        got = True
    return got, failed


def _watch(manager: SharePartitionManager, group_id: str, order: Sequence[TopicIdPartition],
           waiter: asyncio.Future) -> list:
    """Wakes ``waiter`` when a partition's readable end moves or a share partition has records back."""
    undo = []
    for topic_id, index in order:
        key = SharePartitionKey(group_id, topic_id, index)
        manager.add_waiter(key, waiter)
        undo.append(lambda key=key: manager.remove_waiter(key, waiter))
        topic = manager.topic_name(topic_id)
        try:
            partition = manager.partition(topic, index) if topic is not None else None
        except Exception:  # noqa: BLE001 - answered by the next pass
            partition = None
        if partition is not None:
            partition.add_fetch_waiter(waiter)
            undo.append(lambda partition=partition: partition.remove_fetch_waiter(waiter))
    return undo


def _answer(answers: dict[TopicIdPartition, PartitionAnswer], topic_id: uuid.UUID, index: int) -> PartitionAnswer:
    return answers.setdefault((topic_id, index), PartitionAnswer(topic_id, index))


def renew_allowed(batches: Sequence[AcknowledgementBatch], version: int, renew_only: bool) -> bool:
    """RENEW (KIP-1222) exists from ShareFetch / ShareAcknowledge v2, in requests marked IsRenewAck."""
    uses_renew = any(AcknowledgeType.RENEW in batch.acknowledge_types for batch in batches)
    return not uses_renew or (version >= 2 and renew_only)
