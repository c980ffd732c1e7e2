"""The transactional-acknowledgement core (share/transactional_acks.py), case by case: a transaction takes
records from a member, holds them past the member's lock and the member's release, and its marker makes
the acknowledgements final (COMMIT) or gives the records back with their delivery count (ABORT)."""

from __future__ import annotations

import pytest
from share_helpers import CONFIG, LIMIT, LOCK_MS, ack, batches, offsets

from eoslog.share import AcknowledgeType, RecordState, SharePartition
from eoslog.share.transactional_acks import (
    HELD_BY_TRANSACTION_MS,
    TXN_TRANSITIONS,
    IllegalTxnTransition,
    PendingAck,
    PendingAcknowledgements,
    PersistedHold,
    TransactionOwner,
    TxnAckError,
    TxnEvent,
    TxnState,
    txn_transition,
)

S = RecordState
A = AcknowledgeType
TXN_TIMEOUT = 60_000


def acquired(member="m", first=0, last=9, now=0) -> PendingAcknowledgements:
    p = SharePartition.initial(CONFIG, first)
    got = p.acquire(member, first, batches((first, last)), now_ms=now, max_records=100, upper_bound=last + 1)
    return PendingAcknowledgements.of(got.after)


def txn_ack(value, *acks, member="m", pid=7, epoch=0, now=0):
    return value.acknowledge(member, pid, epoch, list(acks), now_ms=now, transaction_timeout_ms=TXN_TIMEOUT)


def test_the_transaction_table_is_exactly_this():
    O, D = TxnState.OPEN, TxnState.OVERDUE
    assert TXN_TRANSITIONS == {
        (None, TxnEvent.ACKNOWLEDGE): O, (O, TxnEvent.ACKNOWLEDGE): O, (O, TxnEvent.TIMEOUT): D,
        (O, TxnEvent.COMMIT): None, (O, TxnEvent.ABORT): None, (D, TxnEvent.COMMIT): None,
        (D, TxnEvent.ABORT): None, (None, TxnEvent.COMMIT): None, (None, TxnEvent.ABORT): None}
    with pytest.raises(IllegalTxnTransition):
        txn_transition(TxnState.OVERDUE, TxnEvent.ACKNOWLEDGE)


def test_acknowledging_in_a_transaction_moves_the_records_to_it():
    change = txn_ack(acquired(), ack(0, 3, A.ACCEPT), ack(5, 6, A.REJECT))
    assert change.error is TxnAckError.NONE and change.write_needed
    after = change.after
    owner = TransactionOwner(7)
    assert {o: v for o, v in offsets(after.partition).items() if v[2] == owner} == {
        o: (S.ACQUIRED, 1, owner) for o in (0, 1, 2, 3, 5, 6)}
    assert offsets(after.partition)[4] == (S.ACQUIRED, 1, "m")
    assert after.state_of(7) is TxnState.OPEN and after.held_count(7) == 6
    assert after.persisted_holds() == (PersistedHold(7, 0, (PendingAck(0, 3, A.ACCEPT), PendingAck(5, 6, A.REJECT))),)
    # The transaction's timeout is due, not the held records' lock.
    assert after.next_deadline() == LOCK_MS
    assert after.holds[7].deadline_ms == TXN_TIMEOUT


def test_held_records_outlive_the_members_lock_and_its_release():
    held = txn_ack(acquired(), ack(0, 4, A.ACCEPT)).after
    expired = held.partition.expire_locks(10 * LOCK_MS)
    assert expired.released == (batches((5, 9))[0],)  # only the member's own records went back
    held = held.with_partition(expired.after)
    held = held.with_partition(held.partition.release_member("m").after)
    assert held.held_count(7) == 5
    assert all(v == (S.ACQUIRED, 1, TransactionOwner(7)) for o, v in offsets(held.partition).items() if o < 5)
    # Nobody can acquire them, and the member can no longer acknowledge them.
    again = held.partition.acquire("n", 0, batches((0, 9)), now_ms=10 * LOCK_MS, max_records=100, upper_bound=10)
    assert [(r.first_offset, r.last_offset) for r in again.acquired_records] == [(5, 9)]
    assert held.partition.acknowledge("m", [ack(0, 0, A.ACCEPT)], now_ms=0).error.value == "INVALID_RECORD_STATE"


