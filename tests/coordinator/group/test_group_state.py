import itertools

import pytest

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.state import (
    VALID_PREVIOUS_STATES,
    GroupState,
    IllegalStateTransition,
    check_transition,
    is_valid_transition,
)

S = GroupState

ALLOWED = {
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.EMPTY, S.DEAD),
    (S.DEAD, S.DEAD),
}


def test_ids_are_explicit_and_stable():
    assert {s.name: s.value for s in S} == {
        "EMPTY": 0, "PREPARING_REBALANCE": 1, "COMPLETING_REBALANCE": 2, "STABLE": 3, "DEAD": 4}


def test_kafka_names_round_trip():
    assert [s.kafka_name for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable",
                                         "Dead"]
    for s in S:
        assert S.from_kafka_name(s.kafka_name) is s
        assert S.from_kafka_name(s.kafka_name.upper()) is s
    with pytest.raises(ValueError):
        S.from_kafka_name("Rebalancing")


def test_table_covers_every_state():
    assert set(VALID_PREVIOUS_STATES) == set(S)


@pytest.mark.parametrize("from_state,to_state", list(itertools.product(S, S)))
def test_every_pair(from_state, to_state):
    expected = (from_state, to_state) in ALLOWED
    assert is_valid_transition(from_state, to_state) is expected
    if expected:
        check_transition(from_state, to_state, "g")
    else:
        with pytest.raises(IllegalStateTransition) as info:
            check_transition(from_state, to_state, "g")
        assert info.value.from_state is from_state and info.value.to_state is to_state
        assert "'g'" in str(info.value)


def test_error_names_exist_on_the_wire():
    errors = pytest.importorskip("eoslog.protocol.errors")
    missing = [e.value for e in Errors if e.value not in errors.ErrorCode.__members__]
    assert missing == []
