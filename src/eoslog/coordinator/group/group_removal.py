"""Group removal entry points of :class:`~.coordinator.GroupCoordinator`: DeleteGroups and offset
retention (KIP-211 for classic groups, Kafka 4.x's rule for consumer groups, which deletes an expired
empty group). A mixin, split out of coordinator.py by responsibility: it uses the coordinator's
``_check``, ``_write``, ``_new_token``, ``groups``, ``consumer``, ``share``, ``offsets`` and the consumer-
and share-group removals of consumer_apis.py and share_apis.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from eoslog.coordinator.group.consumer_state import ConsumerGroupState as CS
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, Effects
from eoslog.coordinator.group.log_format import GroupMetadataKey, encode_group_metadata_key
from eoslog.coordinator.group.offsets import TopicPartition
from eoslog.coordinator.group.results import (
    Completion,
    DeletedGroup,
    DeleteGroupsResponse,
    Pending,
    Result,
    Write,
)
from eoslog.coordinator.group.share_state import ShareGroupState as SS
from eoslog.coordinator.group.state import GroupState

S = GroupState


class GroupRemoval:
    def delete_groups(self, group_ids: Iterable[str], *, now_ms: int) -> Result:
        """DeleteGroups: only Empty groups. The group is Dead (refusing joins and commits) from here
        until its tombstones are written; a failed write brings it back as Empty."""
        answers: dict[str, Errors | None] = {}
        order = list(dict.fromkeys(group_ids))
        pending = Pending(self._new_token(), "delete_groups", "")
        result = Result()

        def finish(fx: Effects) -> None:
            if all(answers[g] is not None for g in order):
                fx.completed.append(Completion(pending.token, "delete_groups", "", "", DeleteGroupsResponse(
                    tuple(DeletedGroup(g, answers[g] or Errors.NONE) for g in order))))

        for group_id in order:
            error = self._check(group_id, allow_empty_id=True)
            share_group = self.share.groups.get(group_id)
            if error is Errors.NONE and share_group is not None and share_group.state is not SS.DEAD:
                if not share_group.is_empty():
                    answers[group_id] = Errors.NON_EMPTY_GROUP  # Kafka's throwIfShareGroupIsNotEmpty
                    continue
                answers[group_id] = None
                result.writes.append(self._prepare_share_group_removal(group_id, finish, answers))
                continue
            consumer_group = self.consumer.groups.get(group_id)
            if error is Errors.NONE and consumer_group is not None and consumer_group.state is not CS.DEAD:
                if not consumer_group.is_empty():
                    answers[group_id] = Errors.NON_EMPTY_GROUP
                    continue
                answers[group_id] = None
                result.writes.append(self._prepare_consumer_group_removal(group_id, finish, answers))
                continue
            group = self.groups.get(group_id)
            if error is Errors.NONE and (group is None or group.state is S.DEAD):
                error = Errors.GROUP_ID_NOT_FOUND
            elif error is Errors.NONE and group is not None and \
                    (group.state is not S.EMPTY or not group.is_empty()):
                error = Errors.NON_EMPTY_GROUP
            if error is not Errors.NONE or group is None:
                answers[group_id] = error
                continue
            answers[group_id] = None
            result.writes.append(self._prepare_group_removal(group, None, now_ms, finish, answers))
        if not result.writes:
            fx = Effects()
            finish(fx)
            result.response = fx.completed[0].response
            return result
        result.pending = pending
        return result

    def _prepare_group_removal(self, group: ClassicGroup, offsets: list[TopicPartition] | None, now_ms: int,
                               finish: Callable[[Effects], None] | None = None,
                               answers: dict[str, Errors | None] | None = None) -> Write:
        group_id = group.group_id
        group.mark_dead(now_ms)
        records = (self.offsets.deletion_records(group_id, offsets)
                   + ((encode_group_metadata_key(GroupMetadataKey(group_id)), None),))

        def on_done(error: Errors | None, log_offset: int, now: int, fx: Effects) -> None:
            if error is None:
                self.offsets.apply_delete(group_id, offsets)
                if self.groups.get(group_id) is group:
                    del self.groups[group_id]
            else:
                group.revive(now)
            if answers is not None and finish is not None:
                answers[group_id] = error or Errors.NONE
                finish(fx)

        return self._write(group_id, records, on_done)

    def expire_offsets(self, now_ms: int) -> Result:
        """Offset retention (KIP-211): an Empty group's offsets expire ``offsets_retention_ms`` after
        it became Empty; a Stable consumer group's offsets of topics it no longer subscribes to, and a
        simple consumer's offsets, that long after their commit. An Empty group left with no offsets
        is deleted (Dead, tombstone). Consumer groups: see ``_expire_consumer_group_offsets``."""
        result = Result()
        retention = self.config.offsets_retention_ms
        for group_id, group in list(self.groups.items()):
            if group.state is S.DEAD or group.pending_members:
                continue
            if group.state is S.EMPTY and group.protocol_type is not None:
                expired = self.offsets.expired(group_id, now_ms, retention, group.state_timestamp_ms)
            elif group.protocol_type is None:
                expired = self.offsets.expired(group_id, now_ms, retention, None)
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state is S.STABLE:
                topics = group.subscribed_topics()
                if topics is None:
                    continue
                expired = self.offsets.expired(group_id, now_ms, retention, None, skip_topics=topics)
            else:
                continue
            remaining = set(self.offsets.committed(group_id)) - set(expired)
            if group.state is S.EMPTY and not remaining and \
                    not self.offsets.has_pending_txn_offsets(group_id):
                result.writes.append(self._prepare_group_removal(group, expired, now_ms))
            elif expired:
                result.writes.append(self._offset_expiry_write(group_id, expired))
        self._expire_consumer_group_offsets(now_ms, result)
        return result

    def _offset_expiry_write(self, group_id: str, expired: list[TopicPartition]) -> Write:
        """Tombstones for expired offsets; they leave memory once durable."""
        def on_done(error: Errors | None, log_offset: int, now: int, fx: Effects) -> None:
            if error is None:
                self.offsets.apply_delete(group_id, expired)

        return self._write(group_id, self.offsets.deletion_records(group_id, expired), on_done)
