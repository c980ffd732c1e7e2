"""One member of a consumer group (KIP-848) and its reconciliation towards the target assignment.

A member is what its heartbeats said (subscription, assignor, instance id, timeouts) plus what the
coordinator keeps for it: its member epoch (and the previous one, accepted once more in case the answer
carrying the new one was lost), the partitions it owns and those it must give up, and its deadlines.

:func:`reconcile` is Kafka's CurrentAssignmentBuilder idea in one pure function: a member never gets a
partition that another member still owns, and a member that must give partitions up gets nothing new
(and keeps its epoch) until a heartbeat shows them gone. That is what keeps a partition from being
consumed by two members at once, the basis of committed-offset exactly-once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eoslog.coordinator.group.assignors import Assignment
from eoslog.coordinator.group.consumer_state import MemberState, check_member_transition

M = MemberState

# Member epochs with a meaning of their own (ConsumerGroupHeartbeat's MemberEpoch).
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2  # a static member going away for a while; its instance id keeps its partitions


def tps(assignment: Assignment) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def from_tps(pairs) -> Assignment:
    out: dict[str, set[int]] = {}
    for t, p in pairs:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = M.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline_ms: int = 0
    # Set while UNREVOKED_PARTITIONS: by then the member must have revoked, or it is removed (its
    # partitions then go to others), as Kafka does with the rebalance timeout.
    revocation_deadline_ms: int | None = None
    # (topic, partition) -> the member epoch at which it got the partition it holds (assigned or pending
    # revocation): a commit from an older epoch is accepted for a partition held since then (KIP-1251's
    # rule), so a commit racing the member's own epoch bump does not fail. Not persisted: after a load
    # every partition counts as got at the loaded epoch, which only refuses more.
    partition_epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    # A classic-protocol member in a consumer group (consumer_classic.ClassicMetadata), else None.
    classic: Any = None
    # The topics its regex matched at its own last heartbeat, among those its principal may DESCRIBE
    # (ACLs). Resolved per member, with the member's own principal, because a regex resolved with
    # another member's rights would hand it topics it may not see. Not persisted: None until the first
    # heartbeat after a load, and meanwhile the regex counts only the topics the member already had.
    regex_topics: frozenset[str] | None = None
    # The principal regex_topics were resolved for ("": no authorizer): a member's heartbeat resolves
    # the regexes of every member resolved for the same principal, so they all see new matches in the
    # same assignment round (Kafka resolves a group's regexes for the whole group). Not persisted.
    regex_principal: str | None = None


@dataclass(frozen=True)
class Reconciled:
    state: MemberState
    member_epoch: int
    previous_member_epoch: int
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment, owned: Assignment | None,
              owner_of: Callable[[tuple[str, int]], str | None]) -> Reconciled:
    """The member's next assignment state. ``owned`` is what the heartbeat says the client owns (None:
    not sent, unchanged); ``owner_of`` tells which member holds a partition now (assigned or pending
    revocation), or None."""
    unchanged = Reconciled(member.state, member.member_epoch, member.previous_member_epoch, member.assigned,
                           member.pending_revocation)
    current = tps(member.assigned)
    if member.state is M.UNREVOKED_PARTITIONS:
        if owned is None or tps(owned) & tps(member.pending_revocation):
            # Not revoked yet: the client still owns them, so they count as its own. Against the same
            # target this answers the same again; a newer target may give some back or take more.
            current |= tps(member.pending_revocation)
    elif member.state is M.STABLE and member.member_epoch == target_epoch:
        return unchanged
    wanted = tps(target)
    keep = current & wanted
    revoke = current - wanted
    if revoke:
        result = Reconciled(M.UNREVOKED_PARTITIONS, member.member_epoch, member.previous_member_epoch,
                            from_tps(keep), from_tps(revoke))
    else:
        free = {tp for tp in wanted - current if owner_of(tp) in (None, member.member_id)}
        unreleased = wanted - current - free
        epoch = target_epoch
        previous = member.member_epoch if member.member_epoch != target_epoch else member.previous_member_epoch
        result = Reconciled(M.UNRELEASED_PARTITIONS if unreleased else M.STABLE, epoch, previous,
                            from_tps(keep | free), {})
    check_member_transition(member.member_id, member.state, result.state)
    return result
