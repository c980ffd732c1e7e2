"""CommitTransactionGroup's one decision, the roll-forward step and the abort by prefix (sans-IO), driven
through the core's harness; and the roll-forward after a crash at every point of a group commit."""

from __future__ import annotations

import pytest
from txn_harness import Harness

from eoslog.coordinator.transaction.decisions import TxnError
from eoslog.coordinator.transaction.log_format import load_state
from eoslog.coordinator.transaction.metadata import TransactionResult
from eoslog.coordinator.transaction.state import TransactionState as S
from eoslog.coordinator.transaction_groups import decisions as gd
from eoslog.coordinator.transaction_groups.decisions import MemberStep
from eoslog.coordinator.transaction_groups.log_format import (
    GroupMember,
    GroupRecord,
    GroupState,
    encode_group_key,
    encode_group_value,
    load_groups,
)

E = TxnError


def ongoing(h: Harness, tid: str) -> GroupMember:
    d = h.init(tid)
    h.add(tid, d.producer_id, d.producer_epoch, ("out", 0), ("out", 1))
    return GroupMember(tid, d.producer_id, d.producer_epoch)


def empty(h: Harness, tid: str) -> GroupMember:
    d = h.init(tid)
    return GroupMember(tid, d.producer_id, d.producer_epoch)


def decide(h: Harness, members, *, group=None, busy=False, sequence=5, prefix=None, pinned=(), name="grp"):
    return gd.decide_commit(group, busy, name, sequence, prefix, list(members), h.states.get, set(pinned), h.now)


def committed(sequence: int, *members) -> GroupRecord:
    return GroupRecord("grp", sequence, GroupState.COMPLETE_COMMIT, 1, tuple(members))


# ---- the decision, case by case (docs/spark.md numbering) ------------------------------------------------

@pytest.mark.parametrize("kwargs,members", [
    ({"name": ""}, []),
    ({"sequence": -1}, []),
    ({}, [GroupMember("a", 1, 0), GroupMember("a", 1, 0)]),
    ({}, [GroupMember("", 1, 0)]),
    ({"prefix": "short"}, []),
])
def test_1_malformed_changes_nothing(harness, kwargs, members):
    decision = decide(harness, members, **kwargs)
    assert decision.error is E.INVALID_REQUEST and decision.record is None and not decision.abort
    assert decision.abort_prefix is None


def test_2_anything_in_flight_is_concurrent(harness):
    h = harness
    a, b = ongoing(h, "a"), ongoing(h, "b")
    assert decide(h, [a], busy=True).error is E.CONCURRENT_TRANSACTIONS
    in_prepare = GroupRecord("grp", 3, GroupState.PREPARE_COMMIT, 1, ())
    assert decide(h, [a], group=in_prepare).error is E.CONCURRENT_TRANSACTIONS
    assert decide(h, [a, b], pinned={"b"}).error is E.CONCURRENT_TRANSACTIONS
    h.states["b"].prepare_add_partitions([], h.now)  # a transit pending on a member
    assert decide(h, [a, b]).error is E.CONCURRENT_TRANSACTIONS
    h.states["b"].abort_transition()
    h.end("b", b.producer_id, b.producer_epoch)  # PrepareCommit: markers in flight
    decision = decide(h, [a, b])
    assert decision.error is E.CONCURRENT_TRANSACTIONS and decision.record is None and not decision.abort
    assert decision.member_errors == (E.CONCURRENT_TRANSACTIONS,) * 2


