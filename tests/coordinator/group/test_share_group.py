"""The share group core (KIP-932) without I/O: its state tables and configuration; heartbeats, fencing,
timeouts, the group-id namespace and persistence follow."""

from __future__ import annotations

import pytest

from eoslog.coordinator.group import GroupConfig
from eoslog.coordinator.group.share_state import (
    VALID_PREVIOUS_GROUP_STATES,
    VALID_PREVIOUS_MEMBER_STATES,
    IllegalShareGroupTransition,
    ShareGroupState,
    ShareMemberState,
    check_group_transition,
    check_member_transition,
)

G = ShareGroupState


# ---- state tables ------------------------------------------------------------------------------------

@pytest.mark.parametrize("before", list(G))
@pytest.mark.parametrize("after", list(G))
def test_group_transition_table(before, after):
    allowed = before in VALID_PREVIOUS_GROUP_STATES[after]
    # Only an Empty group is deleted; Dead is left only by a failed deletion, back to Empty.
    if after is G.DEAD or before is G.DEAD:
        assert allowed == ((before, after) in ((G.EMPTY, G.DEAD), (G.DEAD, G.EMPTY)))
    if allowed:
        check_group_transition("g", before, after)
    else:
        with pytest.raises(IllegalShareGroupTransition):
            check_group_transition("g", before, after)


def test_member_transition_table():
    assert VALID_PREVIOUS_MEMBER_STATES == {ShareMemberState.STABLE: frozenset({ShareMemberState.STABLE})}
    check_member_transition("m", ShareMemberState.STABLE, ShareMemberState.STABLE)
    assert [s.value for s in ShareMemberState] == [0]  # Kafka's MemberState.STABLE byte, persisted
    assert [s.kafka_name for s in G] == ["Empty", "Stable", "Dead"]


# ---- configuration -----------------------------------------------------------------------------------

def test_share_config_defaults_are_kafkas():
    c = GroupConfig()
    assert (c.share_session_timeout_ms, c.share_min_session_timeout_ms, c.share_max_session_timeout_ms) == \
        (45_000, 45_000, 60_000)
    assert (c.share_heartbeat_interval_ms, c.share_min_heartbeat_interval_ms, c.share_max_heartbeat_interval_ms) == \
        (5_000, 5_000, 15_000)
    assert c.share_max_size == 200


@pytest.mark.parametrize("bad", [
    {"share_max_size": 0}, {"share_max_size": 1001},
    {"share_session_timeout_ms": 44_999}, {"share_session_timeout_ms": 60_001},
    {"share_heartbeat_interval_ms": 4_999}, {"share_heartbeat_interval_ms": 15_001},
    {"share_min_session_timeout_ms": 0, "share_session_timeout_ms": 5_000},
    {"share_min_session_timeout_ms": 1_000, "share_session_timeout_ms": 5_000},  # interval >= timeout
])
def test_share_config_bounds_are_kafkas(bad):
    with pytest.raises(ValueError):
        GroupConfig(**bad)
