"""The record state machine: Kafka's ids, and every (state, event) pair below and at the delivery limit."""

from __future__ import annotations

import itertools

import pytest

from eoslog.protocol.errors import ErrorCode
from eoslog.share import AcknowledgeType, Event, IllegalRecordTransition, RecordState, ShareError
from eoslog.share.record_state import ACKNOWLEDGE_EVENTS, TRANSITIONS, UnknownRecordState, transition

S = RecordState
E = Event
LIMIT = 3

# Written out apart from the module, from Kafka's RecordState.validateTransition, InFlightState.tryUpdateState
# and SharePartition: (state, event) -> (state below the limit, count delta, state at the limit).
EXPECTED = {
    (S.AVAILABLE, E.ACQUIRE): (S.ACQUIRED, 1, S.ARCHIVED),
    (S.AVAILABLE, E.SKIP): (S.ARCHIVED, 0, S.ARCHIVED),
    (S.ACQUIRED, E.ACCEPT): (S.ACKNOWLEDGED, 0, S.ACKNOWLEDGED),
    (S.ACQUIRED, E.RELEASE): (S.AVAILABLE, 0, S.ARCHIVED),
    (S.ACQUIRED, E.REJECT): (S.ARCHIVED, 0, S.ARCHIVED),
    (S.ACQUIRED, E.GAP): (S.ARCHIVED, 0, S.ARCHIVED),
    (S.ACQUIRED, E.RENEW): (S.ACQUIRED, 0, S.ACQUIRED),
    (S.ACQUIRED, E.LOCK_TIMEOUT): (S.AVAILABLE, 0, S.ARCHIVED),
    (S.ACQUIRED, E.MEMBER_RELEASE): (S.AVAILABLE, 0, S.ARCHIVED),
}


def test_persisted_ids_are_kafkas():
    assert {s.name: s.value for s in S} == {"AVAILABLE": 0, "ACQUIRED": 1, "ACKNOWLEDGED": 2, "ARCHIVED": 4}
    for s in S:
        assert S.from_id(s.value) is s
    for unknown in (3, 5, -1):  # 3 is Kafka's later ARCHIVING, not a 4.2 state
        with pytest.raises(UnknownRecordState):
            S.from_id(unknown)


def test_acknowledge_types_are_the_wire_bytes():
    assert {t.name: int(t) for t in AcknowledgeType} == {"GAP": 0, "ACCEPT": 1, "RELEASE": 2, "REJECT": 3, "RENEW": 4}
    assert set(ACKNOWLEDGE_EVENTS) == set(AcknowledgeType)


def test_an_acquired_record_is_persisted_available():
    assert {s: s.persisted for s in S} == {S.AVAILABLE: S.AVAILABLE, S.ACQUIRED: S.AVAILABLE,
                                           S.ACKNOWLEDGED: S.ACKNOWLEDGED, S.ARCHIVED: S.ARCHIVED}
    assert {s for s in S if s.is_done} == {S.ACKNOWLEDGED, S.ARCHIVED}


def test_the_table_is_kafkas():
    assert {k: (v.to, v.delivery_count_delta, v.at_limit) for k, v in TRANSITIONS.items()} == EXPECTED


def test_done_states_never_move():
    assert not [k for k in TRANSITIONS if k[0].is_done]


@pytest.mark.parametrize("state,event", list(itertools.product(S, E)), ids=lambda x: x.name)
@pytest.mark.parametrize("count", [0, LIMIT - 1, LIMIT, LIMIT + 1], ids=lambda c: f"count{c}")
def test_every_state_and_event(state, event, count):
    expected = EXPECTED.get((state, event))
    if expected is None:
        with pytest.raises(IllegalRecordTransition) as info:
            transition(state, event, count, LIMIT)
        assert (info.value.state, info.value.event) == (state, event)
        return
    below, delta, at_limit = expected
    if count >= LIMIT:
        assert transition(state, event, count, LIMIT) == (at_limit, count)
    else:
        assert transition(state, event, count, LIMIT) == (below, count + delta)


def test_share_errors_are_wire_error_names():
    missing = [e.value for e in ShareError if e.value not in ErrorCode.__members__]
    assert missing == []
