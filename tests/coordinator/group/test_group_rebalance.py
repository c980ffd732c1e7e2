"""Multi-member flows of the classic protocol: barriers, timeouts, static membership, fencing."""

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.state import GroupState

from .conftest import REBALANCE, SESSION

S = GroupState
E = Errors


def test_two_members_join_and_sync(make_harness):
    h = make_harness(initial_rebalance_delay_ms=3000)
    a = h.join("", client="a", protocols=(("range", b"ma"), ("roundrobin", b"ra"))).response.member_id
    b = h.join("", client="b", protocols=(("roundrobin", b"rb"), ("range", b"mb"))).response.member_id
    ja = h.join(a, client="a", protocols=(("range", b"ma"), ("roundrobin", b"ra")))
    jb = h.join(b, client="b", protocols=(("roundrobin", b"rb"), ("range", b"mb")))
    assert ja.pending and jb.pending and h.group().state is S.PREPARING_REBALANCE
    assert h.c.next_deadline() == 3000
    h.advance(3000)
    # b arrived during the first delay, so the group waits one more delay for stragglers
    assert h.answer(ja) is None and h.c.next_deadline() == 6000
    h.advance(2999)
    assert h.answer(ja) is None
    h.advance(1)
    ra, rb = h.answer(ja), h.answer(jb)
    assert ra.error is E.NONE and rb.error is E.NONE
    assert ra.generation_id == rb.generation_id == 1
    # a tie (one vote each) goes to the first member's preference
    assert ra.protocol_name == rb.protocol_name == "range"
    assert ra.leader == rb.leader == a
    assert [(m.member_id, m.metadata) for m in ra.members] == [(a, b"ma"), (b, b"mb")]
    assert rb.members == ()
    assert h.group().state is S.COMPLETING_REBALANCE

    sb = h.sync(b, 1)
    assert sb.pending is not None  # the follower waits for the leader
    h.auto_write = False
    sa = h.sync(a, 1, {a: b"A", b: b"B"})
    assert sa.pending is not None and len(h.held) == 1
    assert h.group().state is S.COMPLETING_REBALANCE  # nothing visible before the write
    assert h.answer(sb) is None
    h.release_writes()
    assert h.answer(sa).assignment == b"A" and h.answer(sb).assignment == b"B"
    assert h.answer(sb).protocol_name == "range"
    assert h.group().state is S.STABLE
    # a late sync in Stable is answered at once
    assert h.sync(b, 1).response.assignment == b"B"
    assert h.heartbeat(a, 1).error is E.NONE


def test_majority_vote_chooses_protocol(h):
    a = h.join("", client="a").response.member_id
    b = h.join("", client="b").response.member_id
    c = h.join("", client="c").response.member_id
    protos = {a: (("x", b"1"), ("y", b"1")), b: (("y", b"2"), ("x", b"2")), c: (("y", b"3"), ("x", b"3"))}
    results = [h.join(m, protocols=protos[m]) for m in (a, b, c)]
    # a's join completed alone first; rejoin it so all three meet in one barrier
    h.join(a, protocols=protos[a])
    assert h.group().protocol_name == "y"
    assert results[2].response is None or results[2].response.protocol_name == "y"


def test_inconsistent_protocols_and_bad_session_timeout(h):
    _leader, _ = h.stable_group(2)
    r = h.join("", client="x", protocols=(("sticky", b""),))
    assert r.response.error is E.INCONSISTENT_GROUP_PROTOCOL
    r = h.join("", client="x", protocol_type="connect")
    assert r.response.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("", client="x", session=10).response.error is E.INVALID_SESSION_TIMEOUT
    assert h.join("", group="").response.error is E.INVALID_GROUP_ID
    assert h.join("someone", group="nope").response.error is E.UNKNOWN_MEMBER_ID
    assert "nope" not in h.c.groups


def test_barrier_waits_for_every_known_member(h):
    a, b, c = h.stable_group(3)
    assert h.join(a).pending is not None  # the leader asks for a rebalance
    assert h.group().state is S.PREPARING_REBALANCE
    assert h.heartbeat(b, 1).error is E.REBALANCE_IN_PROGRESS
    assert h.sync(c, 1).response.error is E.REBALANCE_IN_PROGRESS
    rb = h.join(b)
    assert rb.pending is not None and h.group().state is S.PREPARING_REBALANCE
    rc = h.join(c)
    assert rc.response.generation_id == 2  # the last one in completes the barrier for everyone
    assert h.answer(rb).generation_id == 2
    assert h.heartbeat(b, 1).error is E.ILLEGAL_GENERATION
    assert h.group().state is S.COMPLETING_REBALANCE


