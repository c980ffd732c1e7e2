"""The group coordinator's part of the share-group admin APIs (coordinator/group/share_offset_apis.py), on
the sans-IO core with writes completed by the test: what AlterShareGroupOffsets and
DeleteShareGroupOffsets change in a share group's ShareGroupStatePartitionMetadata, when they answer (once
the records are durable), and their refusals. The broker-level behaviour is in test_share_admin.py."""

from __future__ import annotations

import uuid

import pytest

from eoslog.coordinator.group import GroupConfig, GroupCoordinator
from eoslog.coordinator.group.errors import Errors as E
from eoslog.coordinator.group.share_assignor import TopicMetadata
from eoslog.coordinator.group.share_group import ShareHeartbeat
from eoslog.coordinator.group.share_offset_apis import NO_OFFSET_INFORMATION
from eoslog.protocol.errors import ErrorCode

T, U = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"t": TopicMetadata(T, 3), "u": TopicMetadata(U, 2)}


class Core:
    """The core with every write appended and completed at once, unless ``fail`` names an error."""

    def __init__(self) -> None:
        self.c = GroupCoordinator(GroupConfig(), ownership=lambda partition: E.NONE, share_state=True)
        self.fail: E | None = None
        self.answers: dict[int, object] = {}
        self.writes = 0

    def run(self, result):
        for completion in result.completed:
            self.answers[completion.token] = completion.response
        for write in result.writes:
            self.writes += 1
            self.run(self.c.complete_write(write.write_id, now_ms=0, error=self.fail,
                                           log_offset=-1 if self.fail else self.writes))
        if result.response is not None:
            return result.response
        return self.answers.get(result.pending.token) if result.pending is not None else None

    def group(self, group_id="g"):
        return self.c.share.groups.get(group_id)


@pytest.fixture
def core():
    return Core()


def test_alter_creates_an_empty_group_and_marks_the_partitions_initializing(core):
    change = core.run(core.c.alter_share_group_offsets("g", {T: ("t", {0: 5, 2: 7})}, now_ms=10))
    assert change.error is E.NONE
    assert change.state_epoch == 1 and change.partitions == {T: {0: 5, 2: 7}}
    group = core.group()
    assert group.is_empty() and group.group_epoch == 1
    assert group.state_partitions.initializing[T].partitions == frozenset({0, 2})
    # the share coordinator answered: the partitions move to initialized
    core.run(core.c.share_group_initialized("g", {T: {0, 2}}, {}, {T: "t"}, now_ms=20))
    assert core.c.share_group_initialized_partitions("g") == (E.NONE, {T: frozenset({0, 2})})
    # a second alter moves the group epoch again: the new state epoch fences the leader's
    assert core.run(core.c.alter_share_group_offsets("g", {T: ("t", {0: 1})}, now_ms=30)).state_epoch > 1


def test_alter_answers_only_once_its_records_are_durable_and_a_failed_write_changes_nothing(core):
    core.fail = E.NOT_COORDINATOR
    assert core.run(core.c.alter_share_group_offsets("g", {T: ("t", {0: 5})}, now_ms=10)).error is E.NOT_COORDINATOR
    assert core.group() is None  # the group the alter created is rolled back with its records


def test_a_group_with_members_or_of_another_type_is_refused(core):
    core.run(core.c.share_group_heartbeat("g", ShareHeartbeat("m", 0, subscribed_topic_names=("t",)),
                                          topics=TOPICS, now_ms=0))
    writes = core.writes
    assert core.run(core.c.alter_share_group_offsets("g", {T: ("t", {0: 5})}, now_ms=1)).error is E.NON_EMPTY_GROUP
    assert core.run(core.c.delete_share_group_offsets("g", {"t": (T, 3)}, now_ms=1)).error is E.NON_EMPTY_GROUP
    assert core.writes == writes  # nothing written for a refusal
    assert core.run(core.c.delete_share_group_offsets("none", {"t": (T, 3)}, now_ms=1)).error is E.GROUP_ID_NOT_FOUND
    assert core.c.share_group_initialized_partitions("none") == (E.NONE, {})
    assert core.run(core.c.alter_share_group_offsets("", {T: ("t", {0: 5})}, now_ms=1)).error is E.INVALID_GROUP_ID


def test_delete_moves_initialized_topics_to_deleting_then_clears_them(core):
    core.run(core.c.alter_share_group_offsets("g", {T: ("t", {0: 5, 1: 5})}, now_ms=10))
    core.run(core.c.share_group_initialized("g", {T: {0, 1}}, {}, {T: "t"}, now_ms=20))
    change = core.run(core.c.delete_share_group_offsets("g", {"t": (T, 3), "u": (U, 2), "x": None}, now_ms=30))
    assert change.error is E.NONE
    assert change.partitions == {T: {0: -1, 1: -1}}  # the initialized partitions
    assert change.refused == ((None, "u", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_OFFSET_INFORMATION),
                              (None, "x", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
    state = core.group().state_partitions
    assert T not in state.initialized and state.deleting == {T: "t"}
    # a topic still deleting (its state deletion failed) is deleted again over all its partitions
    assert core.run(core.c.delete_share_group_offsets("g", {"t": (T, 3)}, now_ms=40)).partitions == {
        T: {0: -1, 1: -1, 2: -1}}
    core.run(core.c.share_group_offsets_deleted("g", [T], now_ms=50))
    assert core.group().state_partitions.deleting == {}
    assert core.c.share_group_initialized_partitions("g") == (E.NONE, {})
