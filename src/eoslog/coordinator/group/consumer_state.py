"""The two state machines of a consumer group (KIP-848): the group's and each member's.

Both are an enum with explicit persisted ids plus one table of valid previous states, like the classic
group's ``state.py``. A consumer group's state is *derived* from its epochs and members (Kafka does the
same), so :func:`check_group_transition` guards the derivation: a move missing from the table is a
coordinator bug, never a client's.

Member states (Kafka's reconciliation, CurrentAssignmentBuilder):
* STABLE -- the member owns exactly its target assignment at its member epoch.
* UNREVOKED_PARTITIONS -- the member must first give up ``partitions_pending_revocation``; its epoch
  stays where it is and it gets nothing new until a heartbeat shows them gone.
* UNRELEASED_PARTITIONS -- the member is at the target epoch, but some target partitions are still
  owned (assigned or pending revocation) by other members; they come once released.
"""

from __future__ import annotations

from enum import Enum

from eoslog.coordinator.group.errors import GroupCoordinatorError


class ConsumerGroupState(Enum):
    EMPTY = 0
    ASSIGNING = 1  # the group epoch moved past the target assignment's epoch
    RECONCILING = 2  # a member is not yet at the target assignment
    STABLE = 3
    DEAD = 4

    @property
    def kafka_name(self) -> str:
        return _GROUP_NAMES[self]


G = ConsumerGroupState
_GROUP_NAMES = {G.EMPTY: "Empty", G.ASSIGNING: "Assigning", G.RECONCILING: "Reconciling", G.STABLE: "Stable",
                G.DEAD: "Dead"}

# For each state, the states it may be entered from. The state is derived after each heartbeat or
# timeout, and one heartbeat can take a group through several steps at once (a first member joins, the
# target is computed and the member reaches it: Empty -> Stable), so only Dead is really constrained.
_LIVE = frozenset({G.EMPTY, G.ASSIGNING, G.RECONCILING, G.STABLE})
VALID_PREVIOUS_GROUP_STATES: dict[ConsumerGroupState, frozenset[ConsumerGroupState]] = {
    # The last member left or timed out, or a failed deletion brought the group back.
    G.EMPTY: _LIVE | {G.DEAD},
    # A member joined, left, changed its subscription or assignor, or a subscribed topic changed size,
    # and the new target is not computed yet (a member's own heartbeat computes it).
    G.ASSIGNING: _LIVE,
    # A new target assignment is computed and some member has not reached it.
    G.RECONCILING: _LIVE,
    # Every member reached the target assignment.
    G.STABLE: _LIVE,
    # DeleteGroups of an Empty group; Dead is final.
    G.DEAD: frozenset({G.EMPTY, G.DEAD}),
}


class MemberState(Enum):
    STABLE = 1
    UNREVOKED_PARTITIONS = 2
    UNRELEASED_PARTITIONS = 3

    @property
    def kafka_name(self) -> str:
        return self.name.lower()


M = MemberState

VALID_PREVIOUS_MEMBER_STATES: dict[MemberState, frozenset[MemberState]] = {
    # Reached the target: nothing to revoke, nothing owned by others.
    M.STABLE: frozenset({M.STABLE, M.UNREVOKED_PARTITIONS, M.UNRELEASED_PARTITIONS}),
    # A new target took partitions away; an unrevoked member waits for its own acknowledgement and
    # never moves to another UNREVOKED set before that (see reconcile's first branch).
    M.UNREVOKED_PARTITIONS: frozenset({M.STABLE, M.UNRELEASED_PARTITIONS, M.UNREVOKED_PARTITIONS}),
    # Revocation done (or none needed) but a partition it should get is not released yet.
    M.UNRELEASED_PARTITIONS: frozenset({M.STABLE, M.UNREVOKED_PARTITIONS, M.UNRELEASED_PARTITIONS}),
}


class IllegalConsumerGroupTransition(GroupCoordinatorError, RuntimeError):
    def __init__(self, what: str, from_state: Enum, to_state: Enum) -> None:
        super().__init__(f"{what}: illegal transition {from_state.name} -> {to_state.name}")


def check_group_transition(group_id: str, from_state: ConsumerGroupState, to_state: ConsumerGroupState) -> None:
    if from_state not in VALID_PREVIOUS_GROUP_STATES[to_state]:
        raise IllegalConsumerGroupTransition(f"group {group_id!r}", from_state, to_state)


def check_member_transition(member_id: str, from_state: MemberState, to_state: MemberState) -> None:
    if from_state not in VALID_PREVIOUS_MEMBER_STATES[to_state]:
        raise IllegalConsumerGroupTransition(f"member {member_id!r}", from_state, to_state)
