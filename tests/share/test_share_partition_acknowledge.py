"""Acknowledgements: each type, per-offset types, the SPSO, and every error (as one unit: nothing changes)."""

from __future__ import annotations

import pytest
from share_helpers import CONFIG, LIMIT, LOCK_MS, S, ack, offsets, partition, run

from eoslog.share import AcknowledgeType, PersistedState, ShareError, StateBatch

A = AcknowledgeType
HELD = partition(run(0, 9, S.ACQUIRED, 1))  # member "m" holds 0-9, lock until LOCK_MS


def test_accepting_everything_moves_the_start_offset_to_the_end():
    change = HELD.acknowledge("m", [ack(0, 9, A.ACCEPT)], now_ms=0)
    assert change.error is ShareError.NONE
    assert (change.after.start_offset, change.after.end_offset, change.after.in_flight) == (10, 10, ())
    assert change.update == PersistedState(10, 0, ())  # the start offset says it all


def test_per_offset_types_split_the_run():
    change = HELD.acknowledge("m", [ack(0, 4, A.ACCEPT, A.RELEASE, A.REJECT, A.GAP, A.ACCEPT)], now_ms=0)
    assert change.after.start_offset == 1
    assert offsets(change.after) | {} == {
        1: (S.AVAILABLE, 1, None), 2: (S.ARCHIVED, 1, None), 3: (S.ARCHIVED, 1, None), 4: (S.ACKNOWLEDGED, 1, None),
        **{o: (S.ACQUIRED, 1, "m") for o in range(5, 10)}}
    assert change.update == PersistedState(1, 0, (StateBatch(1, 1, S.AVAILABLE, 1), StateBatch(2, 3, S.ARCHIVED, 1),
                                                  StateBatch(4, 4, S.ACKNOWLEDGED, 1)))


def test_several_batches_apply_in_one_go():
    change = HELD.acknowledge("m", [ack(0, 2, A.ACCEPT), ack(3, 3, A.RELEASE), ack(5, 9, A.REJECT)], now_ms=0)
    assert change.error is ShareError.NONE and change.after.start_offset == 3
    assert offsets(change.after)[4] == (S.ACQUIRED, 1, "m")


def test_release_at_the_delivery_limit_archives():
    p = partition(run(0, 4, S.ACQUIRED, LIMIT))
    assert offsets(p.acknowledge("m", [ack(0, 0, A.RELEASE)], now_ms=0).after)[1] == (S.ACQUIRED, LIMIT, "m")
    change = p.acknowledge("m", [ack(0, 4, A.RELEASE)], now_ms=0)
    assert change.after.in_flight == () and change.after.start_offset == 5


def test_renew_restarts_the_lock_and_persists_nothing():
    change = HELD.acknowledge("m", [ack(2, 3, A.RENEW)], now_ms=600, lock_ms=700)
    assert change.error is ShareError.NONE and change.update is None
    assert [(r.first_offset, r.lock_deadline_ms) for r in change.after.in_flight] == [(0, LOCK_MS), (2, 1300),
                                                                                       (4, LOCK_MS)]
    assert change.after.next_deadline() == LOCK_MS
    # the default lock duration is the config's
    assert HELD.acknowledge("m", [ack(0, 9, A.RENEW)], now_ms=10).after.next_deadline() == 10 + LOCK_MS


def test_a_batch_below_the_start_offset_is_refused_and_one_reaching_above_it_counts_from_it():
    p = partition(run(5, 9, S.ACQUIRED, 1))
    # done already, maybe by another member after this one's lock ran out (the queue verifier's
    # accepted-twice): INVALID_RECORD_STATE, as Kafka, never NONE; nothing changes
    change = p.acknowledge("m", [ack(0, 4, A.ACCEPT)], now_ms=0)
    assert change.error is ShareError.INVALID_RECORD_STATE and change.after == p
    change = p.acknowledge("m", [ack(5, 5, A.ACCEPT), ack(0, 4, A.ACCEPT)], now_ms=0)
    assert change.error is ShareError.INVALID_REQUEST and change.after == p  # out of order: malformed
    change = p.acknowledge("m", [ack(3, 6, A.ACCEPT)], now_ms=0)
    assert change.error is ShareError.NONE and change.after.start_offset == 7


def test_a_late_accept_after_the_lock_ran_out_and_another_member_accepted_is_refused():
    # "late" held offset 0 at delivery 1; its lock ran out and "other" holds it at delivery 2
    taken = partition(run(0, 0, S.ACQUIRED, 2, member="other", deadline=2 * LOCK_MS))
    accepted = taken.acknowledge("other", [ack(0, 0, A.ACCEPT)], now_ms=LOCK_MS)
    assert accepted.error is ShareError.NONE and accepted.after.start_offset == 1
    late = accepted.after.acknowledge("late", [ack(0, 0, A.ACCEPT)], now_ms=LOCK_MS + 1)
    assert late.error is ShareError.INVALID_RECORD_STATE and late.after == accepted.after