def test_a_batch_wholly_below_the_start_offset_is_refused_as_a_members_own_is():
    # m's lock ran out; n took the records at delivery 2 and accepted them, which moved the SPSO past them.
    late = acquired(last=3).partition.expire_locks(LOCK_MS + 1).after
    again = late.acquire("n", 0, batches((0, 3)), now_ms=LOCK_MS + 1, max_records=100, upper_bound=4).after
    done = again.acknowledge("n", [ack(0, 3, A.ACCEPT)], now_ms=LOCK_MS + 2).after
    assert done.start_offset == 4
    value = PendingAcknowledgements.of(done)
    change = txn_ack(value, ack(0, 3, A.ACCEPT), now=LOCK_MS + 3)
    # Answering NONE would tell m's transaction its ACCEPT counted: its output would commit a second time.
    assert change.error is TxnAckError.INVALID_RECORD_STATE and change.after is value and not change.write_needed


def test_commit_applies_each_pending_type():
    held = txn_ack(acquired(), ack(0, 1, A.ACCEPT), ack(2, 2, A.REJECT), ack(3, 3, A.RELEASE),
                   ack(4, 4, A.GAP)).after
    change = held.complete(7, 0, commit=True)
    assert change.error is TxnAckError.NONE and change.write_needed
    after = change.after
    # 0-2 done, so the start offset passes them; 3 released (count kept), 4 archived.
    assert after.partition.start_offset == 3
    assert offsets(after.partition)[3] == (S.AVAILABLE, 1, None)
    assert offsets(after.partition)[4] == (S.ARCHIVED, 1, None)
    assert after.holds == {} and after.persisted_holds() == ()
    assert change.update.start_offset == 3


def test_abort_gives_the_records_back_with_their_delivery_count():
    held = txn_ack(acquired(), ack(0, 4, A.ACCEPT, A.ACCEPT, A.REJECT, A.ACCEPT, A.RELEASE)).after
    after = held.complete(7, 1, commit=False).after  # the abort marker's epoch is bumped
    assert {o: offsets(after.partition)[o] for o in range(5)} == {o: (S.AVAILABLE, 1, None) for o in range(5)}
    assert after.producer_epochs[7] == 1 and after.holds == {}


def test_abort_at_the_delivery_limit_archives():
    value = acquired()
    p = value.partition
    for _ in range(LIMIT - 1):  # deliver offset 0 until its count is at the limit
        p = p.acknowledge("m", [ack(0, 9, A.RELEASE)], now_ms=0).after
        p = p.acquire("m", 0, batches((0, 9)), now_ms=0, max_records=100, upper_bound=10).after
    assert offsets(p)[0] == (S.ACQUIRED, LIMIT, "m")
    held = txn_ack(value.with_partition(p), ack(0, 0, A.ACCEPT)).after
    after = held.complete(7, 0, commit=False).after
    assert after.partition.start_offset == 1  # archived, so done


def test_a_zombie_cannot_acknowledge_nor_complete():
    held = txn_ack(acquired(), ack(0, 1, A.ACCEPT), epoch=3).after
    zombie = txn_ack(held, ack(2, 2, A.ACCEPT), epoch=2)
    assert zombie.error is TxnAckError.PRODUCER_FENCED and zombie.after is held
    assert held.complete(7, 2, commit=True).error is TxnAckError.PRODUCER_FENCED
    # After the marker (epoch bumped to 4), epoch 3 is a zombie too.
    done = held.complete(7, 4, commit=True).after
    assert txn_ack(done, ack(2, 2, A.ACCEPT), epoch=3).error is TxnAckError.PRODUCER_FENCED
    assert txn_ack(done, ack(2, 2, A.ACCEPT), epoch=4).error is TxnAckError.NONE


def test_a_newer_epoch_before_the_older_marker_must_wait():
    held = txn_ack(acquired(), ack(0, 1, A.ACCEPT), epoch=3).after
    assert txn_ack(held, ack(2, 2, A.ACCEPT), epoch=4).error is TxnAckError.CONCURRENT_TRANSACTIONS


def test_the_transaction_timeout_refuses_more_but_keeps_what_is_held():
    held = txn_ack(acquired(), ack(0, 1, A.ACCEPT)).after
    assert held.expire_transactions(TXN_TIMEOUT - 1).after.state_of(7) is TxnState.OPEN
    overdue = held.expire_transactions(TXN_TIMEOUT).after
    assert overdue.state_of(7) is TxnState.OVERDUE and overdue.held_count(7) == 2
    assert txn_ack(overdue, ack(2, 2, A.ACCEPT), now=1).error is TxnAckError.INVALID_TXN_STATE
    # The coordinator may still commit it (it was prepared before the timeout).
    after = overdue.complete(7, 0, commit=True).after
    assert after.partition.start_offset == 2