def test_3_already_committed_aborts_what_is_open_under_the_given_identity(harness):
    h = harness
    replay, other_epoch, done = ongoing(h, "r"), ongoing(h, "o"), ongoing(h, "d")
    h.markers_done("d", h.end("d", done.producer_id, done.producer_epoch).write_markers)  # CompleteCommit
    stale = other_epoch._replace(producer_epoch=other_epoch.producer_epoch + 1)  # not its identity
    decision = decide(h, [replay, stale, done, GroupMember("unknown", 9, 9)], group=committed(5), sequence=5,
                      prefix="prefix-of-query-")
    assert decision.error is E.NONE and decision.already_committed and decision.last_committed_sequence == 5
    assert decision.abort == (replay,)  # not the fenced identity, not the completed one, not the unknown id
    assert decision.record is None
    assert decision.abort_prefix == "prefix-of-query-" and decision.requested == {"r", "o", "d", "unknown"}
    assert decide(h, [replay], group=committed(5), sequence=2).already_committed  # lower: also replayed
    # the abort itself is EndTxn(abort)'s decision
    abort = gd.abort_member(h.states["r"], replay, h.now)
    assert abort.transit.state is S.PREPARE_ABORT and abort.transit.producer_epoch == replay.producer_epoch
    assert abort.write_markers.result is TransactionResult.ABORT
    h.states["r"].abort_transition()
    assert gd.abort_member(h.states["o"], stale, h.now).transit is None


def test_4_validation_failure_commits_nothing_and_aborts_the_open_members(harness):
    h = harness
    good, fenced, wrong_pid, ended = ongoing(h, "good"), ongoing(h, "fenced"), ongoing(h, "pid"), empty(h, "ended")
    h.end("ended", ended.producer_id, ended.producer_epoch, TransactionResult.ABORT)  # Empty: NONE, stays Empty
    h.add("ended", ended.producer_id, ended.producer_epoch)
    d = h.end("ended", ended.producer_id, ended.producer_epoch, TransactionResult.ABORT)
    h.markers_done("ended", d.write_markers)  # CompleteAbort
    members = [good, GroupMember("fenced", fenced.producer_id, fenced.producer_epoch + 1),
               GroupMember("pid", wrong_pid.producer_id + 100, wrong_pid.producer_epoch), ended,
               GroupMember("nobody", 1, 1)]
    decision = decide(h, members, group=committed(4), sequence=5)
    assert decision.member_errors == (E.NONE, E.PRODUCER_FENCED, E.INVALID_PRODUCER_ID_MAPPING,
                                      E.INVALID_TXN_STATE, E.TRANSACTIONAL_ID_NOT_FOUND)
    assert decision.error is E.PRODUCER_FENCED  # the first failing member's
    assert decision.record is None and decision.last_committed_sequence == 4 and not decision.already_committed
    assert decision.abort == (good,)


def test_5_commit_records_the_open_members_and_ignores_empty_ones(harness):
    h = harness
    a, b, idle = ongoing(h, "a"), ongoing(h, "b"), empty(h, "idle")
    decision = decide(h, [a, idle, b], group=committed(4), sequence=9, prefix="abandoned-")
    assert decision.error is E.NONE and not decision.already_committed
    assert decision.member_errors == (E.NONE,) * 3 and decision.last_committed_sequence == 9
    assert decision.record == GroupRecord("grp", 9, GroupState.PREPARE_COMMIT, h.now, (a, b))
    assert not decision.abort and decision.abort_prefix == "abandoned-"
    first = decide(h, [a], sequence=0)  # an unknown group commits from sequence 0 on
    assert first.record.sequence == 0 and first.last_committed_sequence == 0


# ---- roll-forward ---------------------------------------------------------------------------------------

