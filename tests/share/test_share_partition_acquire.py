"""ShareFetch's acquisition: new records, redelivery, limits, modes, holes, aborted transactions, throttling."""

from __future__ import annotations

import pytest
from share_helpers import CONFIG, LOCK_MS, S, batches, offsets, partition, run

from eoslog.share import AcquiredRecords, AcquireMode, OffsetRange, SharePartition, SharePartitionConfig

R = AcquiredRecords
EMPTY = SharePartition.initial(CONFIG, 0)
TEN = batches((0, 4), (5, 9))


def acquire(p, log, *, member="m", fetch_offset=None, now=0, max_records=100, upper_bound=1000, **kwargs):
    fetch_offset = p.next_fetch_offset() if fetch_offset is None else fetch_offset
    return p.acquire(member, fetch_offset, log, now_ms=now, max_records=max_records, upper_bound=upper_bound,
                     **kwargs)


def test_new_records_are_acquired_as_one_run_under_one_lock():
    change = acquire(EMPTY, TEN, now=7)
    assert change.acquired_records == (R(0, 9, 1),) and change.acquired_count == 10
    assert change.after.in_flight == (run(0, 9, S.ACQUIRED, 1, deadline=7 + LOCK_MS),)
    assert (change.after.start_offset, change.after.end_offset, change.after.next_deadline()) == (0, 10, 7 + LOCK_MS)
    assert change.after.next_fetch_offset() == 10


def test_the_lock_duration_may_be_given_per_fetch():
    assert acquire(EMPTY, TEN, now=7, lock_ms=5).after.next_deadline() == 12


def test_batch_optimized_ends_at_a_batch_boundary_and_record_limit_does_not():
    assert acquire(EMPTY, TEN, max_records=3).acquired_records == (R(0, 4, 1),)
    record_limit = acquire(EMPTY, TEN, max_records=3, mode=AcquireMode.RECORD_LIMIT)
    assert record_limit.acquired_records == (R(0, 2, 1),) and record_limit.after.end_offset == 3
    # the rest of the batch comes with the next fetch, which reads the same batch again
    again = acquire(record_limit.after, TEN, max_records=3, mode=AcquireMode.RECORD_LIMIT, member="n")
    assert again.acquired_records == (R(3, 5, 1),)


def test_nothing_at_or_past_the_upper_bound():
    assert acquire(EMPTY, TEN, upper_bound=5).acquired_records == (R(0, 4, 1),)
    assert acquire(EMPTY, TEN, upper_bound=4).after == EMPTY  # the batch 0-4 is not all below it
    assert acquire(EMPTY, TEN, max_records=0).after == EMPTY
    assert acquire(EMPTY, []).after == EMPTY


def test_max_record_locks_bounds_new_records_not_redeliveries():
    config = SharePartitionConfig(delivery_count_limit=3, max_record_locks=6, record_lock_duration_ms=LOCK_MS)
    p = SharePartition.initial(config, 0)
    log = batches((0, 3), (4, 7), (8, 11))
    first = acquire(p, log, mode=AcquireMode.RECORD_LIMIT)
    assert first.acquired_records == (R(0, 5, 1),)  # 6 locks
    assert not first.after.can_acquire() and acquire(first.after, log, member="n").acquired_count == 0
    # batch-optimized may pass the limit to end at a batch boundary, as Kafka does
    assert acquire(p, log).acquired_records == (R(0, 7, 1),)
    # a released record goes out again even at the limit
    released = first.after.release_member("m").after
    assert released.can_acquire()
    assert acquire(released, log, member="n").acquired_records == (R(0, 5, 2),)


def test_redelivery_raises_the_delivery_count_and_skips_what_others_hold():
    p = partition(run(0, 2, S.AVAILABLE, 1), run(3, 4, S.ACQUIRED, 1, member="other"), run(5, 6, S.AVAILABLE, 1))
    change = acquire(p, batches((0, 6), (7, 9)), fetch_offset=0)
    assert change.acquired_records == (R(0, 2, 2), R(5, 6, 2), R(7, 9, 1))
    assert offsets(change.after)[3] == (S.ACQUIRED, 1, "other")


def test_the_offsets_between_batches_are_handed_out_for_the_client_to_acknowledge_as_gaps():
    change = acquire(EMPTY, batches((0, 2), (5, 7)))
    assert change.acquired_records == (R(0, 7, 1),)


