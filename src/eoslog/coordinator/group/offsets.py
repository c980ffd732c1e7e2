"""Committed offsets of the groups one coordinator serves, plain and transactional, without I/O.

:class:`OffsetStore` owns, per group, the committed ``(topic, partition) -> OffsetAndMetadata`` and
the transactional offsets still waiting for their producer's marker. Nothing here decides *whether*
a member may commit (that is :meth:`ClassicGroup.validate_offset_commit`); this module turns accepted
commits into records and applies them once they are in the log:

    prepare_commit(...) -> OffsetCommitPlan   records to append; nothing visible changes
    apply_commit(plan, log_offset)            after the append: the offsets become committed
                                              (or pending, for a transactional plan)
    abort_commit(plan)                        the append failed
    complete_txn(producer_id, commit)         after the producer's COMMIT/ABORT marker is written

Always true:
* A transactional offset is never returned by :meth:`fetch` before its COMMIT marker; after an ABORT
  marker it is gone.
* Between prepare and apply/abort the partitions count as "pending", so OffsetFetch with
  require_stable answers UNSTABLE_OFFSET_COMMIT rather than an offset about to be replaced.
* Each committed offset remembers its record's position in ``__consumer_offsets``: when a transaction
  commits, its offsets only replace ones written earlier in the log, which is what a reload from the
  log computes too (see ``log_format.merge_txn_offsets``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.log_format import (
    LoadedPartition,
    LoggedOffset,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
    merge_txn_offsets,
)
from eoslog.coordinator.group.results import FetchedOffset

NO_PRODUCER_ID = -1


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int | None = None  # only from OffsetCommit v2-v4's retention_time_ms

    def to_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(self.offset, self.leader_epoch, self.metadata, self.commit_timestamp_ms,
                                 -1 if self.expire_timestamp_ms is None else self.expire_timestamp_ms)

    @classmethod
    def from_value(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                   None if value.expire_timestamp == -1 else value.expire_timestamp)


@dataclass(frozen=True)
class OffsetCommitPlan:
    """A prepared commit: what to append and what to apply afterwards. Immutable."""

    group_id: str
    offsets: tuple[tuple[TopicPartition, OffsetAndMetadata], ...]
    records: tuple[tuple[bytes, bytes | None], ...]
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1

    @property
    def is_transactional(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


def offset_commit_record(group_id: str, tp: TopicPartition,
                         value: OffsetAndMetadata | None) -> tuple[bytes, bytes | None]:
    key = encode_offset_commit_key(OffsetCommitKey(group_id, tp.topic, tp.partition))
    return key, None if value is None else encode_offset_commit_value(value.to_value())


class OffsetStore:
    def __init__(self) -> None:
        # group -> tp -> (offset, position of its record in __consumer_offsets)
        self._committed: dict[str, dict[TopicPartition, LoggedOffset]] = {}
        # group -> producer id -> tp -> offset: written, waiting for the producer's marker
        self._pending_txn: dict[str, dict[int, dict[TopicPartition, LoggedOffset]]] = {}
        # group -> tp -> number of prepared, not yet applied, commits (plain or transactional)
        self._in_flight: dict[str, Counter[TopicPartition]] = {}

    # ------------------------------------------------------------------------------------------------
    # Commits

    def prepare_commit(self, group_id: str, offsets: Iterable[tuple[TopicPartition, OffsetAndMetadata]],
                       *, metadata_max_bytes: int, producer_id: int = NO_PRODUCER_ID,
                       producer_epoch: int = -1) -> tuple[dict[TopicPartition, Errors], OffsetCommitPlan]:
        """Validate per partition and build the records. Returns the partitions refused (with their
        error) and the plan for the rest; an empty plan needs no append."""
        errors: dict[TopicPartition, Errors] = {}
        accepted: list[tuple[TopicPartition, OffsetAndMetadata]] = []
        for tp, value in offsets:
            if value.metadata is not None and len(value.metadata.encode("utf-8")) > metadata_max_bytes:
                errors[tp] = Errors.OFFSET_METADATA_TOO_LARGE
            else:
                accepted.append((tp, value))
        records = tuple(offset_commit_record(group_id, tp, value) for tp, value in accepted)
        plan = OffsetCommitPlan(group_id, tuple(accepted), records, producer_id, producer_epoch)
        if accepted:
            self._in_flight.setdefault(group_id, Counter()).update(tp for tp, _ in accepted)
        return errors, plan

    def _release(self, plan: OffsetCommitPlan) -> None:
        counter = self._in_flight.get(plan.group_id)
        if counter is None:
            return
        counter.subtract(tp for tp, _ in plan.offsets)
        for tp in [tp for tp, n in counter.items() if n <= 0]:
            del counter[tp]
        if not counter:
            del self._in_flight[plan.group_id]

    def apply_commit(self, plan: OffsetCommitPlan, log_offset: int) -> None:
        """The plan's records were appended starting at ``log_offset`` (one record per offset)."""
        self._release(plan)
        if plan.is_transactional:
            target = self._pending_txn.setdefault(plan.group_id, {}).setdefault(plan.producer_id, {})
        else:
            target = self._committed.setdefault(plan.group_id, {})
        for i, (tp, value) in enumerate(plan.offsets):
            target[tp] = LoggedOffset(value.to_value(), log_offset + i)

    def abort_commit(self, plan: OffsetCommitPlan) -> None:
        self._release(plan)

    def complete_txn(self, producer_id: int, commit: bool,
                     group_ids: Iterable[str] | None = None) -> list[str]:
        """The producer's marker is in the log: publish (commit) or drop (abort) its pending offsets
        in ``group_ids`` (all groups when None). Returns the groups that had some."""
        touched = []
        for group_id in list(self._pending_txn) if group_ids is None else list(group_ids):
            by_producer = self._pending_txn.get(group_id)
            if not by_producer or producer_id not in by_producer:
                continue
            pending = by_producer.pop(producer_id)
            if not by_producer:
                del self._pending_txn[group_id]
            touched.append(group_id)
            if commit:
                merge_txn_offsets(self._committed.setdefault(group_id, {}), pending)
        return touched

    # ------------------------------------------------------------------------------------------------
    # Reads

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._committed.get(group_id))

    def committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata.from_value(lo.value)
                for tp, lo in sorted(self._committed.get(group_id, {}).items())}

    def groups(self) -> set[str]:
        return set(self._committed) | set(self._pending_txn)

    def has_pending_txn_offsets(self, group_id: str,
                                topic_partitions: Iterable[TopicPartition] | None = None) -> bool:
        by_producer = self._pending_txn.get(group_id)
        if not by_producer:
            return False
        if topic_partitions is None:
            return True
        wanted = set(topic_partitions)
        return any(wanted.intersection(offsets) for offsets in by_producer.values())

    def producers_with_pending_offsets(self, group_id: str) -> set[int]:
        return set(self._pending_txn.get(group_id, {}))

    def _is_unstable(self, group_id: str, tp: TopicPartition) -> bool:
        if self._in_flight.get(group_id, {}).get(tp, 0) > 0:
            return True
        return any(tp in offsets for offsets in self._pending_txn.get(group_id, {}).values())

    def fetch(self, group_id: str, topic_partitions: Iterable[TopicPartition] | None,
              require_stable: bool = False) -> list[FetchedOffset]:
        """OffsetFetch. ``topic_partitions=None`` means every partition the group has offsets for."""
        committed = self._committed.get(group_id, {})
        if topic_partitions is None:
            wanted = set(committed)
            if require_stable:  # so a fetch-all also shows partitions blocked by an open transaction
                wanted.update(tp for offsets in self._pending_txn.get(group_id, {}).values() for tp in offsets)
            tps = sorted(wanted)
        else:
            tps = list(topic_partitions)
        out = []
        for tp in tps:
            if require_stable and self._is_unstable(group_id, tp):
                out.append(FetchedOffset(tp.topic, tp.partition, -1, -1, "", Errors.UNSTABLE_OFFSET_COMMIT))
                continue
            logged = committed.get(tp)
            if logged is None:
                out.append(FetchedOffset(tp.topic, tp.partition, -1, -1, "", Errors.NONE))
            else:
                v = logged.value
                out.append(FetchedOffset(tp.topic, tp.partition, v.offset, v.leader_epoch, v.metadata,
                                         Errors.NONE))
        return out

    # ------------------------------------------------------------------------------------------------
    # Deletion and expiry

    def deletion_records(self, group_id: str,
                         topic_partitions: Iterable[TopicPartition] | None = None
                         ) -> tuple[tuple[bytes, bytes | None], ...]:
        """Tombstones for the given committed partitions (all of the group's when None)."""
        committed = self._committed.get(group_id, {})
        tps = sorted(committed) if topic_partitions is None else [tp for tp in topic_partitions
                                                                   if tp in committed]
        return tuple(offset_commit_record(group_id, tp, None) for tp in tps)

    def apply_delete(self, group_id: str, topic_partitions: Iterable[TopicPartition] | None = None) -> None:
        committed = self._committed.get(group_id)
        if committed is None:
            return
        if topic_partitions is None:
            committed.clear()
        else:
            for tp in topic_partitions:
                committed.pop(tp, None)
        if not committed:
            del self._committed[group_id]

    def expired(self, group_id: str, now_ms: int, retention_ms: int, base_timestamp_ms: int | None,
                skip_topics: set[str] | None = None) -> list[TopicPartition]:
        """Offsets past retention: an explicit expire timestamp wins; otherwise ``base_timestamp_ms``
        (when the group became Empty) or, when None, the commit timestamp plus the retention.
        Partitions with a commit in flight or pending never expire."""
        out = []
        for tp, logged in sorted(self._committed.get(group_id, {}).items()):
            if skip_topics is not None and tp.topic in skip_topics:
                continue
            if self._is_unstable(group_id, tp):
                continue
            v = logged.value
            if v.expire_timestamp != -1:
                due = now_ms >= v.expire_timestamp
            else:
                base = v.commit_timestamp if base_timestamp_ms is None else base_timestamp_ms
                due = base + retention_ms <= now_ms
            if due:
                out.append(tp)
        return out

    # ------------------------------------------------------------------------------------------------
    # Loading

    def load(self, loaded: LoadedPartition) -> None:
        for group_id, offsets in loaded.offsets.items():
            target = self._committed.setdefault(group_id, {})
            for (topic, partition), logged in offsets.items():
                target[TopicPartition(topic, partition)] = logged
        for producer_id, groups in loaded.pending_txn_offsets.items():
            for group_id, offsets in groups.items():
                target = self._pending_txn.setdefault(group_id, {}).setdefault(producer_id, {})
                for (topic, partition), logged in offsets.items():
                    target[TopicPartition(topic, partition)] = logged

    def unload(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            self._committed.pop(group_id, None)
            self._pending_txn.pop(group_id, None)
            self._in_flight.pop(group_id, None)
