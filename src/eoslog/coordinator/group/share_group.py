"""A share group (KIP-932): members, group epoch, target assignment and its epoch, as Kafka 4.2's
ShareGroupHeartbeat runs them (GroupMetadataManager.shareGroupHeartbeat, shareGroupLeave,
shareGroupFenceMember; ShareGroupAssignmentBuilder; ShareGroup, ShareGroupMember).

Contract
- Owns its members, the group epoch, the metadata hash of the subscribed topics, the target assignment
  and the assignment epoch. Called by :class:`~.share_coordinator.ShareGroups` only, on the broker's event
  loop; no I/O. Partitions are keyed by topic id, as in Kafka's records and responses.
- Always true: ``assignment_epoch <= group_epoch``; a member's assignment is its target assignment at its
  member epoch, limited to the topics it subscribes to. There is no revocation phase: a share partition
  may be held by several members, so a member takes its target in the heartbeat that finds it behind.
- The group epoch moves when a member joins or leaves (or times out), changes its subscription, or when
  the subscribed topics change (created, deleted, more partitions: the metadata hash). The target is
  recomputed on the next heartbeat with the SimpleAssignor, from the previous target.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.share_assignor import Assignable, ShareAssignment, TopicMetadata, simple_assign
from eoslog.coordinator.group.share_initialization import ShareStatePartitions
from eoslog.coordinator.group.share_state import (
    ShareGroupState,
    ShareMemberState,
    check_group_transition,
    check_member_transition,
)

G = ShareGroupState

# ShareGroupHeartbeat's MemberEpoch values with a meaning of their own.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1


@dataclass(frozen=True)
class ShareHeartbeat:
    """A ShareGroupHeartbeat. ``None`` fields were not sent (unchanged since the last heartbeat)."""

    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ShareHeartbeatResponse:
    error: Errors
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # topic id -> partitions; None when Kafka leaves it out (the member has it already)
    assignment: ShareAssignment | None = None


def invalid_heartbeat(group_id: str, request: ShareHeartbeat) -> str | None:
    """Kafka's request checks (GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid), whose
    answer is INVALID_REQUEST with this message. KIP-1082: the client names itself, so an empty member id
    is refused, never filled in."""
    if not request.member_id:
        return "MemberId can't be empty."
    if not group_id:
        return "GroupId can't be empty."
    if request.rack_id == "":
        return "RackId can't be empty."
    if request.member_epoch == JOIN_EPOCH:
        if not request.subscribed_topic_names:
            return "SubscribedTopicNames must be set in first request."
    elif request.member_epoch < LEAVE_EPOCH:
        return "MemberEpoch is invalid."
    return None


def metadata_hash(names: Iterable[str], topics: Mapping[str, TopicMetadata]) -> int:
    """A signed 64-bit hash of the subscribed topics that exist (name, id, partition count); 0 when none
    does. Kafka's ``MetadataHash`` plays the same part (a change bumps the group epoch) but hashes its own
    metadata image, racks included, with xxh3: the value is eoslog's, compared only with itself. A Kafka
    broker taking such a group over would see another hash and bump the epoch once."""
    present = sorted(n for n in set(names) if n in topics)
    if not present:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for name in present:
        raw = name.encode()
        h.update(len(raw).to_bytes(4, "big") + raw + topics[name].topic_id.bytes
                 + topics[name].partitions.to_bytes(4, "big"))
    return int.from_bytes(h.digest(), "big", signed=True)


@dataclass(eq=False)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()  # sorted
    member_epoch: int = 0
    previous_member_epoch: int = -1  # Kafka's default for a new member
    state: ShareMemberState = ShareMemberState.STABLE
    assigned: ShareAssignment = field(default_factory=dict)
    session_deadline_ms: int = 0


class ShareGroup:
    def __init__(self, group_id: str, config: GroupConfig, assignable: Assignable | None = None) -> None:
        self.group_id = group_id
        self.config = config
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.metadata_hash = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, ShareAssignment] = {}
        self.state = G.EMPTY
        # Which share partitions have state at the share coordinator (Kafka's ShareGroupStatePartitionMetadata,
        # share_initialization.py), and which may be assigned: with a share coordinator wired, only the
        # initialized ones (ShareGroups.adopt); None: every partition (the core on its own, in unit tests).
        self.state_partitions = ShareStatePartitions()
        self.assignable = assignable
        # The subscribed topics as the last heartbeat saw them, so that a session expiring (no metadata at
        # hand) recomputes the hash as Kafka's fencing does. Not persisted: empty after a load, and then
        # the hash is left for the next heartbeat to recompute.
        self.subscribed_metadata: dict[str, TopicMetadata] = {}

    # ---- views ---------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topic_names(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}

    def refresh_state(self) -> None:
        new = G.EMPTY if not self.members else G.STABLE
        check_group_transition(self.group_id, self.state, new)
        self.state = new

    def mark_dead(self) -> None:
        """DeleteGroups of this (empty) group; undone by :meth:`refresh_state` if its tombstones fail."""
        check_group_transition(self.group_id, self.state, G.DEAD)
        self.state = G.DEAD

    # ---- heartbeat -----------------------------------------------------------------------------

    def heartbeat(self, req: ShareHeartbeat, topics: Mapping[str, TopicMetadata],
                  now_ms: int) -> ShareHeartbeatResponse:
        """``topics``: the broker's non-internal topics by name. The request passed
        :func:`invalid_heartbeat`."""
        if req.member_epoch == LEAVE_EPOCH:
            return self._leave(req, topics)
        if len(self.members) >= self.config.share_max_size and req.member_id not in self.members:
            return _error(Errors.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity of "
                          f"{self.config.share_max_size} members.")
        member = self.members.get(req.member_id)
        if member is None:
            if req.member_epoch != JOIN_EPOCH:
                return _error(Errors.UNKNOWN_MEMBER_ID,
                              f"Member {req.member_id} is not a member of group {self.group_id}.")
            member = ShareMember(req.member_id)
            self.members[member.member_id] = member
        elif req.member_epoch != JOIN_EPOCH:
            # A known member may come back with epoch 0 (it was fenced, or restarted with its id): Kafka's
            # newest coordinator takes it in at its current epoch (testShareGroupMemberCanRejoinWithEpochZero);
            # the older GroupMetadataManager fenced it again until its session ran out.
            problem = _fenced(member, req.member_epoch)
            if problem is not None:
                return _error(Errors.FENCED_MEMBER_EPOCH, problem)
        old_assigned = member.assigned
        subscription_changed = self._update_member(member, req)
        self.subscribed_metadata = {n: topics[n] for n in self.subscribed_topic_names() if n in topics}
        bump = self._bump_if_changed(subscription_changed, metadata_hash(self.subscribed_topic_names(), topics))
        if self.group_epoch > self.assignment_epoch:
            self._compute_target(topics)
        self._reconcile(member, topics, bump)
        member.session_deadline_ms = now_ms + self.config.share_session_timeout_ms
        self.refresh_state()
        # Kafka sends the assignment on a full request (joining, or any heartbeat naming its topics) and
        # whenever it changed; otherwise the client keeps what it has.
        full = req.member_epoch == JOIN_EPOCH or req.subscribed_topic_names is not None
        assignment = dict(member.assigned) if full or member.assigned != old_assigned else None
        return ShareHeartbeatResponse(Errors.NONE, None, member.member_id, member.member_epoch,
                                      self.config.share_heartbeat_interval_ms, assignment)

    def _update_member(self, member: ShareMember, req: ShareHeartbeat) -> bool:
        """Applies the request's fields; True if the subscription changed."""
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.subscribed_topic_names is None:
            return False
        names = tuple(sorted(set(req.subscribed_topic_names)))
        changed = names != member.subscribed_topic_names
        member.subscribed_topic_names = names
        return changed

    def _bump_if_changed(self, subscription_changed: bool, new_hash: int) -> bool:
        bump = subscription_changed or new_hash != self.metadata_hash
        if bump:
            self.group_epoch += 1
            self.metadata_hash = new_hash
        return bump

    def _compute_target(self, topics: Mapping[str, TopicMetadata]) -> None:
        subscriptions = {m.member_id: m.subscribed_topic_names for m in self.members.values()}
        self.target = simple_assign(subscriptions, topics, self.target, self.assignable)
        self.assignment_epoch = self.group_epoch

    def _reconcile(self, member: ShareMember, topics: Mapping[str, TopicMetadata], subscription_changed: bool) -> None:
        """Kafka's ShareGroupAssignmentBuilder: behind the target epoch, the member moves to it at once;
        at it, a changed subscription only drops the topics it left."""
        if member.member_epoch == self.assignment_epoch and not subscription_changed:
            return
        check_member_transition(member.member_id, member.state, ShareMemberState.STABLE)
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, self.assignment_epoch
        member.state = ShareMemberState.STABLE
        ids = {topics[n].topic_id for n in member.subscribed_topic_names if n in topics}
        member.assigned = {t: ps for t, ps in self.target.get(member.member_id, {}).items() if t in ids and ps}

    # ---- leaving and timeouts ------------------------------------------------------------------

    def _leave(self, req: ShareHeartbeat, topics: Mapping[str, TopicMetadata]) -> ShareHeartbeatResponse:
        # Kafka checks no epoch on a leave: the member id is enough.
        if req.member_id not in self.members:
            return _error(Errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {self.group_id}.")
        self.subscribed_metadata = {n: topics[n] for n in self.subscribed_topic_names() if n in topics}
        self.remove_member(req.member_id)
        return ShareHeartbeatResponse(Errors.NONE, None, req.member_id, LEAVE_EPOCH, 0, None)

    def remove_member(self, member_id: str) -> None:
        """Kafka's shareGroupFenceMember: the member and its target go, the group epoch moves on with the
        hash of what the others subscribe to; the others' targets are recomputed at their next heartbeat."""
        del self.members[member_id]
        self.target.pop(member_id, None)
        self.group_epoch += 1
        if self.subscribed_metadata:
            self.metadata_hash = metadata_hash(self.subscribed_topic_names(), self.subscribed_metadata)
        self.refresh_state()

    def next_deadline(self) -> int | None:
        return min((m.session_deadline_ms for m in self.members.values()), default=None)

    def tick(self, now_ms: int) -> list[str]:
        """Removes the members whose session ended; returns their ids."""
        gone = [m.member_id for m in self.members.values() if m.session_deadline_ms <= now_ms]
        for member_id in gone:
            self.remove_member(member_id)
        return gone


def _fenced(member: ShareMember, epoch: int) -> str | None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid: the current epoch, or the previous one (the answer
    carrying the new one may have been lost)."""
    if epoch > member.member_epoch:
        return (f"The share group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
    if epoch < member.member_epoch and epoch != member.previous_member_epoch:
        return (f"The share group member has a smaller member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}), and it does not match the previous member epoch "
                f"({member.previous_member_epoch}). The member must abandon all its partitions and rejoin.")
    return None


def _error(error: Errors, message: str) -> ShareHeartbeatResponse:
    # Kafka's error answers carry only the code and the message.
    return ShareHeartbeatResponse(error, message)
