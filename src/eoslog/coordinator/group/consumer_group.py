"""A consumer group (KIP-848, ``group.protocol=consumer``): epochs, members, target assignment.

Contract
- Owns its members, the group epoch, the target assignment and its epoch, and which member holds each
  partition (assigned or pending revocation). Called by :class:`~.consumer_coordinator.ConsumerGroups`
  only, on the broker's event loop; no I/O.
- Always true: ``assignment_epoch <= group_epoch``; a partition is held by at most one member; a member
  is given a partition only when no other member holds it (see consumer_member.reconcile).
- The group epoch moves on every change that can change the target (member joins or leaves, new
  subscription or assignor, a subscribed topic's partition count); the target is recomputed on the next
  heartbeat, with the assignor most members ask for (ties: the first in ``group.consumer.assignors``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from eoslog.coordinator.group.assignors import ASSIGNORS, Assignment
from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.consumer_member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerMember,
    reconcile,
    tps,
)
from eoslog.coordinator.group.consumer_state import ConsumerGroupState, MemberState, check_group_transition
from eoslog.coordinator.group.errors import Errors

G = ConsumerGroupState


@dataclass(frozen=True)
class ConsumerHeartbeat:
    """A ConsumerGroupHeartbeat, topic ids already turned into names (unknown ids dropped)."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    # Whether the member's principal may DESCRIBE a topic (None: no authorizer, every topic). A regex
    # only ever resolves to topics this allows (KAFKA-18813).
    may_describe: Callable[[str], bool] | None = None
    principal: str | None = None  # whose rights may_describe checks (None without an authorizer)


@dataclass(frozen=True)
class ConsumerHeartbeatResponse:
    error: Errors
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def compile_regex(regex: str) -> re.Pattern[str]:
    """KIP-848 regexes are RE2; their common subset (classes, alternation, repetition) is Python's too.
    A subscription matches a topic when the whole name matches, as with RE2's FullMatch."""
    return re.compile(regex)


