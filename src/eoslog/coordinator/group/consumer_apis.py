"""The consumer-group (KIP-848) entry points of :class:`~.coordinator.GroupCoordinator`, kept apart so
the coordinator module stays one screen per concern: ConsumerGroupHeartbeat, ConsumerGroupDescribe, the
deletion of a consumer group, and the diff-based persistence of a group's records (see
consumer_log_format.py), and the expiry of consumer groups' offsets. A mixin: it uses the coordinator's
``_check``, ``_write``, ``_new_token``, ``_offset_expiry_write``, ``groups``, ``offsets``, ``consumer`` and
``share`` (a share group's id is no consumer group's)."""

from __future__ import annotations

from collections.abc import Callable

from eoslog.coordinator.group.consumer_classic import (
    classic_heartbeat,
    classic_join,
    classic_sync,
    convertible,
    from_classic_group,
    to_classic_record,
)
from eoslog.coordinator.group.consumer_coordinator import ConsumerGroupDescription
from eoslog.coordinator.group.consumer_group import ConsumerHeartbeat, ConsumerHeartbeatResponse
from eoslog.coordinator.group.consumer_log_format import Records, group_records, rebuild
from eoslog.coordinator.group.consumer_state import ConsumerGroupState
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.group import ClassicGroup
from eoslog.coordinator.group.log_format import GroupMetadataKey, encode_group_metadata_key
from eoslog.coordinator.group.results import (
    Completion,
    Effects,
    JoinGroupResponse,
    LeaveGroupResponse,
    MemberLeaveResult,
    Pending,
    Result,
    Write,
)
from eoslog.coordinator.group.state import GroupState

S = GroupState
CS = ConsumerGroupState