@pytest.mark.parametrize("bad, error", [
    ([ack(0, 1, A.RENEW)], TxnAckError.INVALID_REQUEST),
    ([ack(1, 0, A.ACCEPT)], TxnAckError.INVALID_REQUEST),
    ([ack(0, 2, A.ACCEPT), ack(2, 3, A.ACCEPT)], TxnAckError.INVALID_REQUEST),
    ([ack(8, 10, A.ACCEPT)], TxnAckError.INVALID_REQUEST),  # past the end offset
])
def test_malformed_acknowledgements_change_nothing(bad, error):
    value = acquired()
    change = value.acknowledge("m", 7, 0, bad, now_ms=0, transaction_timeout_ms=TXN_TIMEOUT)
    assert change.error is error and change.after is value


def test_records_of_another_member_or_past_their_lock_are_refused():
    value = acquired()
    assert txn_ack(value, ack(0, 0, A.ACCEPT), member="other").error is TxnAckError.INVALID_RECORD_STATE
    assert txn_ack(value, ack(0, 0, A.ACCEPT), now=LOCK_MS).error is TxnAckError.INVALID_RECORD_STATE
    held = txn_ack(value, ack(0, 0, A.ACCEPT)).after
    # Once held, neither the member nor another transaction can take it.
    assert txn_ack(held, ack(0, 0, A.ACCEPT), pid=8).error is TxnAckError.INVALID_RECORD_STATE


def test_a_delivery_count_other_than_the_records_refuses_the_acknowledgement():
    """The count the client saw names the acquisition: records handed out again since (here: the first
    member's lock ran out, "n" acquired them with count 2) are not the transaction's to take, even when the
    leader resolved a null member id to their one holder ("n")."""
    value = acquired()
    expired = value.partition.expire_locks(LOCK_MS)
    again = expired.after.acquire("n", 0, batches((0, 9)), now_ms=LOCK_MS, max_records=100, upper_bound=10)
    value = value.with_partition(again.after)
    stale = value.acknowledge("n", 7, 0, [ack(0, 1, A.ACCEPT)], now_ms=LOCK_MS, transaction_timeout_ms=TXN_TIMEOUT,
                              delivery_counts=[1])
    assert stale.error is TxnAckError.INVALID_RECORD_STATE and stale.after is value
    for counts in ([2], [-1], []):  # the count of this acquisition, or not said (as before)
        change = value.acknowledge("n", 7, 0, [ack(0, 1, A.ACCEPT)], now_ms=LOCK_MS,
                                   transaction_timeout_ms=TXN_TIMEOUT, delivery_counts=counts)
        assert change.error is TxnAckError.NONE, counts


def test_a_marker_without_acknowledgements_here_is_a_no_op():
    value = acquired()
    change = value.complete(9, 0, commit=True)
    assert change.error is TxnAckError.NONE and change.after.partition == value.partition
    assert not change.write_needed


def test_a_new_leader_holds_the_persisted_pending_set_again():
    held = txn_ack(acquired(), ack(2, 4, A.ACCEPT), ack(6, 6, A.REJECT), epoch=5).after
    loaded = SharePartition.load(CONFIG, held.partition.snapshot())
    assert offsets(loaded)[2] == (S.AVAILABLE, 1, None)  # a lock does not outlive its leader
    again = PendingAcknowledgements.load(loaded, held.persisted_holds(), now_ms=0, transaction_timeout_ms=TXN_TIMEOUT)
    assert again.held_count(7) == 4 and again.producer_epochs == {7: 5}
    assert {o for o, v in offsets(again.partition).items() if v[2] == TransactionOwner(7)} == {2, 3, 4, 6}
    after = again.complete(7, 5, commit=True).after
    assert offsets(after.partition)[2] == (S.ACKNOWLEDGED, 1, None)
    assert offsets(after.partition)[6] == (S.ARCHIVED, 1, None)


def test_loading_a_pending_set_over_done_records_is_refused():
    held = txn_ack(acquired(), ack(2, 4, A.ACCEPT)).after
    done = held.complete(7, 0, commit=True).after
    with pytest.raises(ValueError):
        PendingAcknowledgements.load(done.partition, held.persisted_holds(), now_ms=0,
                                     transaction_timeout_ms=TXN_TIMEOUT)


def test_held_records_have_no_lock_deadline_but_the_sentinel():
    held = txn_ack(acquired(), ack(0, 0, A.ACCEPT)).after
    assert held.partition.in_flight[0].lock_deadline_ms == HELD_BY_TRANSACTION_MS
    # The share partition's own timer would name the sentinel; the pending value never does.
    held = held.with_partition(held.partition.acknowledge("m", [ack(1, 9, A.ACCEPT)], now_ms=0).after)
    assert held.partition.next_deadline() == HELD_BY_TRANSACTION_MS
    assert held.next_deadline() == TXN_TIMEOUT
