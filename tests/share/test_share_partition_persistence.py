"""Lock expiry, a member's release, the log start offset, reset, and the state the share coordinator keeps."""

from __future__ import annotations

import pytest
from share_helpers import CONFIG, LIMIT, LOCK_MS, S, ack, batches, offsets, overlay, partition, run

from eoslog.share import (
    AcknowledgeType,
    OffsetRange,
    PersistedState,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)

A = AcknowledgeType
B = StateBatch


def test_locks_expire_at_their_deadline():
    p = partition(run(0, 4, S.ACQUIRED, 1, deadline=100), run(5, 9, S.ACQUIRED, 1, member="n", deadline=200))
    assert p.next_deadline() == 100
    assert p.expire_locks(99).after == p and p.expire_locks(99).update is None
    change = p.expire_locks(100)
    assert change.released == (OffsetRange(0, 4),)
    assert offsets(change.after)[0] == (S.AVAILABLE, 1, None) and change.after.next_deadline() == 200
    assert change.after.next_fetch_offset() == 0
    assert change.update == PersistedState(0, 0, (B(0, 4, S.AVAILABLE, 1),))
    assert p.expire_locks(200).released == (OffsetRange(0, 9),)
    assert partition(run(0, 0, S.AVAILABLE, 1)).next_deadline() is None


def test_an_expired_lock_at_the_delivery_limit_archives():
    p = partition(run(0, 4, S.ACQUIRED, LIMIT), run(5, 6, S.ACQUIRED, 1, deadline=10 * LOCK_MS))
    change = p.expire_locks(LOCK_MS)
    assert change.after.start_offset == 5 and change.update == PersistedState(5, 0, ())


def test_release_member_gives_back_only_that_members_records():
    p = partition(run(0, 1, S.ACQUIRED, 1), run(2, 3, S.ACQUIRED, 2, member="n"), run(4, 5, S.ACQUIRED, LIMIT))
    change = p.release_member("m")
    assert change.released == (OffsetRange(0, 1), OffsetRange(4, 5))
    assert offsets(change.after) == {0: (S.AVAILABLE, 1, None), 1: (S.AVAILABLE, 1, None),
                                     2: (S.ACQUIRED, 2, "n"), 3: (S.ACQUIRED, 2, "n"),
                                     4: (S.ARCHIVED, LIMIT, None), 5: (S.ARCHIVED, LIMIT, None)}
    assert change.after.acquired_count() == 2 and change.after.acquired_count("m") == 0


def test_snapshot_and_load_round_trip():
    p = partition(run(3, 4, S.AVAILABLE, 1), run(5, 6, S.ACQUIRED, 2), run(7, 7, S.ACKNOWLEDGED, 1),
                  run(8, 9, S.ARCHIVED, 3), run(10, 12, S.ACQUIRED, 1, member="n"), epoch=4)
    snapshot = p.snapshot()
    assert snapshot == PersistedState(3, 4, (B(3, 4, S.AVAILABLE, 1), B(5, 6, S.AVAILABLE, 2), B(7, 7, S.ACKNOWLEDGED, 1),
                                             B(8, 9, S.ARCHIVED, 3), B(10, 12, S.AVAILABLE, 1)))
    loaded = SharePartition.load(CONFIG, snapshot)
    assert loaded == p.release_member("m").after.release_member("n").after  # every lock gone, nothing else
    assert offsets(loaded)[5] == (S.AVAILABLE, 2, None)  # no lock survives a leader change
    assert loaded.snapshot() == snapshot and loaded.state_epoch == 4 and loaded.end_offset == 13


def test_load_fills_gaps_with_never_delivered_records_and_ignores_what_is_below_the_start():
    persisted = PersistedState(5, 1, (B(0, 6, S.ACKNOWLEDGED, 1), B(9, 9, S.ARCHIVED, 2), B(12, 13, S.ACQUIRED, 1)))
    loaded = SharePartition.load(CONFIG, persisted)
    assert (loaded.start_offset, loaded.end_offset) == (7, 14)
    assert loaded.snapshot().state_batches == (B(7, 8, S.AVAILABLE, 0), B(9, 9, S.ARCHIVED, 2),
                                               B(10, 11, S.AVAILABLE, 0), B(12, 13, S.AVAILABLE, 1))
    assert SharePartition.load(CONFIG, PersistedState(8, 0, ())) == SharePartition.initial(CONFIG, 8)


