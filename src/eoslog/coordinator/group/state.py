"""The classic group state machine: one enum with explicit ids, one table of valid previous states.

Kafka does not persist a classic group's state (a loaded group is Empty without members, Stable with
them), but the ids are still spelled out so logs and tests never depend on declaration order.
``kafka_name`` is what DescribeGroups and ListGroups put on the wire.

Every state change of a :class:`~eoslog.coordinator.group.group.ClassicGroup` goes through
:func:`check_transition`; a move missing from :data:`VALID_PREVIOUS_STATES` is a coordinator bug.
"""

from __future__ import annotations

from enum import Enum

from eoslog.coordinator.group.errors import GroupCoordinatorError


class GroupState(Enum):
    EMPTY = 0
    PREPARING_REBALANCE = 1
    COMPLETING_REBALANCE = 2
    STABLE = 3
    DEAD = 4

    @property
    def kafka_name(self) -> str:
        return _KAFKA_NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> GroupState:
        for state, kafka_name in _KAFKA_NAMES.items():
            if kafka_name.lower() == name.lower():
                return state
        raise ValueError(f"unknown group state name {name!r}")


S = GroupState

_KAFKA_NAMES: dict[GroupState, str] = {
    S.EMPTY: "Empty",
    S.PREPARING_REBALANCE: "PreparingRebalance",
    S.COMPLETING_REBALANCE: "CompletingRebalance",
    S.STABLE: "Stable",
    S.DEAD: "Dead",
}

# For each state, the states it may be entered from. The only table of group transitions in eoslog.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    # The join barrier completed and no member rejoined (all left or timed out).
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    # A member joined, left, changed its metadata, or timed out; or the leader's assignment failed
    # to persist; or a follower never sent SyncGroup.
    S.PREPARING_REBALANCE: frozenset({S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE}),
    # The join barrier completed with members: the generation was bumped, join responses sent.
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    # The leader's assignment was written to __consumer_offsets.
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    # DeleteGroups (only an Empty group) or offset expiry of an Empty group; Dead is final.
    S.DEAD: frozenset({S.EMPTY, S.DEAD}),
}


class IllegalStateTransition(GroupCoordinatorError, RuntimeError):
    """A transition not in VALID_PREVIOUS_STATES was attempted: a coordinator bug, never a client's."""

    def __init__(self, group_id: str | None, from_state: GroupState, to_state: GroupState) -> None:
        self.group_id = group_id
        self.from_state = from_state
        self.to_state = to_state
        super().__init__(f"group {group_id!r}: illegal transition "
                         f"{from_state.kafka_name} -> {to_state.kafka_name}")


def is_valid_transition(from_state: GroupState, to_state: GroupState) -> bool:
    return from_state in VALID_PREVIOUS_STATES[to_state]


def check_transition(from_state: GroupState, to_state: GroupState, group_id: str | None = None) -> None:
    """Raise IllegalStateTransition unless ``to_state`` may be entered from ``from_state``."""
    if from_state not in VALID_PREVIOUS_STATES[to_state]:
        raise IllegalStateTransition(group_id, from_state, to_state)
