"""console/transaction_groups.progress: the transaction groups page's judgement of a group, without I/O."""

from __future__ import annotations

from eoslog.console.transaction_groups import STUCK_COMMIT_MS, Group, OpenTransaction, progress

NOW = 1_800_000_000_000


def group(state: str = "CompleteCommit", committed_ago_ms: int = 1000, in_flight: bool = False,
          open_: tuple[bool, ...] = ()) -> Group:
    return Group("eoslog-sink-s-q", state, in_flight, 7, NOW - committed_ago_ms, [],
                 [OpenTransaction(f"eoslog-sink-s-q-8-{i}", i, 0, hanging=h) for i, h in enumerate(open_)])


def test_a_commit_point_not_completed_in_time_is_stuck():
    assert progress(group("PrepareCommit", 10), NOW, 60_000) == ("committing batch 7", False)
    status, stuck = progress(group("PrepareCommit", STUCK_COMMIT_MS + 1), NOW, 60_000)
    assert stuck and status.startswith("stuck committing batch 7")


def test_open_transactions_of_the_next_batch():
    assert progress(group(open_=(False, False)), NOW, 60_000) == (
        "writing the next batch (2 open transactions); batch 7 committed", False)
    status, stuck = progress(group(open_=(False, True)), NOW, 60_000)
    assert stuck and status.startswith("1 transaction of the next batch open longer")


def test_deciding_and_idle():
    assert progress(group(in_flight=True, open_=(True,)), NOW, 60_000) == ("a commit is being decided", False)
    assert progress(group(committed_ago_ms=10**9), NOW, 60_000) == ("idle: batch 7 committed, nothing open", False)