def test_member_step_in_every_state(harness):
    h = harness
    m = ongoing(h, "m")
    assert gd.member_step(h.states["m"], m) is MemberStep.COMMIT
    assert gd.member_step(None, m) is MemberStep.DONE
    assert gd.member_step(h.states["m"], m._replace(producer_epoch=m.producer_epoch + 1)) is MemberStep.DONE
    decision = gd.commit_member(h.states["m"], m, h.now)
    assert decision.transit.state is S.PREPARE_COMMIT and decision.write_markers.result is TransactionResult.COMMIT
    assert decision.write_markers.partitions == {("out", 0), ("out", 1)}
    assert gd.member_step(h.states["m"], m) is MemberStep.WAIT  # its PrepareCommit is being logged
    h.carry_out("m", decision)
    assert gd.member_step(h.states["m"], m) is MemberStep.WAIT  # PrepareCommit: markers on their way
    h.markers_done("m", decision.write_markers)
    assert h.state("m") is S.COMPLETE_COMMIT and gd.member_step(h.states["m"], m) is MemberStep.DONE
    h.init("m")  # a later producer takes the id over
    assert gd.member_step(h.states["m"], m) is MemberStep.DONE


@pytest.mark.parametrize("crash_after", range(7))
def test_roll_forward_from_the_log_after_a_crash_at_every_point(harness, crash_after):
    """Log a group commit step by step, "crash" after ``crash_after`` steps, rebuild both caches from
    the log alone, and roll forward: every member ends CompleteCommit exactly when the commit point was
    logged, and markers are (re)written exactly for the members whose Complete record was not logged."""
    h = harness
    members = [ongoing(h, f"m{i}") for i in range(3)]
    decision = decide(h, members, sequence=1)
    steps = [lambda: h.log.append((encode_group_key("grp"), encode_group_value(decision.record)))]
    markers = {}
    for m in members:
        def prepare(m=m):
            d = gd.commit_member(h.states[m.transactional_id], m, h.now)
            h.carry_out(m.transactional_id, d)
            markers[m.transactional_id] = d.write_markers
        steps.append(prepare)
    for m in members:
        steps.append(lambda m=m: h.markers_done(m.transactional_id, markers[m.transactional_id]))
    for step in steps[:crash_after]:
        step()

    states, groups = load_state(h.log), load_groups(h.log)
    written = []
    group = groups.get("grp")
    if group is not None and group.state is GroupState.PREPARE_COMMIT:
        for member in group.members:
            metadata = states[member.transactional_id]
            while (step := gd.member_step(metadata, member)) is not MemberStep.DONE:
                if step is MemberStep.COMMIT:
                    d = gd.commit_member(metadata, member, h.now)
                    metadata.complete_transition(d.transit)
                    continue
                written.append(member.transactional_id)  # WAIT: (re)write the markers, then Complete
                metadata.complete_transition(metadata.prepare_complete(h.now))
    committed_now = crash_after >= 1
    for m in members:
        expected = S.COMPLETE_COMMIT if committed_now else S.ONGOING
        assert states[m.transactional_id].state is expected
    completed_before = max(0, crash_after - 1 - len(members))  # their Complete record was logged
    expected_markers = [m.transactional_id for m in members[completed_before:]] if committed_now else []
    assert sorted(written) == expected_markers


# ---- abort by prefix ------------------------------------------------------------------------------------

def test_prefix_candidates_and_the_abort(harness):
    h = harness
    for tid in ("q1-0", "q1-1", "q1-2", "q1-3", "q2-0"):
        ongoing(h, tid)
    empty(h, "q1-empty")
    h.states["q1-3"].prepare_add_partitions([], h.now)  # busy
    candidates = gd.prefix_abort_candidates(h.states.values(), "q1-", spared={"q1-0"}, pinned={"q1-1"})
    assert candidates == ["q1-2"]
    metadata = h.states["q1-2"]
    decision = gd.abort_by_prefix(metadata, h.now)
    assert decision.transit.state is S.PREPARE_ABORT
    assert decision.transit.producer_epoch == metadata.producer_epoch + 1  # the old producer is fenced
    assert decision.write_markers.producer_epoch == metadata.producer_epoch + 1
    assert gd.abort_by_prefix(h.states["q1-empty"], h.now).transit is None
    assert gd.validate_abort_prefix("12345678") is E.NONE
    assert gd.validate_abort_prefix("1234567") is E.INVALID_REQUEST