class ConsumerGroupApis:
    _consumer_written: dict[str, Records]
    _consumer_durable: dict[str, Records]

    def consumer_group_heartbeat(self, group_id: str, request: ConsumerHeartbeat, *, topics: dict[str, int],
                                 now_ms: int) -> Result:
        """ConsumerGroupHeartbeat (KIP-848). ``topics``: the broker's non-internal topics and their
        partition counts, for regex subscriptions and the assignors."""
        error = self._check(group_id)
        classic = self.groups.get(group_id)
        if error is Errors.NONE and group_id in self.share.groups:
            error = Errors.GROUP_ID_NOT_FOUND  # Kafka: a group id is one type; no conversion from share
        elif error is Errors.NONE and classic is not None:
            if classic.state in (S.EMPTY, S.DEAD) and classic.is_empty():
                del self.groups[group_id]  # an empty classic group (offsets only) becomes a consumer group
            elif request.member_epoch == 0 and convertible(classic):
                # Kafka 4.0's online upgrade: the classic members carry on inside the consumer group.
                self.consumer.groups[group_id] = from_classic_group(classic, self.config, now_ms)
                del self.groups[group_id]
            else:
                error = Errors.GROUP_ID_NOT_FOUND
        if error is not Errors.NONE:
            message = f"group {group_id} is not a consumer group" if error is Errors.GROUP_ID_NOT_FOUND else None
            return Result(ConsumerHeartbeatResponse(error, message, request.member_id or None))
        converted = classic is not None
        created = group_id not in self.consumer.groups
        response = self.consumer.heartbeat(group_id, request, topics, now_ms)
        group = self.consumer.groups.get(group_id)
        if created and group is not None and group.is_empty() and group.group_epoch == 0:
            del self.consumer.groups[group_id]  # a refused first heartbeat leaves nothing behind
        extra = ((encode_group_metadata_key(GroupMetadataKey(group_id)), None),) if converted else ()
        pending = Pending(self._new_token(), "consumer_group_heartbeat", group_id, request.member_id)

        def on_done(error: Errors | None, fx: Effects) -> None:
            answer = response if error is None else ConsumerHeartbeatResponse(error, None, request.member_id or None)
            fx.completed.append(Completion(pending.token, pending.api, group_id, request.member_id, answer))

        write = self._persist_consumer_group(group_id, on_done, extra)
        # The answer waits until the change is durable: a client never acts on an epoch or assignment
        # that a coordinator restart could forget.
        result = Result(response) if write is None else Result(pending=pending, writes=[write])
        downgrade = self._maybe_downgrade(group_id, now_ms)
        if downgrade is not None:
            result.writes.extend(downgrade.writes)
            result.completed.extend(downgrade.completed)
        return result

    def _maybe_downgrade(self, group_id: str, now_ms: int) -> Result | None:
        """Kafka 4.0's downgrade: the last consumer-protocol member left a group whose other members are
        classic ones, so it becomes a classic group again, in a rebalance (every member rejoins, eager
        clients revoking first). Its consumer records get tombstones; the classic record follows when
        the rebalance completes."""
        group = self.consumer.groups.get(group_id)
        value = to_classic_record(group) if group is not None else None
        if value is None:
            return None
        classic = ClassicGroup.from_record(group_id, value, self.config, now_ms, new_token=self._new_token,
                                           new_member_id=self._member_id_factory)
        del self.consumer.groups[group_id]
        self.groups[group_id] = classic
        fx = Effects()
        classic.rebalance(now_ms, fx)
        result = Result()
        write = self._persist_consumer_group(group_id)
        if write is not None:
            result.writes.append(write)
        return self._finish(fx, result)

    def _answer_when_durable(self, group_id: str, api: str, member_id: str, response, on_error) -> Result:
        """``response`` once the group's changed records are durable; ``on_error(error)`` if they fail."""
        pending = Pending(self._new_token(), api, group_id, member_id)

        def on_done(error: Errors | None, fx: Effects) -> None:
            answer = response if error is None else on_error(error)
            fx.completed.append(Completion(pending.token, api, group_id, member_id, answer))

        write = self._persist_consumer_group(group_id, on_done)
        return Result(response) if write is None else Result(pending=pending, writes=[write])

    # ---- classic members inside a consumer group (consumer_classic.py) ----------------------------

    def _classic_join_consumer_group(self, group_id: str, member_id: str, *, protocols, session_timeout_ms: int,
                                     rebalance_timeout_ms: int, group_instance_id: str | None, client_id: str,
                                     client_host: str, topics: dict[str, int] | None, now_ms: int,
                                     require_known_member_id: bool = False) -> Result:
        group = self.consumer.groups[group_id]
        response = classic_join(group, member_id, protocols=tuple(protocols), session_timeout_ms=session_timeout_ms,
                                rebalance_timeout_ms=rebalance_timeout_ms, group_instance_id=group_instance_id,
                                client_id=client_id, client_host=client_host,
                                topics=topics if topics is not None else dict(group.subscription_metadata),
                                now_ms=now_ms, new_member_id=lambda: self._member_id_factory(client_id),
                                require_known_member_id=require_known_member_id)
        if response.error is Errors.MEMBER_ID_REQUIRED:
            return Result(response)  # nothing changed but the id handed out
        return self._answer_when_durable(group_id, "join_group", response.member_id, response,
                                         lambda error: JoinGroupResponse(error, member_id=member_id))

    def _classic_sync_consumer_group(self, group_id: str, member_id: str, generation_id: int, now_ms: int) -> Result:
        return Result(classic_sync(self.consumer.groups[group_id], member_id, generation_id, now_ms))

    def _classic_heartbeat_consumer_group(self, group_id: str, member_id: str, generation_id: int,
                                          now_ms: int) -> Result:
        return Result(classic_heartbeat(self.consumer.groups[group_id], member_id, generation_id, now_ms))

    def _classic_leave_consumer_group(self, group_id: str, members, now_ms: int) -> Result:
        group = self.consumer.groups[group_id]
        results = []
        for member_id, instance_id in members:
            if instance_id is not None and not member_id:
                member_id = next((m.member_id for m in group.members.values() if m.instance_id == instance_id), "")
            if member_id in group.members:
                group.remove_member(member_id)
                results.append(MemberLeaveResult(member_id, instance_id, Errors.NONE))
            else:
                results.append(MemberLeaveResult(member_id, instance_id, Errors.UNKNOWN_MEMBER_ID))
        response = LeaveGroupResponse(Errors.NONE, tuple(results))
        return self._answer_when_durable(group_id, "leave_group", "", response,
                                         lambda error: LeaveGroupResponse(error))

    def _persist_consumer_group(self, group_id: str, on_done: Callable[[Errors | None, Effects], None] | None = None,
                                extra: tuple[tuple[bytes, bytes | None], ...] = ()) -> Write | None:
        """The records that changed since the group's last write (tombstones for what is gone), or None.
        State is applied in memory first (like Kafka's timeline-based runtime); a failed append rolls the
        group back to its last durable records."""
        group = self.consumer.groups.get(group_id)
        records = group_records(group) if group is not None else {}
        before = self._consumer_written.get(group_id, {})
        diff = tuple((k, v) for k, v in records.items() if before.get(k) != v) + \
            tuple((k, None) for k in before if k not in records) + extra
        if not diff:
            return None
        self._consumer_written[group_id] = records

        def done(error: Errors | None, log_offset: int, now: int, fx: Effects) -> None:
            if error is None:
                if self._consumer_written.get(group_id) is records:
                    self._consumer_durable[group_id] = records
            else:
                durable = self._consumer_durable.get(group_id, {})
                self._consumer_written[group_id] = durable
                if group_id in self.groups:
                    pass  # converted to a classic group meanwhile: that one is the group now
                elif durable:
                    self.consumer.groups[group_id] = rebuild(group_id, durable, self.config, now)
                else:
                    self.consumer.groups.pop(group_id, None)
            if on_done is not None:
                on_done(error, fx)

        return self._write(group_id, diff, done)

    def _expire_consumer_group_offsets(self, now_ms: int, result: Result) -> None:
        """Offset retention for consumer groups, Kafka 4.x's rule: an offset of a topic no member
        subscribes to expires ``offsets_retention_ms`` after its commit (or at its explicit expire
        timestamp) -- for an Empty group, every offset. An Empty group left with no offsets (and none
        pending in a transaction) is deleted, its records tombstoned, as DeleteGroups does."""
        retention = self.config.offsets_retention_ms
        for group_id, group in list(self.consumer.groups.items()):
            if group.state is CS.DEAD:
                continue
            expired = self.offsets.expired(group_id, now_ms, retention, None, skip_topics=group.topics_in_use())
            remaining = set(self.offsets.committed(group_id)) - set(expired)
            if group.is_empty() and not remaining and not self.offsets.has_pending_txn_offsets(group_id):
                result.writes.append(self._prepare_consumer_group_removal(group_id))
            elif expired:
                result.writes.append(self._offset_expiry_write(group_id, expired))

    def _prepare_consumer_group_removal(self, group_id: str, finish: Callable[[Effects], None] | None = None,
                                        answers: dict[str, Errors | None] | None = None) -> Write:
        """DeleteGroups of an empty consumer group (or its expiry): Dead (described as gone, refusing
        joins) until the tombstones of its records and offsets are durable; a failed write brings it
        back as Empty."""
        group = self.consumer.groups[group_id]
        group.mark_dead()
        tombstones = tuple((k, None) for k in self._consumer_written.get(group_id, {}))
        records = self.offsets.deletion_records(group_id, None) + tombstones

        def on_done(error: Errors | None, log_offset: int, now: int, fx: Effects) -> None:
            if error is None:
                self.offsets.apply_delete(group_id, None)
                if self.consumer.groups.get(group_id) is group:
                    del self.consumer.groups[group_id]
                self._consumer_written.pop(group_id, None)
                self._consumer_durable.pop(group_id, None)
            else:
                group.refresh_state()  # back to Empty
            if answers is not None and finish is not None:
                answers[group_id] = error or Errors.NONE
                finish(fx)

        return self._write(group_id, records, on_done)

    def consumer_group_describe(self, group_id: str) -> ConsumerGroupDescription:
        error = self._check(group_id)
        if error is not Errors.NONE:
            return ConsumerGroupDescription(group_id, error)
        classic = self.groups.get(group_id)
        if (classic is not None and classic.state is not S.DEAD) or group_id in self.share.groups:
            return ConsumerGroupDescription(group_id, Errors.GROUP_ID_NOT_FOUND,
                                            f"group {group_id} is not a consumer group")
        return self.consumer.describe(group_id)