def test_no_acknowledgement_is_a_no_op():
    change = HELD.acknowledge("m", [], now_ms=0)
    assert change.after == HELD and change.update is None


INVALID_RECORD_STATE = {
    "another member's records": (HELD, "other", [ack(0, 0, A.ACCEPT)], 0),
    "a lock that ran out": (HELD, "m", [ack(0, 0, A.ACCEPT)], LOCK_MS),
    "available records": (partition(run(0, 9, S.AVAILABLE, 1)), "m", [ack(0, 0, A.ACCEPT)], 0),
    "acknowledged records": (partition(run(0, 0, S.ACQUIRED, 1), run(1, 1, S.ACKNOWLEDGED, 1)), "m",
                             [ack(1, 1, A.ACCEPT)], 0),
    "archived records": (partition(run(0, 0, S.ACQUIRED, 1), run(1, 1, S.ARCHIVED, 1)), "m",
                         [ack(1, 1, A.REJECT)], 0),
    "a range partly held by another member": (partition(run(0, 4, S.ACQUIRED, 1), run(5, 9, S.ACQUIRED, 1, "o")),
                                              "m", [ack(3, 6, A.ACCEPT)], 0),
    "renewing a lock that ran out": (HELD, "m", [ack(0, 9, A.RENEW)], LOCK_MS + 1),
}

INVALID_REQUEST = {
    "first offset past the last": [ack(5, 4, A.ACCEPT)],
    "no acknowledge type": [ack(0, 4)],
    "types neither one nor one per offset": [ack(0, 4, A.ACCEPT, A.ACCEPT)],
    "an unknown type": [ack(0, 0, 5)],
    "a negative type": [ack(0, 0, -1)],
    "overlapping batches": [ack(0, 4, A.ACCEPT), ack(4, 6, A.ACCEPT)],
    "batches out of order": [ack(5, 6, A.ACCEPT), ack(0, 1, A.ACCEPT)],
    "a negative offset": [ack(-1, 0, A.ACCEPT)],
    "past the records handed out": [ack(8, 10, A.ACCEPT)],
    "wholly past the records handed out": [ack(20, 30, A.ACCEPT)],
}


@pytest.mark.parametrize("case", INVALID_RECORD_STATE)
def test_invalid_record_state(case):
    p, member, acks, now = INVALID_RECORD_STATE[case]
    change = p.acknowledge(member, acks, now_ms=now)
    assert (change.error, change.failed_batch, change.after, change.update) == (
        ShareError.INVALID_RECORD_STATE, 0, p, None)


@pytest.mark.parametrize("case", INVALID_REQUEST)
def test_invalid_request(case):
    change = HELD.acknowledge("m", INVALID_REQUEST[case], now_ms=0)
    assert change.error is ShareError.INVALID_REQUEST and change.after == HELD and change.update is None
    assert change.failed_batch == len(INVALID_REQUEST[case]) - 1


def test_a_failing_batch_undoes_the_batches_before_it():
    p = partition(run(0, 4, S.ACQUIRED, 1), run(5, 9, S.ACQUIRED, 1, member="other"))
    change = p.acknowledge("m", [ack(0, 4, A.ACCEPT), ack(5, 9, A.ACCEPT)], now_ms=0)
    assert (change.error, change.failed_batch, change.after) == (ShareError.INVALID_RECORD_STATE, 1, p)


def test_an_empty_partition_has_nothing_to_acknowledge():
    p = partition(start=7, config=CONFIG)
    assert p.acknowledge("m", [ack(7, 7, A.ACCEPT)], now_ms=0).error is ShareError.INVALID_REQUEST
    assert p.acknowledge("m", [ack(0, 6, A.ACCEPT)], now_ms=0).error is ShareError.INVALID_RECORD_STATE  # done


def test_the_state_stays_compact_one_run_per_stretch_of_equal_records():
    first_half = HELD.acknowledge("m", [ack(0, 4, A.RELEASE)], now_ms=0).after
    assert len(first_half.in_flight) == 2
    both = first_half.acknowledge("m", [ack(5, 9, A.RELEASE)], now_ms=0).after
    assert both.in_flight == (run(0, 9, S.AVAILABLE, 1),)
    per_offset = HELD.acknowledge("m", [ack(0, 9, *[A.RENEW] * 10)], now_ms=10).after
    assert per_offset.in_flight == (run(0, 9, S.ACQUIRED, 1, deadline=10 + LOCK_MS),)