def test_offsets_missing_before_the_first_batch_are_archived():
    change = acquire(SharePartition.initial(CONFIG, 3), batches((8, 9)))
    assert change.archived == (OffsetRange(3, 7),) and change.acquired_records == (R(8, 9, 1),)
    assert change.after.start_offset == 8  # archived at the start: done at once


def test_available_records_gone_from_the_log_are_archived():
    p = partition(run(0, 4, S.AVAILABLE, 1), run(5, 9, S.ACQUIRED, 1, member="other"))
    change = acquire(p, batches((3, 4)), fetch_offset=0)  # 0-2 were compacted away
    assert change.archived == (OffsetRange(0, 2),) and change.acquired_records == (R(3, 4, 2),)
    assert change.after.start_offset == 3


def test_a_batch_reaching_below_the_start_offset_is_cut_at_it():
    p = SharePartition.initial(CONFIG, 3)
    assert acquire(p, batches((0, 9))).acquired_records == (R(3, 9, 1),)


def test_aborted_transactions_are_archived_never_delivered():
    log = batches((0, 4), (5, 9), (10, 10))  # 10: the abort marker, a control batch: delivered, acknowledged as GAP
    change = acquire(EMPTY, log, aborted=batches((5, 9)))
    assert change.acquired_records == (R(0, 4, 1), R(10, 10, 1)) and change.archived == (OffsetRange(5, 9),)
    assert offsets(change.after)[5] == (S.ARCHIVED, 0, None)
    # redelivered records of an aborted batch are archived too
    p = partition(run(0, 9, S.AVAILABLE, 1))
    again = acquire(p, batches((0, 4), (5, 9)), aborted=batches((5, 9)))
    assert again.acquired_records == (R(0, 4, 2),) and again.archived == (OffsetRange(5, 9),)


def test_a_record_at_the_delivery_limit_is_archived_not_acquired():
    p = partition(run(0, 1, S.AVAILABLE, CONFIG.delivery_count_limit), run(2, 3, S.AVAILABLE, 1))
    change = acquire(p, batches((0, 3)))
    assert change.archived == (OffsetRange(0, 1),) and change.acquired_records == (R(2, 3, 2),)
    assert change.after.start_offset == 2


def test_throttled_records_go_out_in_halves_and_alone_at_their_last_attempt():
    config = SharePartitionConfig(delivery_count_limit=5, max_record_locks=100, record_lock_duration_ms=LOCK_MS)
    assert config.throttle_delivery_count == 3
    log = batches((0, 7), (8, 15))
    p = SharePartition(config, 0, 8, 0, (run(0, 7, S.AVAILABLE, 3),))
    half = acquire(p, log)
    assert half.acquired_records == (R(0, 3, 4),) and half.after.end_offset == 8  # and nothing new after it
    last = SharePartition(config, 0, 8, 0, (run(0, 7, S.AVAILABLE, 4),))
    assert acquire(last, log).acquired_records == (R(0, 0, 5),)
    # a throttled run is not joined to records acquired before it in the same fetch
    mixed = SharePartition(config, 0, 8, 0, (run(0, 3, S.AVAILABLE, 1), run(4, 7, S.AVAILABLE, 3)))
    assert acquire(mixed, log).acquired_records == (R(0, 3, 2),)
    assert [(t.delivery_count_limit, t.throttle_delivery_count) for t in (
        SharePartitionConfig(delivery_count_limit=n) for n in (2, 3, 4, 10))] == [(2, 2), (3, 2), (4, 2), (10, 5)]


def test_batch_size_splits_the_answer_at_batch_boundaries():
    log = batches((0, 4), (5, 9), (10, 14))
    assert acquire(EMPTY, log, batch_size=5).acquired_records == (R(0, 4, 1), R(5, 9, 1), R(10, 14, 1))
    assert acquire(EMPTY, log, batch_size=7).acquired_records == (R(0, 9, 1), R(10, 14, 1))
    # ... but the in-flight state keeps one run: the split is only the answer's
    assert len(acquire(EMPTY, log, batch_size=5).after.in_flight) == 1


def test_the_state_batches_of_an_acquisition_carry_the_raised_counts_as_available():
    update = acquire(EMPTY, TEN).update
    assert [tuple(b) for b in update.state_batches] == [(0, 9, S.AVAILABLE, 1)]


def test_malformed_log_batches_are_the_callers_bug():
    with pytest.raises(ValueError):
        acquire(EMPTY, batches((0, 4), (3, 9)))
    with pytest.raises(ValueError):
        acquire(EMPTY, TEN, aborted=batches((5, 4)))
