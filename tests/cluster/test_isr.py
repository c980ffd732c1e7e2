"""The leader's ISR and high-watermark arithmetic (cluster/isr.py)."""

from __future__ import annotations

from eoslog.cluster.isr import LeaderIsr


def leader(isr=(1, 2, 3), now=0):
    return LeaderIsr.become_leader(1, 5, 100, (1, 2, 3), isr, now)


def test_high_watermark_is_minimum_over_isr_and_waits_for_unknown_followers():
    state = leader()
    assert state.high_watermark(150) == -1  # followers have not fetched yet
    state.record_fetch(2, 140, 150, 10)
    state.record_fetch(3, 120, 150, 10)
    assert state.high_watermark(150) == 120
    assert state.high_watermark(110) == 110  # never past what the leader holds durably


def test_members_outside_the_isr_do_not_hold_the_high_watermark_back():
    state = leader(isr=(1, 2))
    state.record_fetch(2, 150, 150, 10)
    state.record_fetch(3, 0, 150, 10)
    assert state.high_watermark(150) == 150


def test_a_pending_removal_still_counts_a_pending_addition_counts_at_once():
    state = leader(isr=(1, 2))
    state.record_fetch(2, 150, 150, 10)
    state.record_fetch(3, 130, 150, 10)
    state.propose((1, 2, 3))
    assert state.high_watermark(150) == 130
    state.commit((1, 2, 3))
    state.propose((1, 2))
    assert state.high_watermark(150) == 130  # 3 still counts until ZooKeeper has the smaller ISR
    state.commit((1, 2))
    assert state.high_watermark(150) == 150


def test_lagging_followers_leave_after_the_lag_time():
    state = leader(now=1_000)
    state.record_fetch(2, 150, 150, 5_000)  # caught up at 5 s
    state.record_fetch(3, 100, 150, 5_000)  # behind
    assert state.out_of_sync(31_001, 30_000) == (3,)
    assert state.out_of_sync(31_000, 30_000) == ()  # the grace period from becoming leader (at 1 s)


def test_caught_up_as_of_previous_fetch():
    state = leader(now=0)
    state.record_fetch(2, 100, 150, 1_000)  # leader end 150 at this fetch
    state.record_fetch(2, 150, 200, 2_000)  # reached 150: caught up as of the 1 s fetch
    assert state.followers[2].last_caught_up_ms == 1_000


def test_join_needs_the_high_watermark_and_the_epoch_start():
    state = leader(isr=(1,))
    state.record_fetch(2, 90, 150, 10)
    assert not state.may_join(2, 80)  # below the epoch start offset 100
    state.record_fetch(2, 120, 150, 20)
    assert not state.may_join(2, 130)
    assert state.may_join(2, 120)
    assert not state.may_join(1, 0)  # the leader is in already
