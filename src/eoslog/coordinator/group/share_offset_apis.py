"""The group coordinator's part of the share-group admin APIs (KIP-932): DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92). A mixin of
:class:`~.coordinator.GroupCoordinator`, as share_apis.py is; the share coordinator's part (reading the
summaries, initializing and deleting state) is run by the shard (shard.py) between the calls here.

Kafka's rules (GroupCoordinatorService and GroupMetadataManager, 4.2), as kept here:
- Describe with no topics lists the group's *initialized* share partitions (none for an unknown group);
  with topics it asks the share coordinator about exactly those, whatever the group.
- Alter needs a share group without members: an unknown id creates an empty share group (Kafka's
  getOrMaybeCreateShareGroup), a group with members is NON_EMPTY_GROUP, a classic or consumer group's id
  GROUP_ID_NOT_FOUND. The partitions are marked initializing in the group's records, and once those are
  durable the share coordinator initializes each at the new start offset; the answer names the
  partitions that moved to initialized. eoslog also moves the group epoch first, so the state epoch the
  share coordinator is given is above the one any share-partition leader still holds: that leader's
  next write is fenced and it reads the new state (Kafka reaches the same through its leaders' caches).
- Delete needs an existing share group without members (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP); a topic
  whose partitions are initialized moves to ``deleting`` with its partitions, a topic already deleting is
  deleted again over all its partitions, any other topic answers UNKNOWN_TOPIC_OR_PARTITION ("There is no
  offset information to delete."). Once the share coordinator deleted a topic's state, the topic leaves
  ``deleting``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.results import Completion, Effects, Pending, Result
from eoslog.coordinator.group.share_group import ShareGroup
from eoslog.coordinator.group.share_initialization import TopicPartitions
from eoslog.coordinator.group.share_state import ShareGroupState
from eoslog.protocol.errors import ErrorCode

NO_OFFSET_INFORMATION = "There is no offset information to delete."


@dataclass(frozen=True)
class OffsetsChange:
    """What the share coordinator is to do for an alter or a delete the group coordinator accepted:
    ``partitions`` per topic id (alter: start offset per partition; delete: the partitions), at
    ``state_epoch``; ``refused`` the topics answered at once (topic id or None, name, error, message)."""

    error: Errors = Errors.NONE
    message: str | None = None
    state_epoch: int = -1
    partitions: dict[uuid.UUID, dict[int, int]] = field(default_factory=dict)
    refused: tuple[tuple[uuid.UUID | None, str, ErrorCode, str | None], ...] = ()


class ShareOffsetApis:
    def share_group_initialized_partitions(self, group_id: str) -> tuple[Errors, dict[uuid.UUID, frozenset[int]]]:
        """DescribeShareGroupOffsets with no topics: the group's initialized share partitions."""
        error = self._check(group_id)
        if error is not Errors.NONE:
            return error, {}
        group = self.share.groups.get(group_id)
        if group is None or group.state is ShareGroupState.DEAD:
            return Errors.NONE, {}
        return Errors.NONE, {t: entry.partitions for t, entry in group.state_partitions.initialized.items()}

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[uuid.UUID, tuple[str, Mapping[int, int]]],
                                  *, now_ms: int) -> Result:
        """AlterShareGroupOffsets' first half. ``offsets``: per topic id, its name and the new start offset
        of each (existing) partition. Answers an :class:`OffsetsChange` once the group's records are
        durable."""
        group, refusal = self._empty_share_group(group_id, create=True)
        if refusal is not None:
            return Result(refusal)
        group.group_epoch += 1
        table = group.state_partitions.initializing
        for topic_id, (name, starts) in offsets.items():
            if not starts:
                continue
            held = table[topic_id].partitions if topic_id in table else frozenset()
            table[topic_id] = TopicPartitions(name, held | frozenset(starts), now_ms)
            group.state_partitions.sent_here.add(topic_id)  # its InitializeShareGroupState goes from here
        change = OffsetsChange(state_epoch=group.group_epoch,
                               partitions={t: dict(starts) for t, (_, starts) in offsets.items() if starts})
        return self._share_offsets_answer(group_id, "alter_share_group_offsets", change)

    def delete_share_group_offsets(self, group_id: str, topics: Mapping[str, tuple[uuid.UUID, int] | None], *,
                                   now_ms: int) -> Result:
        """DeleteShareGroupOffsets' first half. ``topics``: per requested name, (topic id, partition count),
        or None for a topic the cluster does not have."""
        group, refusal = self._empty_share_group(group_id, create=False)
        if refusal is not None:
            return Result(refusal)
        state = group.state_partitions
        partitions: dict[uuid.UUID, dict[int, int]] = {}
        refused = []
        for name, known in topics.items():
            if known is None:
                refused.append((None, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
                continue
            topic_id, count = known
            if topic_id in state.initialized:
                partitions[topic_id] = dict.fromkeys(state.initialized.pop(topic_id).partitions, -1)
                state.deleting[topic_id] = name
            elif topic_id in state.deleting:
                partitions[topic_id] = dict.fromkeys(range(count), -1)
            else:
                refused.append((None, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_OFFSET_INFORMATION))
        change = OffsetsChange(partitions=partitions, refused=tuple(refused))
        return self._share_offsets_answer(group_id, "delete_share_group_offsets", change)

    def share_group_offsets_deleted(self, group_id: str, topic_ids: Iterable[uuid.UUID], *, now_ms: int) -> Result:
        """The share coordinator deleted the state of ``topic_ids``: they leave ``deleting``."""
        group = self.share.groups.get(group_id)
        if self._check(group_id) is not Errors.NONE or group is None or group.state is ShareGroupState.DEAD:
            return Result()
        for topic_id in topic_ids:
            group.state_partitions.deleting.pop(topic_id, None)
        write = self._persist_share_group(group_id)
        return Result(writes=[write] if write is not None else [])

    # ---- helpers ----------------------------------------------------------------------------------

    def _empty_share_group(self, group_id: str, *, create: bool) -> tuple[ShareGroup | None, OffsetsChange | None]:
        error = self._check(group_id)
        if error is not Errors.NONE:
            return None, OffsetsChange(error)
        group = self.share.groups.get(group_id)
        if group is None:
            if self._other_group_type(group_id) or not create:
                return None, OffsetsChange(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
                                           if self._other_group_type(group_id) else f"Group {group_id} not found.")
            group = self.share.groups[group_id] = self.share.adopt(ShareGroup(group_id, self.config))
        if group.state is ShareGroupState.DEAD:
            return None, OffsetsChange(Errors.COORDINATOR_NOT_AVAILABLE, f"Group {group_id} is being deleted.")
        if not group.is_empty():
            return None, OffsetsChange(Errors.NON_EMPTY_GROUP, f"Group {group_id} is not empty.")
        return group, None

    def _share_offsets_answer(self, group_id: str, api: str, change: OffsetsChange) -> Result:
        pending = Pending(self._new_token(), api, group_id)

        def on_done(error: Errors | None, fx: Effects) -> None:
            answer = change if error is None else OffsetsChange(error)
            fx.completed.append(Completion(pending.token, api, group_id, "", answer))

        write = self._persist_share_group(group_id, on_done)
        return Result(change) if write is None else Result(pending=pending, writes=[write])
