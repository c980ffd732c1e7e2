"""The leader's ISR and high-watermark arithmetic (cluster/isr.py)."""

from __future__ import annotations

from eoslog.cluster.isr import RESTARTED_BROKER_EPOCH, LeaderIsr


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


# ---- KIP-903: a follower's broker epoch -----------------------------------------------------------------

def test_a_fetch_under_a_new_broker_epoch_is_a_restart_and_resets_what_the_follower_reported():
    state = LeaderIsr.become_leader(1, 5, 100, (1, 2, 3), (1, 2, 3), 0, {2: 40, 3: 41})
    assert not state.record_fetch(2, 150, 150, 10, broker_epoch=40)
    assert state.restarted_members({2: 40, 3: 41}) == ()
    assert state.record_fetch(2, 150, 150, 20, broker_epoch=77)  # restarted: its page cache may be gone
    assert state.followers[2].restarted and state.followers[2].broker_epoch == 77
    assert state.restarted_members({2: 77, 3: 41}) == (2,)  # even though its view is current and it is caught up
    state.commit((1, 3))
    assert not state.followers[2].restarted
    assert state.may_join(2, 150, registered_epoch=77)  # caught up under the new epoch


def test_a_fetch_without_a_broker_epoch_changes_nothing():
    state = LeaderIsr.become_leader(1, 5, 100, (1, 2, 3), (1, 2, 3), 0, {2: 40})
    assert not state.record_fetch(2, 150, 150, 10)  # Fetch before v15
    assert state.followers[2].broker_epoch == 40
    assert not state.record_fetch(3, 150, 150, 10, broker_epoch=41)  # first epoch heard: adopted
    assert state.followers[3].broker_epoch == 41


def test_an_isr_member_whose_registration_is_newer_than_its_fetches_is_restarted_before_it_fetches():
    state = LeaderIsr.become_leader(1, 5, 100, (1, 2, 3), (1, 2, 3), 0, {2: 40, 3: 41})
    state.record_fetch(2, 150, 150, 10, broker_epoch=40)
    assert state.restarted_members({2: 90, 3: 41}) == (2,)
    assert state.restarted_members({3: 41}) == ()  # not registered at all: the lag rule's business


def test_a_member_registered_after_the_state_counts_as_restarted_at_its_first_fetch():
    state = LeaderIsr.become_leader(1, 5, 100, (1, 2, 3), (1, 2, 3), 0, {2: RESTARTED_BROKER_EPOCH})
    assert state.restarted_members({2: 90}) == (2,)
    assert state.record_fetch(2, 150, 150, 10, broker_epoch=90)
    assert state.followers[2].restarted


def test_only_fetches_under_the_current_registration_earn_a_place():
    state = leader(isr=(1,))
    state.record_fetch(2, 150, 150, 10, broker_epoch=40)
    assert not state.may_join(2, 150, registered_epoch=90)  # an earlier life's fetch (KIP-903)
    assert state.may_join(2, 150, registered_epoch=40)
    assert state.may_join(2, 150)  # no registration known: the offsets decide, as before


def test_a_fetch_from_an_earlier_life_is_stale_and_changes_nothing():
    state = LeaderIsr.become_leader(1, 5, 100, (1, 2, 3), (1, 2, 3), 0, {2: 40})
    assert state.record_fetch(2, 0, 150, 10, broker_epoch=77)
    assert state.is_stale(2, 40) and not state.is_stale(2, 77) and not state.is_stale(2, -1)
    assert not state.record_fetch(2, 150, 150, 20, broker_epoch=40)  # left in a dead connection's buffer
    assert state.followers[2].broker_epoch == 77