def test_member_that_never_rejoins_is_removed_at_rebalance_timeout(h):
    a, b = h.stable_group(2)
    ra = h.join(a)
    assert ra.pending is not None
    # b heartbeats (so its session stays alive) but never rejoins
    for _ in range(REBALANCE // 5000 - 1):
        h.advance(5000)
        assert h.heartbeat(b, 1).error is E.REBALANCE_IN_PROGRESS
    h.advance(4999)
    assert h.answer(ra) is None
    h.advance(1)
    response = h.answer(ra)
    assert response.error is E.NONE and response.generation_id == 2
    assert [m.member_id for m in response.members] == [a]
    assert b not in h.group().members
    assert h.heartbeat(b, 2).error is E.UNKNOWN_MEMBER_ID


def test_session_timeout_removes_member_and_rebalances(h):
    a, b = h.stable_group(2)
    for _ in range(3):  # a keeps heartbeating, b is silent
        h.advance(SESSION // 3)
        assert h.heartbeat(a, 1).error is E.NONE
    h.advance(SESSION // 3)
    assert b not in h.group().members
    assert h.group().state is S.PREPARING_REBALANCE
    assert h.heartbeat(a, 1).error is E.REBALANCE_IN_PROGRESS
    r = h.join(a)
    assert r.response.generation_id == 2 and r.response.leader == a


def test_leader_leaving_hands_leadership_over(h):
    a, b, c = h.stable_group(3)
    response = h.leave((a, None))
    assert response.error is E.NONE and response.members[0].error is E.NONE
    assert h.group().leader_id in (b, c) and h.group().state is S.PREPARING_REBALANCE
    h.join(b)
    r = h.join(c)
    assert r.response.leader == h.group().leader_id


def test_leave_batch_reports_each_member(h):
    a, b, c = h.stable_group(3)
    response = h.leave((b, None), ("ghost", None), (c, "wrong-instance"))
    assert [m.error for m in response.members] == [E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    assert set(h.group().members) == {a, c}


def test_unsynced_member_is_removed_at_the_sync_deadline(h):
    a, b = h.stable_group(2)
    h.join(a)
    h.join(b)
    assert h.group().state is S.COMPLETING_REBALANCE
    sa = h.sync(a, 2, {a: b"x", b: b"y"})
    assert h.answer(sa).error is E.NONE  # leader's assignment persisted; Stable
    assert h.group().state is S.STABLE
    for _ in range(REBALANCE // 5000):
        h.advance(5000)
        h.heartbeat(a, 2)
        h.heartbeat(b, 2)  # b heartbeats but never sends SyncGroup
    assert b not in h.group().members
    assert h.group().state is S.PREPARING_REBALANCE


def test_member_id_required_member_blocks_the_barrier_until_it_expires(h):
    a, b = h.stable_group(2)
    pending_id = h.join("", client="late").response.member_id  # MEMBER_ID_REQUIRED, never comes back
    ra = h.join(a)
    rb = h.join(b)
    assert rb.pending is not None and h.group().state is S.PREPARING_REBALANCE
    assert pending_id in h.group().pending_members
    h.advance(SESSION)
    assert pending_id not in h.group().pending_members
    assert h.answer(ra).generation_id == 2 and h.answer(rb).generation_id == 2


def test_pending_member_rejoining_completes_the_barrier(h):
    a, b = h.stable_group(2)
    c = h.join("", client="c").response.member_id
    ra, rb = h.join(a), h.join(b)
    rc = h.join(c, client="c")
    assert rc.response.generation_id == 2
    assert {m.member_id for m in h.answer(ra).members} == {a, b, c}
    assert h.answer(rb).members == ()


def test_initial_delay_extends_while_members_arrive(make_harness):
    h = make_harness(initial_rebalance_delay_ms=3000)
    r1 = h.join("", client="a", require_known=False)
    assert r1.pending is not None
    h.advance(2000)
    r2 = h.join("", client="b", require_known=False)
    h.advance(1000)  # first delay over, but b arrived during it: wait another delay
    assert h.answer(r1) is None
    h.advance(3000)
    assert h.answer(r1).generation_id == 1 and h.answer(r2).generation_id == 1
    assert len(h.answer(r1).members) == 2


def test_initial_delay_is_capped_by_the_rebalance_timeout(make_harness):
    h = make_harness(initial_rebalance_delay_ms=3000)
    results = [h.join("", client="a", require_known=False, rebalance=5000)]
    for i in range(4):  # a new member every second: the delay would extend forever without a cap
        h.advance(1000)
        results.append(h.join("", client=f"m{i}", require_known=False, rebalance=5000))
    h.advance(999)
    assert all(h.answer(r) is None for r in results)
    h.advance(1)  # t = 5000: the rebalance timeout caps the waiting
    assert all(h.answer(r).generation_id == 1 for r in results)
    assert len(h.answer(results[0]).members) == 5


def test_join_retry_replaces_the_earlier_call(h):
    a, b = h.stable_group(2)
    first = h.join(a)
    second = h.join(a)
    assert h.answer(first).error is E.REBALANCE_IN_PROGRESS
    h.join(b)
    assert h.answer(second).generation_id == 2


def test_max_group_size(make_harness):
    h = make_harness(max_size=2)
    h.stable_group(2)
    assert h.join("", client="third").response.error is E.GROUP_MAX_SIZE_REACHED


def test_failed_assignment_write_restarts_the_rebalance(h):
    a, b = h.stable_group(2)
    h.join(a)
    h.join(b)
    sb = h.sync(b, 2)
    h.auto_write = False
    sa = h.sync(a, 2, {a: b"x", b: b"y"})
    h.release_writes(E.COORDINATOR_NOT_AVAILABLE)
    assert h.answer(sa).error is E.COORDINATOR_NOT_AVAILABLE
    assert h.answer(sb).error is E.COORDINATOR_NOT_AVAILABLE
    assert h.group().state is S.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in h.group().members.values())


def test_stale_assignment_write_is_ignored(h):
    a, b = h.stable_group(2)
    h.join(a)
    h.join(b)
    h.auto_write = False
    sa = h.sync(a, 2, {a: b"x", b: b"y"})
    h.auto_write = True
    h.join(b, protocols=(("range", b"new"),))  # rebalance starts while the write is in flight
    assert h.answer(sa).error is E.REBALANCE_IN_PROGRESS
    h.auto_write = False
    h.join(a)
    assert h.group().generation_id == 3 and h.group().state is S.COMPLETING_REBALANCE
    h.release_writes()  # the generation-2 assignment lands late
    assert h.group().state is S.COMPLETING_REBALANCE
    assert all(m.assignment == b"" for m in h.group().members.values())


# ---------------------------------------------------------------------------------------------------
# Static membership


def static_group(h):
    ra = h.join("", client="a", instance="ia")
    rb = h.join("", client="b", instance="ib")
    a, b = ra.response.member_id, h.answer(rb).member_id if h.answer(rb) else rb.pending.member_id
    # a's first join completed alone; a rejoins so both meet in one barrier
    h.join(a, client="a", instance="ia")
    gen = h.group().generation_id
    h.sync(b, gen, instance="ib")
    h.sync(a, gen, {a: b"A", b: b"B"}, instance="ia")
    assert h.group().state is S.STABLE
    return a, b, gen


def test_static_member_gets_no_member_id_required(h):
    r = h.join("", client="a", instance="ia")
    assert r.response.error is E.NONE and r.response.member_id.startswith("a-")
    assert h.group().static_members == {"ia": r.response.member_id}


def test_static_rejoin_with_same_metadata_keeps_the_generation(h):
    a, b, gen = static_group(h)
    h.auto_write = False
    r = h.join("", client="b2", instance="ib")
    assert r.pending is not None and len(h.held) == 1
    assert h.group().static_members["ib"] == b  # nothing replaced before the write
    h.release_writes()
    response = h.answer(r)
    new_b = response.member_id
    assert response.error is E.NONE and new_b != b
    assert response.generation_id == gen and response.leader == a and response.members == ()
    assert h.group().state is S.STABLE and h.group().generation_id == gen
    assert h.group().static_members["ib"] == new_b
    assert h.sync(new_b, gen, instance="ib").response.assignment == b"B"  # keeps its assignment
    assert h.heartbeat(b, gen, instance="ib").error is E.FENCED_INSTANCE_ID
    assert h.heartbeat(new_b, gen, instance="ib").error is E.NONE
    assert h.leave((b, "ib")).members[0].error is E.FENCED_INSTANCE_ID
    result = h.run(h.c.commit_offsets("g", [("t", 0, 1)], member_id=b, generation_id=gen,
                                      group_instance_id="ib", now_ms=h.now))
    assert result.response.error is E.FENCED_INSTANCE_ID


def test_static_leader_rejoin_old_client_sees_previous_leader(h):
    a, _b, _gen = static_group(h)
    response = h.answer(h.join("", client="a2", instance="ia"))
    assert response.leader == a and response.member_id != a and response.members == ()
    assert h.group().leader_id == response.member_id
    assert h.group().state is S.STABLE


def test_static_leader_rejoin_with_skip_assignment(h):
    _a, b, _gen = static_group(h)
    response = h.answer(h.join("", client="a2", instance="ia", supports_skip_assignment=True))
    assert response.skip_assignment is True and response.leader == response.member_id
    assert {m.member_id for m in response.members} == {response.member_id, b}


def test_static_rejoin_with_new_metadata_rebalances(h):
    a, b, gen = static_group(h)
    r = h.join("", client="b2", instance="ib", protocols=(("range", b"other-topics"),))
    assert r.pending is not None
    assert h.group().state is S.PREPARING_REBALANCE
    new_b = r.pending.member_id
    assert h.heartbeat(b, gen, instance="ib").error is E.FENCED_INSTANCE_ID
    h.join(a, client="a", instance="ia")
    assert h.answer(r).generation_id == gen + 1 and h.answer(r).member_id == new_b


def test_static_replacement_fences_the_waiting_old_process(h):
    _a, b, _gen = static_group(h)
    old_join = h.join(b, client="b", instance="ib", protocols=(("range", b"v2"),))
    assert old_join.pending is not None
    h.join("", client="b-restarted", instance="ib", protocols=(("range", b"v2"),))
    assert h.answer(old_join).error is E.FENCED_INSTANCE_ID


def test_failed_static_replacement_keeps_the_old_member(h):
    _a, b, gen = static_group(h)
    h.auto_write = False
    r = h.join("", client="b2", instance="ib")
    h.release_writes(E.NOT_COORDINATOR)
    assert h.answer(r).error is E.NOT_COORDINATOR
    assert h.group().static_members["ib"] == b
    assert h.heartbeat(b, gen, instance="ib").error is E.NONE


def test_static_member_removed_by_instance_id(h):
    _a, b, _gen = static_group(h)
    response = h.leave(("", "ib"), ("", "unknown"))
    assert [m.error for m in response.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert "ib" not in h.group().static_members and b not in h.group().members


# ---------------------------------------------------------------------------------------------------
# Views and timers


def test_describe_and_list(h):
    a, b = h.stable_group(2)
    d = h.c.describe("g")
    assert d.state == "Stable" and d.protocol_type == "consumer" and d.protocol_data == "range"
    assert {(m.member_id, m.assignment) for m in d.members} == {(a, f"a-{a}".encode()), (b, f"a-{b}".encode())}
    h.join(a)
    d = h.c.describe("g")
    assert d.state == "PreparingRebalance" and d.protocol_data == "" and d.members[0].assignment == b""
    assert h.c.describe("missing").state == "Dead"
    h.run(h.c.commit_offsets("simple", [("t", 0, 1)], now_ms=h.now))
    listing = h.c.list_groups()
    assert [(g.group_id, g.protocol_type, g.state) for g in listing] == [
        ("g", "consumer", "PreparingRebalance"), ("simple", "", "Empty")]
    assert [g.group_id for g in h.c.list_groups(states=["empty"])] == ["simple"]
    assert h.c.list_groups(types=["consumer"]) == []
    assert len(h.c.list_groups(types=["classic"])) == 2


def test_next_deadline_tracks_the_earliest_timer(h):
    assert h.c.next_deadline() is None
    a, b = h.stable_group(2)
    assert h.c.next_deadline() == h.now + SESSION
    h.advance(1000)
    h.heartbeat(a, 1)
    h.heartbeat(b, 1)
    assert h.c.next_deadline() == h.now + SESSION
    h.join(a)
    assert h.c.next_deadline() == h.now + SESSION  # b's session, before the 30 s rebalance timeout
    h.heartbeat(b, 1)
    r = h.c.tick(h.now)  # nothing due: nothing happens
    assert r.completed == [] and r.writes == []
