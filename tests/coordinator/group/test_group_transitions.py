"""Every group state x every protocol input: the response and the state that follows."""

import pytest

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.state import GroupState

S = GroupState
E = Errors


def make(h, state):
    """A group "g" in ``state`` with a known member "m" (except EMPTY/DEAD). Returns (member, generation)."""
    if state is S.EMPTY:
        h.run(h.c.commit_offsets("g", [("t", 0, 5)], now_ms=h.now))  # a simple-consumer group exists, empty
        assert h.group().state is S.EMPTY
        return None, 0
    if state is S.DEAD:
        h.run(h.c.commit_offsets("g", [("t", 0, 5)], now_ms=h.now))
        h.auto_write = False
        h.run(h.c.delete_groups(["g"], now_ms=h.now))
        assert h.group().state is S.DEAD
        return None, 0
    leader, follower = h.stable_group(2)
    gen = h.group().generation_id
    if state is S.STABLE:
        return follower, gen
    if state is S.PREPARING_REBALANCE:
        h.join(leader)  # the leader rejoins: rebalance, follower not yet back
        assert h.group().state is S.PREPARING_REBALANCE
        return follower, gen
    if state is S.COMPLETING_REBALANCE:
        h.join(leader)
        h.join(follower)
        assert h.group().state is S.COMPLETING_REBALANCE
        return follower, gen + 1
    raise AssertionError(state)


# input -> {state: (expected error or "pending", state after)}
CASES = {
    "join_new_member": {
        S.EMPTY: (E.MEMBER_ID_REQUIRED, S.EMPTY),
        S.PREPARING_REBALANCE: (E.MEMBER_ID_REQUIRED, S.PREPARING_REBALANCE),
        S.COMPLETING_REBALANCE: (E.MEMBER_ID_REQUIRED, S.COMPLETING_REBALANCE),
        S.STABLE: (E.MEMBER_ID_REQUIRED, S.STABLE),
        S.DEAD: (E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    },
    "join_known_member_same_metadata": {
        S.EMPTY: (E.UNKNOWN_MEMBER_ID, S.EMPTY),
        S.PREPARING_REBALANCE: (E.NONE, S.COMPLETING_REBALANCE),  # the last one in: barrier completes
        S.COMPLETING_REBALANCE: (E.NONE, S.COMPLETING_REBALANCE),  # lost response: resent
        S.STABLE: (E.NONE, S.STABLE),  # a follower with the same metadata: no rebalance
        S.DEAD: (E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    },
    "join_known_member_new_metadata": {
        S.EMPTY: (E.UNKNOWN_MEMBER_ID, S.EMPTY),
        S.PREPARING_REBALANCE: (E.NONE, S.COMPLETING_REBALANCE),
        S.COMPLETING_REBALANCE: ("pending", S.PREPARING_REBALANCE),
        S.STABLE: ("pending", S.PREPARING_REBALANCE),
        S.DEAD: (E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    },
    "sync": {
        S.EMPTY: (E.UNKNOWN_MEMBER_ID, S.EMPTY),
        S.PREPARING_REBALANCE: (E.REBALANCE_IN_PROGRESS, S.PREPARING_REBALANCE),
        S.COMPLETING_REBALANCE: ("pending", S.COMPLETING_REBALANCE),  # a follower waits for the leader
        S.STABLE: (E.NONE, S.STABLE),
        S.DEAD: (E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    },
    "heartbeat": {
        S.EMPTY: (E.UNKNOWN_MEMBER_ID, S.EMPTY),
        S.PREPARING_REBALANCE: (E.REBALANCE_IN_PROGRESS, S.PREPARING_REBALANCE),
        S.COMPLETING_REBALANCE: (E.NONE, S.COMPLETING_REBALANCE),
        S.STABLE: (E.NONE, S.STABLE),
        S.DEAD: (E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    },
    "heartbeat_wrong_generation": {
        S.EMPTY: (E.UNKNOWN_MEMBER_ID, S.EMPTY),
        S.PREPARING_REBALANCE: (E.ILLEGAL_GENERATION, S.PREPARING_REBALANCE),
        S.COMPLETING_REBALANCE: (E.ILLEGAL_GENERATION, S.COMPLETING_REBALANCE),
        S.STABLE: (E.ILLEGAL_GENERATION, S.STABLE),
        S.DEAD: (E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    },
    "leave": {
        S.EMPTY: (E.UNKNOWN_MEMBER_ID, S.EMPTY),
        S.PREPARING_REBALANCE: (E.NONE, S.PREPARING_REBALANCE),  # the leader is still awaited? no: done
        S.COMPLETING_REBALANCE: (E.NONE, S.PREPARING_REBALANCE),
        S.STABLE: (E.NONE, S.PREPARING_REBALANCE),
        S.DEAD: (E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    },
    # The follower falls silent while the leader keeps heartbeating (or waits in the barrier).
    "follower_session_expiry": {
        S.EMPTY: (None, S.EMPTY),
        S.PREPARING_REBALANCE: (None, S.COMPLETING_REBALANCE),  # barrier completes without it
        S.COMPLETING_REBALANCE: (None, S.PREPARING_REBALANCE),
        S.STABLE: (None, S.PREPARING_REBALANCE),
        S.DEAD: (None, S.DEAD),
    },
}
# Leaving in PREPARING_REBALANCE: the follower was the only member not yet rejoined, so the barrier
# completes with the leader alone.
CASES["leave"][S.PREPARING_REBALANCE] = (E.NONE, S.COMPLETING_REBALANCE)


def apply(h, name, member, gen):
    known = member or "ghost"
    if name == "join_new_member":
        return h.join("", client="new").response.error
    if name == "join_known_member_same_metadata":
        answer = h.answer(h.join(known))
        return answer.error if answer is not None else "pending"
    if name == "join_known_member_new_metadata":
        r = h.join(known, protocols=(("range", b"changed"),), protocol_type="other" if member is None
                   else "consumer")
        answer = h.answer(r)
        return answer.error if answer is not None else "pending"
    if name == "sync":
        answer = h.answer(h.sync(known, gen))
        return answer.error if answer is not None else "pending"
    if name == "heartbeat":
        return h.heartbeat(known, gen).error
    if name == "heartbeat_wrong_generation":
        return h.heartbeat(known, gen + 7).error
    if name == "leave":
        response = h.leave((known, None))
        return response.error if response.error is not E.NONE else response.members[0].error
    if name == "follower_session_expiry":
        leader = h.group().leader_id if h.group().members else None
        h.advance(6_000)
        if leader is not None:
            h.heartbeat(leader, h.group().generation_id)
        h.advance(5_000)
        assert member is None or member not in h.group().members
        if leader is not None:
            assert leader in h.group().members
        return None
    raise AssertionError(name)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("state", list(S))
def test_state_x_input(h, state, name):
    member, gen = make(h, state)
    expected_answer, expected_state = CASES[name][state]
    got = apply(h, name, member, gen)
    assert got == expected_answer
    assert h.c.groups["g"].state is expected_state
