"""A classic (pre-KIP-848) consumer group and its rebalance protocol, without I/O.

``ClassicGroup`` owns one group's membership: members by id, static members by group.instance.id,
the members told MEMBER_ID_REQUIRED that have not come back yet, the generation, the chosen protocol
and the leader. It runs JoinGroup / SyncGroup / Heartbeat / LeaveGroup and its own timers.

Always true:
* ``state`` changes only through :meth:`_transition`, which checks the table in ``state.py``.
* In COMPLETING_REBALANCE and STABLE every member went through the last join barrier.
* A member has at most one pending JoinGroup and one pending SyncGroup; a member that is removed
  has both answered (UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID when a static member replaces it), so
  the I/O layer never holds a future nobody will resolve.
* The assignment of a generation becomes visible (STABLE, SyncGroup answers) only after the
  GroupMetadataValue carrying it was appended to ``__consumer_offsets``.

Callers are the :class:`~eoslog.coordinator.group.coordinator.GroupCoordinator` on the broker's one
event loop; time is always passed in (``now_ms``). Methods take an :class:`Effects` collecting the
pending calls they answered and the group records they need written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.log_format import GroupMetadataValue, MemberRecord
from eoslog.coordinator.group.member import (
    MemberMetadata,
    Protocols,
    candidate_protocols,
    select_protocol,
    subscribed_topics,
)
from eoslog.coordinator.group.results import (
    Completion,
    DescribedMember,
    Effects,
    GroupDescription,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupResponse,
    MemberLeaveResult,
    Pending,
    StoreGroup,
    SyncGroupResponse,
)
from eoslog.coordinator.group.state import GroupState, check_transition

S = GroupState
CONSUMER_PROTOCOL_TYPE = "consumer"


def _ignore_store_result(error: Errors | None, now_ms: int, fx: Effects) -> None:
    # The record of an empty generation only matters after a restart; a failed append leaves the
    # previous record, which loads as the same Empty group with an older generation.
    return None


class ClassicGroup:
    def __init__(self, group_id: str, config: GroupConfig, now_ms: int, *,
                 new_token: Callable[[], int], new_member_id: Callable[[str], str]) -> None:
        self.group_id = group_id
        self.config = config
        self.state = S.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}  # in join order
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # member id -> deadline to rejoin with it
        self.pending_sync: set[str] = set()  # members yet to send SyncGroup this generation
        self.join_deadline_ms: int | None = None
        self.sync_deadline_ms: int | None = None
        self._in_initial_delay = False
        self._initial_delay_remaining_ms = 0
        self._new_member_added = False
        self._store_in_flight: int | None = None  # generation whose assignment is being written
        self._new_token = new_token
        self._new_member_id = new_member_id

    # ------------------------------------------------------------------------------------------------
    # Loading and persisting

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, config: GroupConfig, now_ms: int, *,
                    new_token: Callable[[], int], new_member_id: Callable[[str], str]) -> ClassicGroup:
        """A group as a loaded GroupMetadataValue describes it: Stable with members, else Empty."""
        group = cls(group_id, config, now_ms, new_token=new_token, new_member_id=new_member_id)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        if value.current_state_timestamp >= 0:
            group.state_timestamp_ms = value.current_state_timestamp
        for m in value.members:
            protocols = ((value.protocol, m.subscription),) if value.protocol is not None else ()
            member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    m.rebalance_timeout, m.session_timeout, value.protocol_type,
                                    protocols, assignment=m.assignment,
                                    heartbeat_deadline_ms=now_ms + m.session_timeout)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        if group.members:
            group.state = S.STABLE  # loading is not a transition: the log says where the group was
        return group

    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        records = []
        for m in self.members.values():
            records.append(MemberRecord(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(self.protocol_name) if self.protocol_name is not None else b"",
                assignments.get(m.member_id, b"") if assignments is not None else m.assignment))
        return GroupMetadataValue(self.protocol_type or "", self.generation_id, self.protocol_name,
                                  self.leader_id, self.state_timestamp_ms, tuple(records))

    # ------------------------------------------------------------------------------------------------
    # Views

    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        candidates = candidate_protocols(list(self.members.values()))
        return any(name in candidates for name, _ in protocols)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members consume, or None when unknown (then every topic counts as consumed)."""
        if not self.members:
            return set()
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                member_topics = subscribed_topics(m.metadata(self.protocol_name))
            except KeyError:
                return None
            if member_topics is None:
                return None
            topics |= member_topics
        return topics

    def describe(self) -> GroupDescription:
        stable = self.state is S.STABLE and self.protocol_name is not None
        members = tuple(
            DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.metadata(self.protocol_name) if stable else b"",
                            m.assignment if stable else b"")
            for m in self.members.values())
        return GroupDescription(self.group_id, Errors.NONE, self.state.kafka_name,
                                self.protocol_type or "", self.protocol_name if stable else "", members)

    def next_deadline(self) -> int | None:
        deadlines = [m.heartbeat_deadline_ms for m in self.members.values()]
        deadlines.extend(self.pending_members.values())
        if self.state is S.PREPARING_REBALANCE and self.join_deadline_ms is not None:
            deadlines.append(self.join_deadline_ms)
        if self.pending_sync and self.sync_deadline_ms is not None:
            deadlines.append(self.sync_deadline_ms)
        return min(deadlines, default=None)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> Errors:
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is None:
                return Errors.UNKNOWN_MEMBER_ID
            if known != member_id:
                return Errors.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return Errors.UNKNOWN_MEMBER_ID
        return Errors.NONE

    def validate_offset_commit(self, member_id: str, generation_id: int, group_instance_id: str | None,
                               transactional: bool) -> Errors:
        """OffsetCommit / TxnOffsetCommit (KIP-447) fencing of a commit against this group. A negative
        generation into an Empty group is a commit from outside group management and is accepted
        whatever member id it names (Kafka's ClassicGroup.validateOffsetCommit): librdkafka gives a
        consumer that only used ``assign()`` a member id of its own (KIP-1082)."""
        if self.state is S.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is S.EMPTY:
            return Errors.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self.validate_member(member_id, group_instance_id)
            if error is not Errors.NONE:
                return error
            if generation_id != self.generation_id:
                return Errors.ILLEGAL_GENERATION
        elif not transactional and self.state is not S.EMPTY:
            # A commit without group management into a group that has members would race them.
            return Errors.UNKNOWN_MEMBER_ID
        if not transactional and self.state is S.COMPLETING_REBALANCE:
            # The member has its join response but not its assignment yet; it retries after sync.
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def touch(self, member_id: str, now_ms: int) -> None:
        """A sign of life from a member (heartbeat, offset commit)."""
        member = self.members.get(member_id)
        if member is not None:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

    # ------------------------------------------------------------------------------------------------
    # JoinGroup

    def join_group(self, req: JoinGroupRequest, now_ms: int,
                   fx: Effects) -> JoinGroupResponse | Pending:
        if self.state is S.DEAD:
            # Being deleted or unloaded: the client looks the coordinator up again and retries.
            return JoinGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE, member_id=req.member_id)
        if not self.supports_protocols(req.protocol_type, req.protocols):
            return JoinGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
        if req.member_id == "":
            return self._join_new_member(req, now_ms, fx)
        return self._join_existing_member(req, now_ms, fx)

    def _join_new_member(self, req: JoinGroupRequest, now_ms: int,
                         fx: Effects) -> JoinGroupResponse | Pending:
        if req.group_instance_id is not None and req.group_instance_id in self.static_members:
            return self._join_known_static_member(req, now_ms, fx)
        if self.config.max_size is not None and \
                len(self.members) + len(self.pending_members) >= self.config.max_size:
            return JoinGroupResponse(Errors.GROUP_MAX_SIZE_REACHED)
        member_id = self._new_member_id(req.client_id)
        if req.group_instance_id is None and req.require_known_member_id:
            # KIP-394: hand out the id first, so a client that times out and retries does not leave
            # an orphan member behind for the session timeout to clean up.
            self.pending_members[member_id] = now_ms + req.session_timeout_ms
            return JoinGroupResponse(Errors.MEMBER_ID_REQUIRED, member_id=member_id)
        return self._add_member_and_rebalance(req, member_id, now_ms, fx)

    def _join_existing_member(self, req: JoinGroupRequest, now_ms: int,
                              fx: Effects) -> JoinGroupResponse | Pending:
        if req.member_id in self.pending_members and req.group_instance_id is None:
            del self.pending_members[req.member_id]
            return self._add_member_and_rebalance(req, req.member_id, now_ms, fx)
        error = self.validate_member(req.member_id, req.group_instance_id)
        if error is not Errors.NONE:
            return JoinGroupResponse(error, member_id=req.member_id)
        member = self.members[req.member_id]
        if self.state is S.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(member, req, now_ms, fx)
        if self.state is S.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # The member lost our join response: give it the current generation again.
                return self._join_response(member)
            return self._update_member_and_rebalance(member, req, now_ms, fx)
        if self.state is S.STABLE:
            if self.leader_id == member.member_id or not member.matches(req.protocols):
                # A leader rejoining asks for a new assignment (e.g. its topics' partitions changed).
                return self._update_member_and_rebalance(member, req, now_ms, fx)
            return self._join_response(member)
        return JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID, member_id=req.member_id)

    def _join_known_static_member(self, req: JoinGroupRequest, now_ms: int,
                                  fx: Effects) -> JoinGroupResponse | Pending:
        """A restarted static member: it takes over its instance's slot under a new member id."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        old_id = self.static_members[instance_id]
        old = self.members[old_id]
        new_id = self._new_member_id(req.client_id)
        pending = Pending(self._new_token(), "join_group", self.group_id, new_id)
        if self.state is not S.STABLE or not old.matches(req.protocols):
            self._replace_static_member(old_id, new_id, req, now_ms, fx)
            self._rejoin(self.members[new_id], req, pending, now_ms, fx)
            return pending
        # Same subscription in a Stable group: no rebalance. The new member id is persisted first,
        # and only then does it replace the old one (prepare -> log -> apply).
        generation = self.generation_id
        value = self.to_record()
        value = dataclasses.replace(value, members=tuple(
            dataclasses.replace(m, member_id=new_id, client_id=req.client_id, client_host=req.client_host,
                                rebalance_timeout=req.rebalance_timeout_ms,
                                session_timeout=req.session_timeout_ms) if m.member_id == old_id else m
            for m in value.members),
            leader=new_id if value.leader == old_id else value.leader)

        def on_done(error: Errors | None, now: int, fx2: Effects) -> None:
            if error is not None and error is not Errors.NONE:
                self._complete(fx2, pending, JoinGroupResponse(error, member_id=""))
                return
            if self.static_members.get(instance_id) != old_id:
                # Another process with the same group.instance.id got there first.
                self._complete(fx2, pending, JoinGroupResponse(Errors.FENCED_INSTANCE_ID, member_id=new_id))
                return
            previous_leader = self.leader_id
            member = self._replace_static_member(old_id, new_id, req, now, fx2)
            if self.state is S.STABLE and self.generation_id == generation and member.matches(req.protocols):
                self._complete(fx2, pending, self._static_rejoin_response(member, previous_leader, req))
            else:  # the group moved on while we were writing: join the rebalance like anyone else
                self._rejoin(member, req, pending, now, fx2)

        fx.stores.append(StoreGroup(self.group_id, value, on_done))
        return pending

    def _static_rejoin_response(self, member: MemberMetadata, previous_leader: str | None,
                                req: JoinGroupRequest) -> JoinGroupResponse:
        if req.supports_skip_assignment and self.leader_id == member.member_id:
            # KIP-814: the leader learns the members but must not compute a new assignment.
            return dataclasses.replace(self._join_response(member), skip_assignment=True)
        # Older clients: answer with the previous leader id so a restarted leader does not think it
        # leads and assign partitions that a Stable group would never hand out.
        return JoinGroupResponse(Errors.NONE, self.generation_id, self.protocol_type, self.protocol_name,
                                 previous_leader or "", False, member.member_id, ())

    def _add_member_and_rebalance(self, req: JoinGroupRequest, member_id: str, now_ms: int,
                                  fx: Effects) -> Pending:
        member = MemberMetadata(member_id, req.group_instance_id, req.client_id, req.client_host,
                                req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                                tuple(req.protocols), is_new=True,
                                heartbeat_deadline_ms=now_ms + self.config.new_member_join_timeout_ms)
        if not self.members:
            self.protocol_type = req.protocol_type
        self.members[member_id] = member
        if req.group_instance_id is not None:
            self.static_members[req.group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        self._new_member_added = True
        pending = Pending(self._new_token(), "join_group", self.group_id, member_id)
        member.awaiting_join = pending
        self._maybe_prepare_rebalance_or_complete_join(now_ms, fx)
        return pending

    def _update_member_and_rebalance(self, member: MemberMetadata, req: JoinGroupRequest, now_ms: int,
                                     fx: Effects) -> Pending:
        pending = Pending(self._new_token(), "join_group", self.group_id, member.member_id)
        self._rejoin(member, req, pending, now_ms, fx)
        return pending

    def _rejoin(self, member: MemberMetadata, req: JoinGroupRequest, pending: Pending, now_ms: int,
                fx: Effects) -> None:
        member.set_protocols(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        if member.awaiting_join is not None:  # a retry replaces the earlier call
            self._complete(fx, member.awaiting_join,
                           JoinGroupResponse(Errors.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.awaiting_join = pending
        if not member.is_new:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        self._maybe_prepare_rebalance_or_complete_join(now_ms, fx)

    def _replace_static_member(self, old_id: str, new_id: str, req: JoinGroupRequest, now_ms: int,
                               fx: Effects) -> MemberMetadata:
        member = self.members.pop(old_id)
        # The old process (if alive) is fenced at once rather than left waiting.
        if member.awaiting_join is not None:
            self._complete(fx, member.awaiting_join,
                           JoinGroupResponse(Errors.FENCED_INSTANCE_ID, member_id=old_id))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            self._complete(fx, member.awaiting_sync, SyncGroupResponse(Errors.FENCED_INSTANCE_ID))
            member.awaiting_sync = None
        member.member_id = new_id
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.heartbeat_deadline_ms = now_ms + req.session_timeout_ms
        self.members[new_id] = member
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def _join_response(self, member: MemberMetadata) -> JoinGroupResponse:
        assert self.protocol_name is not None
        members: tuple[JoinGroupMember, ...] = ()
        if member.member_id == self.leader_id:
            members = tuple(JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                            for m in self.members.values())
        return JoinGroupResponse(Errors.NONE, self.generation_id, self.protocol_type, self.protocol_name,
                                 self.leader_id or "", False, member.member_id, members)

    # ------------------------------------------------------------------------------------------------
    # The join barrier

    def rebalance(self, now_ms: int, fx: Effects) -> None:
        """Every member must rejoin (a group just converted back from a consumer group, whose members'
        assignments were the consumer group's)."""
        self._prepare_rebalance(now_ms, fx)

    def _maybe_prepare_rebalance_or_complete_join(self, now_ms: int, fx: Effects) -> None:
        if self.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(now_ms, fx)
        elif self.state is S.PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms, fx)

    def _prepare_rebalance(self, now_ms: int, fx: Effects) -> None:
        if self.state is S.COMPLETING_REBALANCE:
            self._reset_and_propagate_error(Errors.REBALANCE_IN_PROGRESS, fx)
        self.pending_sync.clear()
        self.sync_deadline_ms = None
        was_empty = self.state is S.EMPTY
        self._transition(S.PREPARING_REBALANCE, now_ms)
        timeout = self.rebalance_timeout_ms()
        delay = self.config.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            self._in_initial_delay = True
            self._new_member_added = False
            self.join_deadline_ms = now_ms + min(delay, timeout)
            self._initial_delay_remaining_ms = max(timeout - delay, 0)
        else:
            self._in_initial_delay = False
            self.join_deadline_ms = now_ms + timeout
            self._maybe_complete_join(now_ms, fx)

    def _all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join is not None for m in self.members.values())

    def _maybe_complete_join(self, now_ms: int, fx: Effects) -> None:
        if self.state is S.PREPARING_REBALANCE and not self._in_initial_delay and self._all_members_joined():
            self._complete_join(now_ms, fx)

    def _complete_join(self, now_ms: int, fx: Effects) -> None:
        self.join_deadline_ms = None
        self._in_initial_delay = False
        for member in list(self.members.values()):
            if member.awaiting_join is None:  # the rebalance timeout passed without it
                self._remove_member(member, fx)
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self.leader_id = None
            self._transition(S.EMPTY, now_ms)
            fx.stores.append(StoreGroup(self.group_id, self.to_record(), _ignore_store_result))
            return
        self.protocol_name = select_protocol(list(self.members.values()))
        self._transition(S.COMPLETING_REBALANCE, now_ms)
        for member in self.members.values():
            pending = member.awaiting_join
            assert pending is not None
            member.awaiting_join = None
            member.is_new = False
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            self._complete(fx, pending, self._join_response(member))
        # Members that never send SyncGroup must not stall the others forever.
        self.pending_sync = set(self.members)
        self.sync_deadline_ms = now_ms + self.rebalance_timeout_ms()

    # ------------------------------------------------------------------------------------------------
    # SyncGroup

    def sync_group(self, member_id: str, generation_id: int, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
                   now_ms: int, fx: Effects) -> SyncGroupResponse | Pending:
        if self.state is S.DEAD:
            return SyncGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE)
        error = self.validate_member(member_id, group_instance_id)
        if error is not Errors.NONE:
            return SyncGroupResponse(error)
        if generation_id != self.generation_id:
            return SyncGroupResponse(Errors.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != self.protocol_type) or \
                (protocol_name is not None and protocol_name != self.protocol_name):
            return SyncGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL)
        member = self.members[member_id]
        if self.state is S.PREPARING_REBALANCE:
            return SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS)
        if self.state is S.STABLE:
            self._synced(member_id)
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            return SyncGroupResponse(Errors.NONE, self.protocol_type, self.protocol_name, member.assignment)
        if self.state is not S.COMPLETING_REBALANCE:
            return SyncGroupResponse(Errors.UNKNOWN_MEMBER_ID)
        pending = Pending(self._new_token(), "sync_group", self.group_id, member_id)
        if member.awaiting_sync is not None:
            self._complete(fx, member.awaiting_sync, SyncGroupResponse(Errors.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = pending
        self._synced(member_id)
        if member_id == self.leader_id and self._store_in_flight != self.generation_id:
            self._store_assignment(assignments, fx)
        return pending

    def _synced(self, member_id: str) -> None:
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self.sync_deadline_ms = None

    def _store_assignment(self, assignments: dict[str, bytes], fx: Effects) -> None:
        generation = self.generation_id
        proposed = {member_id: bytes(assignments.get(member_id, b"")) for member_id in self.members}
        self._store_in_flight = generation

        def on_done(error: Errors | None, now_ms: int, fx2: Effects) -> None:
            if self._store_in_flight == generation:
                self._store_in_flight = None
            if self.state is not S.COMPLETING_REBALANCE or self.generation_id != generation:
                return  # a new rebalance began meanwhile and already answered the waiting members
            if error is not None and error is not Errors.NONE:
                self._reset_and_propagate_error(error, fx2)
                self._prepare_rebalance(now_ms, fx2)
                return
            for member in self.members.values():
                member.assignment = proposed.get(member.member_id, b"")
                if member.awaiting_sync is not None:
                    self._complete(fx2, member.awaiting_sync,
                                   SyncGroupResponse(Errors.NONE, self.protocol_type, self.protocol_name,
                                                     member.assignment))
                    member.awaiting_sync = None
                    member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            self._transition(S.STABLE, now_ms)

        fx.stores.append(StoreGroup(self.group_id, self.to_record(proposed), on_done))

    def _reset_and_propagate_error(self, error: Errors, fx: Effects) -> None:
        for member in self.members.values():
            member.assignment = b""
            if member.awaiting_sync is not None:
                self._complete(fx, member.awaiting_sync, SyncGroupResponse(error))
                member.awaiting_sync = None

    # ------------------------------------------------------------------------------------------------
    # Heartbeat and LeaveGroup

    def heartbeat(self, member_id: str, generation_id: int, group_instance_id: str | None,
                  now_ms: int) -> HeartbeatResponse:
        if self.state is S.DEAD:
            return HeartbeatResponse(Errors.COORDINATOR_NOT_AVAILABLE)
        error = self.validate_member(member_id, group_instance_id)
        if error is not Errors.NONE:
            return HeartbeatResponse(error)
        if generation_id != self.generation_id:
            return HeartbeatResponse(Errors.ILLEGAL_GENERATION)
        if self.state is S.EMPTY:
            return HeartbeatResponse(Errors.UNKNOWN_MEMBER_ID)
        self.touch(member_id, now_ms)
        if self.state is S.PREPARING_REBALANCE:
            return HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS)
        # COMPLETING_REBALANCE too: a member may heartbeat between its join response and its sync.
        return HeartbeatResponse(Errors.NONE)

    def leave_group(self, members: list[tuple[str, str | None]], now_ms: int,
                    fx: Effects) -> LeaveGroupResponse:
        """LeaveGroup v3+ batch; v0-2 send one member and take its error as the top-level one."""
        if self.state is S.DEAD:
            return LeaveGroupResponse(Errors.COORDINATOR_NOT_AVAILABLE)
        results = []
        for member_id, instance_id in members:
            error = Errors.NONE
            if member_id == "" and instance_id is not None:
                # KIP-345 admin removal of a static member by its instance id.
                known = self.static_members.get(instance_id)
                if known is None:
                    error = Errors.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member_and_update_group(self.members[known], now_ms, fx)
            elif member_id in self.pending_members and instance_id is None:
                del self.pending_members[member_id]
                self._maybe_complete_join(now_ms, fx)
            else:
                error = self.validate_member(member_id, instance_id)
                if error is Errors.NONE:
                    self._remove_member_and_update_group(self.members[member_id], now_ms, fx)
            results.append(MemberLeaveResult(member_id, instance_id, error))
        return LeaveGroupResponse(Errors.NONE, tuple(results))

    # ------------------------------------------------------------------------------------------------
    # Timers

    def tick(self, now_ms: int, fx: Effects) -> None:
        # A few passes: one expiry can arm another deadline that has already passed (for example a
        # completed barrier whose sync deadline is "now" under a zero rebalance timeout).
        for _ in range(8):
            deadline = self.next_deadline()
            if deadline is None or deadline > now_ms:
                return
            self._expire(now_ms, fx)

    def _expire(self, now_ms: int, fx: Effects) -> None:
        if self.state is S.PREPARING_REBALANCE and self.join_deadline_ms is not None \
                and self.join_deadline_ms <= now_ms:
            if self._in_initial_delay and self._new_member_added and self._initial_delay_remaining_ms > 0:
                # Members are still arriving: wait another delay, within the rebalance timeout.
                step = min(self.config.initial_rebalance_delay_ms, self._initial_delay_remaining_ms)
                self._initial_delay_remaining_ms -= step
                self._new_member_added = False
                self.join_deadline_ms = now_ms + step
            else:
                self._complete_join(now_ms, fx)
        if self.pending_sync and self.sync_deadline_ms is not None and self.sync_deadline_ms <= now_ms:
            self.sync_deadline_ms = None
            if self.state in (S.COMPLETING_REBALANCE, S.STABLE):
                for member_id in sorted(self.pending_sync):
                    member = self.members.get(member_id)
                    if member is not None:
                        self._remove_member(member, fx)
                self.pending_sync.clear()
                self._prepare_rebalance(now_ms, fx)
        for member_id, deadline in list(self.pending_members.items()):
            if deadline <= now_ms:
                del self.pending_members[member_id]
                self._maybe_complete_join(now_ms, fx)
        for member in list(self.members.values()):
            if member.member_id not in self.members or member.heartbeat_deadline_ms > now_ms:
                continue
            waiting = member.awaiting_join is not None or member.awaiting_sync is not None
            if waiting and not member.is_new:
                # Members waiting in a barrier are alive by definition; the barrier has its own timer.
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            else:
                self._remove_member_and_update_group(member, now_ms, fx)

    # ------------------------------------------------------------------------------------------------
    # Membership primitives

    def _remove_member_and_update_group(self, member: MemberMetadata, now_ms: int, fx: Effects) -> None:
        self._remove_member(member, fx)
        if self.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms, fx)
        elif self.state is S.PREPARING_REBALANCE:
            self._maybe_complete_join(now_ms, fx)

    def _remove_member(self, member: MemberMetadata, fx: Effects) -> None:
        if member.awaiting_join is not None:
            self._complete(fx, member.awaiting_join, JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            self._complete(fx, member.awaiting_sync, SyncGroupResponse(Errors.UNKNOWN_MEMBER_ID))
            member.awaiting_sync = None
        del self.members[member.member_id]
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member.member_id:
            del self.static_members[member.group_instance_id]
        self._synced(member.member_id)
        if self.leader_id == member.member_id:
            # Prefer a member already waiting in the barrier: the leader must get a join response.
            joined = [m for m in self.members.values() if m.awaiting_join is not None]
            candidates = joined or list(self.members.values())
            self.leader_id = candidates[0].member_id if candidates else None

    def _transition(self, to_state: GroupState, now_ms: int) -> None:
        check_transition(self.state, to_state, self.group_id)
        self.state = to_state
        self.state_timestamp_ms = now_ms

    def unload(self, fx: Effects) -> None:
        """This broker stops coordinating the group (its partition is led elsewhere now): every member's
        waiting JoinGroup or SyncGroup is answered NOT_COORDINATOR, as Kafka's onGroupUnloaded does, so
        the client finds the new coordinator at once instead of waiting out its request timeout (a
        JoinGroup's is the rebalance timeout, 5 minutes by default)."""
        for member in self.members.values():
            if member.awaiting_join is not None:
                self._complete(fx, member.awaiting_join,
                               JoinGroupResponse(Errors.NOT_COORDINATOR, member_id=member.member_id))
                member.awaiting_join = None
            if member.awaiting_sync is not None:
                self._complete(fx, member.awaiting_sync, SyncGroupResponse(Errors.NOT_COORDINATOR))
                member.awaiting_sync = None

    def mark_dead(self, now_ms: int) -> None:
        self._transition(S.DEAD, now_ms)

    def revive(self, now_ms: int) -> None:
        """Undo :meth:`mark_dead` when the tombstones could not be written (see the coordinator)."""
        assert self.state is S.DEAD
        self.state = S.EMPTY
        self.state_timestamp_ms = now_ms

    def _complete(self, fx: Effects, pending: Pending, response: object) -> None:
        fx.completed.append(Completion(pending.token, pending.api, pending.group_id, pending.member_id,
                                       response))
