"""Which share partitions of a share group have state at the share coordinator (KIP-932): Kafka's
ShareGroupStatePartitionMetadata, and the decisions around InitializeShareGroupState, without I/O.

Kafka's rules (GroupMetadataManager.maybeCreateInitializeShareGroupStateRequest,
addInitializingTopicsRecords, initializeShareGroupState, uninitializeShareGroupState;
GroupCoordinatorService.persisterInitialize), as this module keeps them:

- The assignor hands out only *initialized* share partitions: those whose state the share coordinator
  holds. A heartbeat that finds partitions of subscribed topics neither initialized nor initializing
  marks them initializing (written in the heartbeat's own records, so a deletion finds any state the
  share coordinator may come to hold), and once that record is durable the group coordinator asks the
  share coordinator to initialize each, at the group epoch as the state epoch. Asynchronously: the
  heartbeat is answered at once, and the partitions reach the assignment with a later heartbeat.
- The start offset is -1 (unknown: the share-partition leader applies ``share.auto.offset.reset`` when it
  first loads the partition) for a topic the group initializes for the first time, and 0 for a new
  partition of a topic it already had, so that records produced there before the partition loads are
  delivered.
- Initialized partitions move to ``initialized`` (and the group epoch moves on, so the next heartbeat
  computes a new target); failed ones leave ``initializing``, so a later heartbeat tries again. A partition
  initializing for longer than ``group.share.initialize.retry.interval.ms`` (a coordinator that failed
  over mid-way) is tried again too.
- Kafka keeps one creation timestamp per topic (``CreateTimestamp``); a topic's partitions marked
  initializing later give the topic the later timestamp.

Not here yet (issue 37, step 4): the deleting topics. A topic deleted from the cluster is dropped from the
sets here, but its share-partition state is left to the share coordinator's tombstones for deleted topics.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from eoslog.coordinator.group.share_assignor import TopicMetadata

UNINITIALIZED_START_OFFSET = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET
UNKNOWN_TOPIC_NAME = "<UNKNOWN>"  # what Kafka writes for a topic id its metadata no longer has


class TopicPartitions(NamedTuple):
    """One entry of InitializingTopics / InitializedTopics: Kafka's TopicPartitionsInfo."""

    name: str
    partitions: frozenset[int]
    create_timestamp: int


class InitializeItem(NamedTuple):
    topic_id: uuid.UUID
    topic_name: str
    partitions: frozenset[int]
    start_offset: int


@dataclass(frozen=True)
class ShareInitialization:
    """InitializeShareGroupState to send once the group's records naming these partitions as initializing
    are durable: every partition of ``items`` at ``state_epoch``."""

    group_id: str
    state_epoch: int
    items: tuple[InitializeItem, ...]


@dataclass
class ShareStatePartitions:
    """Kafka's ShareGroupStatePartitionMetadataValue of one share group."""

    initializing: dict[uuid.UUID, TopicPartitions] = field(default_factory=dict)
    initialized: dict[uuid.UUID, TopicPartitions] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)  # topic id -> name
    # Topics whose InitializeShareGroupState this coordinator sent itself (not persisted). An initializing
    # entry read back from the log at load was sent by an earlier coordinator, which is gone with its
    # request (a broker restart, a failover): it is retried at the next heartbeat, not after
    # group.share.initialize.retry.interval.ms, or a broker killed while creating __share_group_state
    # would leave the group's consumers idle for that long. Nothing can have used those partitions
    # meanwhile: they are assigned only once initialized.
    sent_here: set[uuid.UUID] = field(default_factory=set, compare=False, repr=False)

    def is_empty(self) -> bool:
        return not (self.initializing or self.initialized or self.deleting)

    def is_initialized(self, topic_id: uuid.UUID, partition: int) -> bool:
        entry = self.initialized.get(topic_id)
        return entry is not None and partition in entry.partitions

    def with_state(self) -> dict[uuid.UUID, frozenset[int]]:
        """Every partition the share coordinator may hold state of: initialized or initializing."""
        out: dict[uuid.UUID, frozenset[int]] = {}
        for table in (self.initialized, self.initializing):
            for topic_id, entry in table.items():
                out[topic_id] = out.get(topic_id, frozenset()) | entry.partitions
        return out

    def plan(self, topics: Mapping[str, TopicMetadata], subscribed: Iterable[str], now_ms: int,
             retry_interval_ms: int) -> tuple[InitializeItem, ...]:
        """The partitions of the ``subscribed`` topics to initialize now, marked initializing here.
        ``topics``: every topic of the cluster by name; entries of topics no longer in it are forgotten."""
        ids = {meta.topic_id: name for name, meta in topics.items()}
        self.forget_topics([t for table in (self.initializing, self.initialized) for t in table if t not in ids])
        for table in (self.initializing, self.initialized):
            for topic_id, entry in list(table.items()):
                if entry.name != ids[topic_id]:  # written as <UNKNOWN> once, or read from an older record
                    table[topic_id] = entry._replace(name=ids[topic_id])
        items = []
        for name in sorted(set(subscribed) & set(topics)):
            meta = topics[name]
            done = self.initialized.get(meta.topic_id)
            busy = self.initializing.get(meta.topic_id)
            retry = busy is not None and (meta.topic_id not in self.sent_here
                                          or now_ms - busy.create_timestamp >= retry_interval_ms)
            wanted = frozenset(
                p for p in range(meta.partitions)
                if not (done is not None and p in done.partitions)
                and (retry or busy is None or p not in busy.partitions))
            if not wanted:
                continue
            start = UNINITIALIZED_START_OFFSET if done is None else 0
            items.append(InitializeItem(meta.topic_id, name, wanted, start))
            held = busy.partitions if busy is not None else frozenset()
            self.initializing[meta.topic_id] = TopicPartitions(name, held | wanted, now_ms)
            self.sent_here.add(meta.topic_id)
        return tuple(items)

    def forget_topics(self, topic_ids: Iterable[uuid.UUID]) -> bool:
        """Deleted topics leave both sets; True if anything changed."""
        changed = False
        for topic_id in topic_ids:
            for table in (self.initializing, self.initialized):
                changed |= table.pop(topic_id, None) is not None
        return changed

    def completed(self, succeeded: Mapping[uuid.UUID, Iterable[int]], failed: Mapping[uuid.UUID, Iterable[int]],
                  names: Mapping[uuid.UUID, str], now_ms: int) -> bool:
        """The share coordinator answered: ``succeeded`` move to initialized, ``failed`` leave initializing
        (a later heartbeat tries again). True when a partition became initialized."""
        moved = False
        for topic_id, partitions in failed.items():
            self._remove_initializing(topic_id, frozenset(partitions))
        for topic_id, partitions in succeeded.items():
            partitions = frozenset(partitions)
            self._remove_initializing(topic_id, partitions)
            entry = self.initialized.get(topic_id)
            name = names.get(topic_id) or (entry.name if entry else UNKNOWN_TOPIC_NAME)
            held = entry.partitions if entry is not None else frozenset()
            if partitions - held:
                moved = True
                self.initialized[topic_id] = TopicPartitions(name, held | partitions,
                                                             entry.create_timestamp if entry else now_ms)
        return moved

    def _remove_initializing(self, topic_id: uuid.UUID, partitions: frozenset[int]) -> None:
        entry = self.initializing.get(topic_id)
        if entry is None:
            return
        left = entry.partitions - partitions
        if left:
            self.initializing[topic_id] = entry._replace(partitions=left)
        else:
            del self.initializing[topic_id]
