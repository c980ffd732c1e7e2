"""The share-group (KIP-932) entry points of :class:`~.coordinator.GroupCoordinator`: ShareGroupHeartbeat,
ShareGroupDescribe, the deletion of a share group, its timers, and the diff-based persistence of a group's
records (share_log_format.py). A mixin, as consumer_apis.py is: it uses the coordinator's ``_check``,
``_write``, ``_new_token``, ``groups``, ``consumer`` and ``share``.

A group id is one group, whatever its type (Kafka 4.2's GroupMetadataManager): a share heartbeat for a
classic or consumer group's id is GROUP_ID_NOT_FOUND ("is not a share group"), as is every classic or
consumer API aimed at a share group's id, but JoinGroup (INCONSISTENT_GROUP_PROTOCOL) and SyncGroup,
Heartbeat, LeaveGroup (UNKNOWN_MEMBER_ID: no classic group by that id); those checks live with each API.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.results import Completion, Effects, Pending, Result, Write
from eoslog.coordinator.group.share_assignor import TopicMetadata
from eoslog.coordinator.group.share_coordinator import ShareGroupDescription
from eoslog.coordinator.group.share_group import ShareHeartbeat, ShareHeartbeatResponse, invalid_heartbeat
from eoslog.coordinator.group.share_initialization import ShareInitialization
from eoslog.coordinator.group.share_log_format import Records, group_records, rebuild, tombstone_order
from eoslog.coordinator.group.share_state import ShareGroupState


class ShareGroupApis:
    _share_written: dict[str, Records]
    _share_durable: dict[str, Records]
    # InitializeShareGroupState to send (share_initialization.py), each added once the records marking its
    # partitions initializing are durable; the shard takes them after every call.
    share_initializations: list[ShareInitialization]

    def share_group_heartbeat(self, group_id: str, request: ShareHeartbeat, *, topics: Mapping[str, TopicMetadata],
                              now_ms: int) -> Result:
        """ShareGroupHeartbeat (KIP-932). ``topics``: the broker's non-internal topics by name, with their
        ids and partition counts. Answered once the group's changed records are durable."""
        problem = invalid_heartbeat(group_id, request)
        if problem is not None:
            return Result(ShareHeartbeatResponse(Errors.INVALID_REQUEST, problem))
        error = self._check(group_id)
        if error is Errors.NONE and self._other_group_type(group_id):
            return Result(ShareHeartbeatResponse(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."))
        if error is not Errors.NONE:
            return Result(ShareHeartbeatResponse(error))
        created = group_id not in self.share.groups
        response = self.share.heartbeat(group_id, request, topics, now_ms)
        group = self.share.groups.get(group_id)
        if created and group is not None and group.is_empty() and group.group_epoch == 0:
            del self.share.groups[group_id]  # a refused first heartbeat leaves nothing behind
        initialization = None
        if self.share.initialize_state and group is not None and response.error is Errors.NONE:
            items = group.state_partitions.plan(topics, group.subscribed_topic_names(), now_ms,
                                                self.config.share_initialize_retry_interval_ms)
            if items:
                initialization = ShareInitialization(group_id, group.group_epoch, items)
        pending = Pending(self._new_token(), "share_group_heartbeat", group_id, request.member_id)

        def on_done(error: Errors | None, fx: Effects) -> None:
            answer = response if error is None else ShareHeartbeatResponse(error)
            if error is None and initialization is not None:
                self.share_initializations.append(initialization)
            fx.completed.append(Completion(pending.token, pending.api, group_id, request.member_id, answer))

        write = self._persist_share_group(group_id, on_done)
        # The answer waits until the change is durable: a client never acts on an epoch or assignment that
        # a coordinator restart could forget.
        return Result(response) if write is None else Result(pending=pending, writes=[write])

    def share_group_initialized(self, group_id: str, succeeded: Mapping[uuid.UUID, Iterable[int]],
                                failed: Mapping[uuid.UUID, Iterable[int]], names: Mapping[uuid.UUID, str], *,
                                now_ms: int) -> Result:
        """The share coordinator answered an initialization: the initialized partitions become assignable
        (the group epoch moves on, so the next heartbeat computes a new target), the failed ones are tried
        again by a later heartbeat. Kafka's initializeShareGroupState / uninitializeShareGroupState."""
        group = self.share.groups.get(group_id)
        if self._check(group_id) is not Errors.NONE or group is None or group.state is ShareGroupState.DEAD:
            return Result()  # moved, unloaded or deleted meanwhile: a later heartbeat starts again
        if group.state_partitions.completed(succeeded, failed, names, now_ms):
            group.group_epoch += 1
        write = self._persist_share_group(group_id)
        return Result(writes=[write] if write is not None else [])

    def share_group_state_partitions(self, group_id: str) -> dict[uuid.UUID, frozenset[int]] | None:
        """The share partitions an Empty share group may hold state of, for DeleteGroups to delete at the
        share coordinator first; None if ``group_id`` is not such a group (DeleteGroups answers it)."""
        group = self.share.groups.get(group_id)
        if self._check(group_id) is not Errors.NONE or group is None or not group.is_empty() \
                or group.state is ShareGroupState.DEAD:
            return None
        return group.state_partitions.with_state()

    def share_group_describe(self, group_ids: Iterable[str]) -> list[ShareGroupDescription]:
        """ShareGroupDescribe: one description per id, in request order."""
        out = []
        for group_id in group_ids:
            error = self._check(group_id)
            if error is not Errors.NONE:
                out.append(ShareGroupDescription(group_id, error))
            elif group_id not in self.share.groups and self._other_group_type(group_id):
                out.append(ShareGroupDescription(group_id, Errors.GROUP_ID_NOT_FOUND,
                                                 f"Group {group_id} is not a share group."))
            else:
                out.append(self.share.describe(group_id))
        return out

    def share_group_topic_ids(self) -> set[uuid.UUID]:
        """Every topic some share group coordinated here has in its ShareGroupStatePartitionMetadata
        (initializing, initialized or deleting)."""
        out: set[uuid.UUID] = set()
        for group in self.share.groups.values():
            state = group.state_partitions
            out |= set(state.initializing) | set(state.initialized) | set(state.deleting)
        return out

    def share_topics_deleted(self, topic_ids: Iterable[uuid.UUID], *, now_ms: int) -> Result:
        """Kafka's maybeCleanupShareGroupState: deleted topics leave every share group's
        ShareGroupStatePartitionMetadata, members or not (a group with members also drops them at its next
        heartbeat). The share coordinators delete the state itself (their own check for deleted topics)."""
        deleted = set(topic_ids)
        result = Result()
        for group_id, group in list(self.share.groups.items()):
            if group.state is ShareGroupState.DEAD or self._check(group_id) is not Errors.NONE:
                continue
            state = group.state_partitions
            changed = state.forget_topics(deleted)
            for topic_id in deleted & set(state.deleting):
                del state.deleting[topic_id]
                changed = True
            if changed:
                write = self._persist_share_group(group_id)
                if write is not None:
                    result.writes.append(write)
        return result

    def _other_group_type(self, group_id: str) -> bool:
        """Whether ``group_id`` names a classic or consumer group now (Kafka's groups map holds one group
        per id; a classic group known only by its committed offsets counts, as it does in Kafka)."""
        return group_id in self.groups or group_id in self.consumer.groups

    def _share_tick(self, now_ms: int, result: Result) -> None:
        """Session expiry: the members gone are written away (tombstones, the next group epoch)."""
        for group_id in self.share.tick(now_ms):
            write = self._persist_share_group(group_id)
            if write is not None:
                result.writes.append(write)

    def _persist_share_group(self, group_id: str,
                             on_done: Callable[[Errors | None, Effects], None] | None = None) -> Write | None:
        """The records that changed since the group's last write, tombstones first (Kafka's order), or
        None. State is applied in memory first; a failed append rolls the group back to its last durable
        records, as for consumer groups."""
        group = self.share.groups.get(group_id)
        records = group_records(group) if group is not None else {}
        before = self._share_written.get(group_id, {})
        diff = tuple((k, None) for k in tombstone_order(k for k in before if k not in records)) + \
            tuple((k, v) for k, v in records.items() if before.get(k) != v)
        if not diff:
            return None
        self._share_written[group_id] = records

        def done(error: Errors | None, log_offset: int, now: int, fx: Effects) -> None:
            if group_id not in self._share_written:
                pass  # unloaded meanwhile: the new coordinator reads the log
            elif error is None:
                if self._share_written.get(group_id) is records:
                    self._share_durable[group_id] = records
            else:
                durable = self._share_durable.get(group_id, {})
                self._share_written[group_id] = durable
                if durable:
                    self.share.groups[group_id] = self.share.adopt(rebuild(group_id, durable, self.config, now))
                else:
                    self.share.groups.pop(group_id, None)
                    self._share_written.pop(group_id, None)
            if on_done is not None:
                on_done(error, fx)

        return self._write(group_id, diff, done)

    def _prepare_share_group_removal(self, group_id: str, finish: Callable[[Effects], None],
                                     answers: dict[str, Errors | None]) -> Write:
        """DeleteGroups of an Empty share group: Dead (heartbeats answered COORDINATOR_NOT_AVAILABLE,
        described as gone) until the tombstones of its records are durable; a failed write brings it back
        as Empty. The share coordinator's state of its share partitions was deleted before (GroupShard)."""
        group = self.share.groups[group_id]
        group.mark_dead()
        tombstones = tuple((k, None) for k in tombstone_order(self._share_written.get(group_id, {})))

        def on_done(error: Errors | None, log_offset: int, now: int, fx: Effects) -> None:
            if error is None:
                if self.share.groups.get(group_id) is group:
                    del self.share.groups[group_id]
                self._share_written.pop(group_id, None)
                self._share_durable.pop(group_id, None)
            elif self.share.groups.get(group_id) is group:
                group.refresh_state()  # back to Empty
            answers[group_id] = error or Errors.NONE
            finish(fx)

        return self._write(group_id, tombstones, on_done)
