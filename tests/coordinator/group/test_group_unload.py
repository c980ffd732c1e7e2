"""A ``__consumer_offsets`` partition led elsewhere now (cluster mode): unloading it answers every call
still waiting in its groups NOT_COORDINATOR, once, so clients move to the new coordinator at once."""

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.state import GroupState

S = GroupState
E = Errors


def _owned(h) -> int:
    partition = h.c.partition_for("g")
    h.c.load_partition(partition, iter(()), now_ms=h.now)
    return partition


def test_unload_answers_joins_waiting_in_a_rebalance(h):
    partition = _owned(h)
    a, b = h.stable_group(2)
    c, joined = h.new_member(client="c")
    assert joined.pending is not None and h.group().state is S.PREPARING_REBALANCE
    rejoined = h.join(a, client="c0")
    assert rejoined.pending is not None and h.answer(rejoined) is None

    h.ownership[partition] = E.NOT_COORDINATOR  # the runtime: led elsewhere now
    unloaded = h.run(h.c.unload_partition(partition))

    assert len(unloaded.completed) == 2
    assert h.answer(joined).error is E.NOT_COORDINATOR and h.answer(joined).member_id == c
    assert h.answer(rejoined).error is E.NOT_COORDINATOR and h.answer(rejoined).member_id == a
    assert "g" not in h.c.groups
    assert h.join(b, client="c1").response.error is E.NOT_COORDINATOR
    # The barrier's deadline passing later answers nothing a second time (Harness asserts that).
    h.advance(60_000)


def test_unload_answers_syncs_waiting_for_the_leaders_assignment(h):
    partition = _owned(h)
    ids = [h.join("", client=f"c{i}").response.member_id for i in range(2)]
    joins = [h.join(m, client=f"c{i}") for i, m in enumerate(ids)]
    if h.group().state is S.PREPARING_REBALANCE:  # the first join completed alone: rejoin it
        joins[0] = h.join(ids[0], client="c0")
    assert h.group().state is S.COMPLETING_REBALANCE
    leader = h.group().leader_id
    follower = next(m for m in ids if m != leader)
    generation = h.group().generation_id
    waiting = h.sync(follower, generation)
    h.auto_write = False
    storing = h.sync(leader, generation, {m: b"x" for m in ids})
    assert waiting.pending is not None and storing.pending is not None and len(h.held) == 1

    h.run(h.c.unload_partition(partition))

    assert h.answer(waiting).error is E.NOT_COORDINATOR
    assert h.answer(storing).error is E.NOT_COORDINATOR
    # The assignment's write fails as the leadership moved; no call is answered twice.
    h.release_writes(E.NOT_COORDINATOR)


def test_a_stable_group_has_nothing_to_answer(h):
    partition = _owned(h)
    h.stable_group(2)
    assert h.run(h.c.unload_partition(partition)).completed == []


def test_groups_answer_what_the_ownership_of_their_partition_says(h):
    # Which partitions are served here is the coordinator runtime's to say (tests/coordinator/
    # test_runtime.py): led elsewhere, "look again"; led here but not loaded yet, "retry here".
    partition = h.c.partition_for("g")
    h.ownership[partition] = E.NOT_COORDINATOR
    assert h.join("").response.error is E.NOT_COORDINATOR
    h.ownership[partition] = E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.join("").response.error is E.COORDINATOR_LOAD_IN_PROGRESS
    h.c.load_partition(partition, iter(()), now_ms=h.now)
    h.ownership[partition] = E.NONE
    assert h.join("").response.error is E.MEMBER_ID_REQUIRED
