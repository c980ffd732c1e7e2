"""The state machines of a share group (KIP-932): the group's and each member's.

Both are an enum with explicit persisted ids plus one table of valid previous states, like
consumer_state.py. A share group's state is *derived* (Kafka's ShareGroup.maybeUpdateGroupState): Empty
with no member, Stable with at least one; Dead only between a DeleteGroups of an Empty group and its
tombstones being durable. There is no Assigning or Reconciling: a share partition may be held by
several members at once, so a member takes its target assignment in the heartbeat that computes it and
nothing ever waits for a partition to be released.

A member has one state, Kafka's MemberState.STABLE, whose byte (0) is what
ShareGroupCurrentMemberAssignment's ``State`` carries (share_log_format.py). The table still exists so a
state read from a record that this code never writes is refused, not silently kept.
"""

from __future__ import annotations

from enum import Enum

from eoslog.coordinator.group.errors import GroupCoordinatorError


class ShareGroupState(Enum):
    EMPTY = 0
    STABLE = 1
    DEAD = 2

    @property
    def kafka_name(self) -> str:
        return self.name.capitalize()  # "Empty", "Stable", "Dead": ListGroups and ShareGroupDescribe


G = ShareGroupState

# For each state, the states it may be entered from.
VALID_PREVIOUS_GROUP_STATES: dict[ShareGroupState, frozenset[ShareGroupState]] = {
    # The last member left or timed out; a group is created Empty; a failed deletion revives it.
    G.EMPTY: frozenset({G.EMPTY, G.STABLE, G.DEAD}),
    # A member joined (or one of several left).
    G.STABLE: frozenset({G.EMPTY, G.STABLE}),
    # DeleteGroups, of an Empty group only (Kafka: NON_EMPTY_GROUP otherwise). Dead is final once the
    # tombstones are durable: the group is then gone from memory.
    G.DEAD: frozenset({G.EMPTY}),
}


class ShareMemberState(Enum):
    STABLE = 0  # Kafka's MemberState.STABLE byte, as persisted

    @property
    def kafka_name(self) -> str:
        return self.name.lower()


VALID_PREVIOUS_MEMBER_STATES: dict[ShareMemberState, frozenset[ShareMemberState]] = {
    # Moving to a new target epoch, or the same epoch after a subscription change: no revocation phase.
    ShareMemberState.STABLE: frozenset({ShareMemberState.STABLE}),
}


class IllegalShareGroupTransition(GroupCoordinatorError, RuntimeError):
    def __init__(self, what: str, from_state: Enum, to_state: Enum) -> None:
        super().__init__(f"{what}: illegal transition {from_state.name} -> {to_state.name}")


def check_group_transition(group_id: str, from_state: ShareGroupState, to_state: ShareGroupState) -> None:
    if from_state not in VALID_PREVIOUS_GROUP_STATES[to_state]:
        raise IllegalShareGroupTransition(f"share group {group_id!r}", from_state, to_state)


def check_member_transition(member_id: str, from_state: ShareMemberState, to_state: ShareMemberState) -> None:
    if from_state not in VALID_PREVIOUS_MEMBER_STATES[to_state]:
        raise IllegalShareGroupTransition(f"share member {member_id!r}", from_state, to_state)