class ConsumerGroup:
    def __init__(self, group_id: str, config: GroupConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, int] = {}  # subscribed topic -> partition count
        self.owners: dict[tuple[str, int], str] = {}
        self.state = G.EMPTY
        # Member ids handed to classic JoinGroups with MEMBER_ID_REQUIRED, until when they may come
        # back with them (their session timeout). Not persisted: after a restart such a JoinGroup is
        # UNKNOWN_MEMBER_ID and the client starts over.
        self.classic_pending: dict[str, int] = {}

    # ---- views ---------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.members

    def preferred_assignor(self) -> str:
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        default = self.config.consumer_assignors[0]
        if not votes:
            return default
        best = max(votes.values())
        for name in self.config.consumer_assignors:
            if votes.get(name) == best:
                return name
        return default

    def subscribed_topics(self, member: ConsumerMember, topics: Mapping[str, int]) -> frozenset[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            if member.regex_topics is None:
                # Not resolved with its principal since the group was loaded: only what it already had
                # (given under its rights then), until its own heartbeat resolves the regex again.
                pattern = compile_regex(member.subscribed_topic_regex)
                held = set(member.assigned) | set(member.pending_revocation) | set(self.target.get(member.member_id, {}))
                names.update(t for t in held if t in topics and pattern.fullmatch(t))
            else:
                names.update(t for t in member.regex_topics if t in topics)
        return frozenset(names)

    def resolve_regex(self, member: ConsumerMember, topics: Mapping[str, int],
                      may_describe: Callable[[str], bool] | None, principal: str | None = None) -> bool:
        """Matches the member's regex against ``topics``, keeping those its principal may describe;
        True if that changes what the member is subscribed to (a new group epoch)."""
        before = self.subscribed_topics(member, topics)
        if member.subscribed_topic_regex:
            pattern = compile_regex(member.subscribed_topic_regex)
            member.regex_topics = frozenset(t for t in topics if pattern.fullmatch(t)
                                            and (may_describe is None or may_describe(t)))
        else:
            member.regex_topics = frozenset()
        # whose rights resolved it: "" without an authorizer, None when rights were checked for an
        # unnamed principal (then it is never shared)
        member.regex_principal = "" if may_describe is None else principal
        return self.subscribed_topics(member, topics) != before

    def resolve_regexes(self, member: ConsumerMember, topics: Mapping[str, int],
                        may_describe: Callable[[str], bool] | None, principal: str | None) -> bool:
        """The heartbeating member's regex, and those of the other members last resolved for the same
        principal (the same rights, so the same answer): resolved together, as Kafka resolves a group's
        regexes for the whole group, so that new matches reach every member in one assignment round
        instead of all going to the first member to heartbeat and half coming back later. A member of
        another principal keeps its own resolution until its own heartbeat. True for a new group epoch."""
        changed = self.resolve_regex(member, topics, may_describe, principal)
        rights = member.regex_principal
        if rights is None:
            return changed
        for other in self.members.values():
            if other is not member and other.subscribed_topic_regex and other.regex_topics is not None \
                    and other.regex_principal == rights:
                changed |= self.resolve_regex(other, topics, may_describe, principal)
        return changed

    def topics_in_use(self) -> set[str]:
        """Every topic a member subscribes to, by name or through its regex as last resolved (Kafka's
        isSubscribedToTopic): the offsets of other topics may expire."""
        out: set[str] = set()
        for member in self.members.values():
            out.update(member.subscribed_topic_names, member.regex_topics or ())
            # and what it holds or is meant to (all a regex stands for until re-resolved after a load)
            out.update(member.assigned, member.pending_revocation, self.target.get(member.member_id, ()))
        return out

    def all_subscribed_topics(self, topics: Mapping[str, int]) -> set[str]:
        out: set[str] = set()
        for member in self.members.values():
            out |= self.subscribed_topics(member, topics)
        return out

    def mark_dead(self) -> None:
        """DeleteGroups of this (empty) group; undone by :meth:`refresh_state` if its tombstones fail."""
        check_group_transition(self.group_id, self.state, G.DEAD)
        self.state = G.DEAD

    def refresh_state(self) -> None:
        if not self.members:
            new = G.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            new = G.ASSIGNING
        elif any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
                 for m in self.members.values() if m.member_epoch != STATIC_LEAVE_EPOCH):
            new = G.RECONCILING
        else:
            new = G.STABLE
        check_group_transition(self.group_id, self.state, new)
        self.state = new

    # ---- heartbeat -----------------------------------------------------------------------------

    def heartbeat(self, req: ConsumerHeartbeat, topics: Mapping[str, int], now_ms: int,
                  new_member_id: Callable[[], str]) -> ConsumerHeartbeatResponse:
        """``topics``: every non-internal topic with its partition count (for regexes and assignors)."""
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            return self._error(Errors.UNSUPPORTED_ASSIGNOR, req,
                               f"assignor {req.server_assignor!r} is not one of {list(self.config.consumer_assignors)}")
        if req.subscribed_topic_regex:
            try:
                compile_regex(req.subscribed_topic_regex)
            except re.error as e:
                return self._error(Errors.INVALID_REGULAR_EXPRESSION, req, f"SubscribedTopicRegex "
                                   f"{req.subscribed_topic_regex!r} is not a valid regular expression: {e}")
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req, now_ms)
        bump = False
        if req.member_epoch == JOIN_EPOCH:
            member_or_error = self._join(req, new_member_id)
            if isinstance(member_or_error, ConsumerHeartbeatResponse):
                return member_or_error
            member, bump = member_or_error
        else:
            member = self.members.get(req.member_id)
            if member is None or member.member_epoch == STATIC_LEAVE_EPOCH:
                return self._error(Errors.UNKNOWN_MEMBER_ID, req, f"member {req.member_id} is not in the group")
            if req.instance_id is not None and req.instance_id != member.instance_id:
                return self._error(Errors.FENCED_INSTANCE_ID, req, "the instance id belongs to another member")
            if not self._epoch_accepted(member, req):
                return self._error(Errors.FENCED_MEMBER_EPOCH, req,
                                   f"epoch {req.member_epoch}; the member is at {member.member_epoch}")
        bump |= self._update_member(member, req)
        bump |= self.resolve_regexes(member, topics, req.may_describe, req.principal)
        self.advance(topics, bump)
        self.reconcile_member(member, req.owned, now_ms)
        member.session_deadline_ms = now_ms + self.config.consumer_session_timeout_ms
        self.refresh_state()
        return ConsumerHeartbeatResponse(Errors.NONE, None, member.member_id, member.member_epoch,
                                         self.config.consumer_heartbeat_interval_ms, dict(member.assigned))

    def _error(self, error: Errors, req: ConsumerHeartbeat, message: str) -> ConsumerHeartbeatResponse:
        return ConsumerHeartbeatResponse(error, message, req.member_id or None, -1, 0, None)

    def _epoch_accepted(self, member: ConsumerMember, req: ConsumerHeartbeat) -> bool:
        if req.member_epoch == member.member_epoch:
            return True
        # The answer that moved the member to its current epoch may have been lost: the previous epoch
        # is accepted once more, if the client owns nothing it was not given (Kafka's rule).
        return (req.member_epoch == member.previous_member_epoch and req.owned is not None
                and tps(req.owned) <= tps(member.assigned))

    def _join(self, req: ConsumerHeartbeat,
              new_member_id: Callable[[], str]) -> tuple[ConsumerMember, bool] | ConsumerHeartbeatResponse:
        if req.instance_id is not None:
            holder = next((m for m in self.members.values() if m.instance_id == req.instance_id), None)
            if holder is not None and holder.member_id != req.member_id:
                if holder.member_epoch != STATIC_LEAVE_EPOCH:
                    return self._error(Errors.UNRELEASED_INSTANCE_ID, req,
                                       f"instance id {req.instance_id} is still held by member {holder.member_id}")
                self.replace_static_member(holder, req.member_id or new_member_id())
                return holder, False
        member = self.members.get(req.member_id) if req.member_id else None
        if member is None:
            member = ConsumerMember(req.member_id or new_member_id(), instance_id=req.instance_id)
            self.members[member.member_id] = member
            return member, True
        # A known member joining again (it was fenced, or restarted with its id): it owns what it says,
        # everything else it held is released now.
        owned = tps(req.owned or {})
        self.set_assignment(member, MemberState.STABLE, 0, 0,
                             {t: frozenset(p for p in ps if (t, p) in owned) for t, ps in member.assigned.items()}, {})
        return member, False

    def replace_static_member(self, holder: ConsumerMember, member_id: str) -> None:
        """A static member came back (KIP-345/848): the new member id takes over the old one's partitions
        and epoch, without a new group epoch (no rebalance)."""
        old_id = holder.member_id
        del self.members[old_id]
        holder.member_id = member_id
        if holder.member_epoch == STATIC_LEAVE_EPOCH:
            holder.member_epoch = holder.previous_member_epoch
        self.members[member_id] = holder
        self.target[member_id] = self.target.pop(old_id, {})
        for tp, owner in list(self.owners.items()):
            if owner == old_id:
                self.owners[tp] = member_id

    def _update_member(self, member: ConsumerMember, req: ConsumerHeartbeat) -> bool:
        changed = False
        if req.subscribed_topic_names is not None and tuple(sorted(req.subscribed_topic_names)) != \
                member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(sorted(req.subscribed_topic_names))
            changed = True
        if req.subscribed_topic_regex is not None and (req.subscribed_topic_regex or None) != \
                member.subscribed_topic_regex:
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
            changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        if req.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.client_id:
            member.client_id = req.client_id
        if req.client_host:
            member.client_host = req.client_host
        return changed

    def advance(self, topics: Mapping[str, int], bump: bool) -> None:
        """A new group epoch if ``bump`` or a subscribed topic changed size; the target for it if not
        computed yet."""
        metadata = {t: topics[t] for t in sorted(self.all_subscribed_topics(topics)) if t in topics}
        if metadata != self.subscription_metadata:
            self.subscription_metadata = metadata
            bump = True
        if bump:
            self.group_epoch += 1
        if self.group_epoch > self.assignment_epoch:
            self._compute_target(topics)

    def _compute_target(self, topics: Mapping[str, int]) -> None:
        live = {m.member_id: self.subscribed_topics(m, topics) for m in self.members.values()}
        assignor = ASSIGNORS[self.preferred_assignor()]
        self.target = assignor(live, self.subscription_metadata, self.target)
        self.assignment_epoch = self.group_epoch

    def reconcile_member(self, member: ConsumerMember, owned: Assignment | None, now_ms: int) -> None:
        result = reconcile(member, self.assignment_epoch, self.target.get(member.member_id, {}), owned,
                           self.owners.get)
        self.set_assignment(member, result.state, result.member_epoch, result.previous_member_epoch,
                             result.assigned, result.pending_revocation)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.revocation_deadline_ms is None:
                member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
        else:
            member.revocation_deadline_ms = None

    def set_assignment(self, member: ConsumerMember, state: MemberState, epoch: int, previous: int,
                        assigned: Assignment, pending: Assignment) -> None:
        for tp in tps(member.assigned) | tps(member.pending_revocation):
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]
        member.state, member.member_epoch, member.previous_member_epoch = state, epoch, previous
        member.assigned = {t: ps for t, ps in assigned.items() if ps}
        member.pending_revocation = {t: ps for t, ps in pending.items() if ps}
        held = tps(member.assigned) | tps(member.pending_revocation)
        member.partition_epochs = {tp: member.partition_epochs.get(tp, epoch) for tp in held}
        for tp in held:
            self.owners[tp] = member.member_id

    # ---- leaving and timeouts ------------------------------------------------------------------

    def _leave(self, req: ConsumerHeartbeat, now_ms: int) -> ConsumerHeartbeatResponse:
        member = self.members.get(req.member_id)
        if member is None:
            return self._error(Errors.UNKNOWN_MEMBER_ID, req, f"member {req.member_id} is not in the group")
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Keeps its partitions (nobody else gets them) until it comes back or its session ends.
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            member.session_deadline_ms = now_ms + self.config.consumer_session_timeout_ms
        else:
            self.remove_member(member.member_id)
        self.refresh_state()
        return ConsumerHeartbeatResponse(Errors.NONE, None, req.member_id, req.member_epoch, 0, None)

    def remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        self.set_assignment(member, MemberState.STABLE, member.member_epoch, member.previous_member_epoch, {}, {})
        self.target.pop(member_id, None)
        self.group_epoch += 1
        self.refresh_state()

    def next_deadline(self) -> int | None:
        deadlines = [m.session_deadline_ms for m in self.members.values()]
        deadlines += [m.revocation_deadline_ms for m in self.members.values() if m.revocation_deadline_ms is not None]
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> list[str]:
        """Removes members whose session ended or who did not revoke in time; returns their ids."""
        gone = [m.member_id for m in self.members.values()
                if m.session_deadline_ms <= now_ms
                or (m.revocation_deadline_ms is not None and m.revocation_deadline_ms <= now_ms)]
        for member_id in gone:
            self.remove_member(member_id)
        return gone

    # ---- offsets -------------------------------------------------------------------------------

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> Errors:
        member = self.members.get(member_id)
        if member is None or member.member_epoch == STATIC_LEAVE_EPOCH:
            return Errors.UNKNOWN_MEMBER_ID
        # Kafka 4.x wants the current epoch; the previous one too here, for a fetch sent just before the
        # heartbeat answer that moved the member on (reading offsets cannot break fencing).
        ok = member_epoch in (member.member_epoch, member.previous_member_epoch)
        return Errors.NONE if ok else Errors.STALE_MEMBER_EPOCH

    def validate_offset_commit(self, member_id: str, member_epoch: int, transactional: bool = False,
                               partitions: Iterable[tuple[str, int]] = ()) -> Errors:
        """OffsetCommit v9+ / TxnOffsetCommit v3+ from a consumer-protocol member: the member epoch is the
        generation. The current epoch commits anything (as in Kafka); an older one only partitions the
        member has held since that epoch (KIP-1251), else STALE_MEMBER_EPOCH -- a commit that raced
        the member's own epoch bump is then accepted, one from before it lost a partition is not. A
        commit with a negative epoch comes from outside group management (an admin tool, or a consumer
        that used ``assign()``: librdkafka names such a consumer itself, KIP-1082, so its member id
        need not be empty); as in Kafka it is allowed whenever the group has no members, whatever the
        id. A transactional one without an id from a pre-KIP-447 producer is accepted as the classic
        group does."""
        if self.state is G.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE  # its tombstones are on their way
        if member_epoch < 0 and not self.members:
            return Errors.NONE
        if member_epoch < 0 and not member_id:
            return Errors.NONE if transactional else Errors.UNKNOWN_MEMBER_ID
        member = self.members.get(member_id)
        if member is None or member.member_epoch == STATIC_LEAVE_EPOCH:
            return Errors.UNKNOWN_MEMBER_ID
        if member_epoch == member.member_epoch:
            return Errors.NONE
        if member.classic is not None:
            return Errors.ILLEGAL_GENERATION  # a classic member's generation, checked as the classic way
        if 0 < member_epoch < member.member_epoch:
            epochs = member.partition_epochs
            if all(tp in epochs and epochs[tp] <= member_epoch for tp in partitions):
                return Errors.NONE
        return Errors.STALE_MEMBER_EPOCH