@pytest.mark.parametrize("state_batches", [
    (B(0, 4, S.AVAILABLE, 1), B(4, 5, S.AVAILABLE, 1)),  # overlapping
    (B(6, 7, S.AVAILABLE, 1), B(0, 1, S.AVAILABLE, 1)),  # out of order
    (B(0, 4, S.AVAILABLE, -1),),  # a negative delivery count
])
def test_a_corrupt_state_is_refused(state_batches):
    with pytest.raises(ValueError):
        SharePartition.load(CONFIG, PersistedState(0, 0, state_batches))


def test_updates_laid_over_the_snapshot_give_the_next_snapshot():
    p = SharePartition.initial(CONFIG, 0)
    stored = p.snapshot()
    steps = [
        lambda p: p.acquire("m", 0, batches((0, 4), (5, 9)), now_ms=0, max_records=100, upper_bound=100),
        lambda p: p.acknowledge("m", [ack(0, 9, A.ACCEPT, A.RELEASE, A.ACCEPT, A.REJECT, A.GAP,
                                          A.ACCEPT, A.ACCEPT, A.RENEW, A.RELEASE, A.ACCEPT)], now_ms=1),
        lambda p: p.acquire("n", 1, batches((0, 9), (10, 14)), now_ms=2, max_records=100, upper_bound=100),
        lambda p: p.expire_locks(LOCK_MS + 2),
        lambda p: p.advance_log_start_offset(3),
    ]
    for step in steps:
        change = step(p)
        p = change.after
        if change.update is not None:
            stored = overlay(stored, change.update)
        assert stored.start_offset == p.start_offset
        assert stored.state_batches == p.snapshot().state_batches


def test_advance_log_start_offset():
    p = partition(run(0, 4, S.ACQUIRED, 1), run(5, 9, S.AVAILABLE, 1))
    assert p.advance_log_start_offset(0).after == p
    moved = p.advance_log_start_offset(3).after
    assert (moved.start_offset, moved.end_offset, offsets(moved)[3]) == (3, 10, (S.ACQUIRED, 1, "m"))
    past = p.advance_log_start_offset(20)
    assert (past.after.start_offset, past.after.end_offset, past.after.in_flight) == (20, 20, ())
    assert past.update == PersistedState(20, 0, ())
    assert partition(run(0, 4, S.ACQUIRED, 1), run(5, 6, S.ARCHIVED, 1), run(7, 7, S.ACQUIRED, 1)
                     ).advance_log_start_offset(5).after.start_offset == 7


def test_reset_forgets_everything_and_asks_for_a_snapshot():
    p = partition(run(0, 4, S.ACQUIRED, 1), epoch=2)
    change = p.reset(42, state_epoch=3)
    assert change.snapshot_required and change.update is None
    assert change.after == SharePartition.initial(CONFIG, 42, 3) and change.after.snapshot() == PersistedState(42, 3, ())
    assert p.reset(1).after.state_epoch == 2


@pytest.mark.parametrize("bad", [{"delivery_count_limit": 1}, {"max_record_locks": 0},
                                 {"record_lock_duration_ms": 0}])
def test_config_refuses_nonsense(bad):
    with pytest.raises(ValueError):
        SharePartitionConfig(**bad)


def test_defaults_are_kafka_42s():
    assert SharePartitionConfig() == SharePartitionConfig(delivery_count_limit=5, max_record_locks=2000,
                                                          record_lock_duration_ms=30_000)


@pytest.mark.parametrize("runs,start,end", [
    ((run(0, 4, S.AVAILABLE, 1), run(6, 7, S.AVAILABLE, 1)), 0, 8),  # a gap
    ((run(0, 4, S.AVAILABLE, 1),), 1, 5),  # not starting at the start offset
    ((run(0, 4, S.AVAILABLE, 1),), 0, 6),  # not ending at the end offset
    ((run(0, 4, S.ACKNOWLEDGED, 1),), 0, 5),  # a done record at the start
    ((run(0, 4, S.AVAILABLE, 1, member="m"),), 0, 5),  # an owner without a lock
])
def test_broken_runs_are_refused(runs, start, end):
    with pytest.raises(ValueError):
        partition(*runs, start=start, end=end)
