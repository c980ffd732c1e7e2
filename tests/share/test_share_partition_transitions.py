"""Every record state x every share partition operation, through SharePartition, against the table.

Offset 1 is put in each state (offset 0 stays acquired by another member so that done records stay in
flight); each operation aims at offset 1 and must do what the independently written EXPECTED table of
test_share_record_state says, or leave the record as it was (an acknowledgement then fails with
INVALID_RECORD_STATE)."""

from __future__ import annotations

import itertools

import pytest
from share_helpers import LIMIT, LOCK_MS, S, ack, batches, offsets, partition, run
from test_share_record_state import EXPECTED

from eoslog.share import AcknowledgeType, Event, ShareError

NOW = 500  # inside the lock of offset 1 (deadline LOCK_MS)
OPERATIONS = {
    Event.ACQUIRE: lambda p: p.acquire("m", 1, batches((1, 1)), now_ms=NOW, max_records=10, upper_bound=2),
    Event.SKIP: lambda p: p.acquire("m", 1, batches((1, 1)), aborted=batches((1, 1)), now_ms=NOW, max_records=10,
                                    upper_bound=2),
    **{Event[t.name]: (lambda p, t=t: p.acknowledge("m", [ack(1, 1, t)], now_ms=NOW)) for t in AcknowledgeType},
    Event.LOCK_TIMEOUT: lambda p: p.expire_locks(LOCK_MS),
    Event.MEMBER_RELEASE: lambda p: p.release_member("m"),
}


def test_every_event_has_an_operation():
    assert set(OPERATIONS) == set(Event)


def start(state, count):
    return partition(run(0, 0, S.ACQUIRED, 1, member="other", deadline=10 * LOCK_MS), run(1, 1, state, count))


@pytest.mark.parametrize("state,event", list(itertools.product(S, Event)), ids=lambda x: x.name)
@pytest.mark.parametrize("count", range(LIMIT + 1), ids=lambda c: f"count{c}")
def test_every_state_and_operation(state, event, count):
    before = start(state, count)
    change = OPERATIONS[event](before)
    after = change.after
    assert offsets(after)[0] == (S.ACQUIRED, 1, "other")  # never touched
    expected = EXPECTED.get((state, event))
    if expected is None:
        assert offsets(after) == offsets(before)
        assert change.update is None
        if event.name in AcknowledgeType.__members__:
            assert change.error is ShareError.INVALID_RECORD_STATE and change.failed_batch == 0
        return
    below, delta, at_limit = expected
    to, new_count = (at_limit, count) if count >= LIMIT else (below, count + delta)
    record = after.record(1)
    assert (record.state, record.delivery_count) == (to, new_count)
    if to is S.ACQUIRED:
        assert record.member_id == "m"
        assert record.lock_deadline_ms == (NOW + LOCK_MS if event in (Event.ACQUIRE, Event.RENEW) else LOCK_MS)
    else:
        assert record.member_id is None and record.lock_deadline_ms is None
    if event is Event.ACQUIRE:
        acquired = [(r.first_offset, r.last_offset, r.delivery_count) for r in change.acquired_records]
        assert acquired == ([(1, 1, new_count)] if to is S.ACQUIRED else [])
    if event is Event.RENEW:
        assert change.update is None  # a lock deadline is not persisted
    else:
        assert [(b.first_offset, b.delivery_state, b.delivery_count) for b in change.update.state_batches] == [
            (1, to.persisted, new_count)]


@pytest.mark.parametrize("ack_type", list(AcknowledgeType), ids=lambda t: t.name)
def test_an_acknowledgement_by_another_member_changes_nothing(ack_type):
    before = start(S.ACQUIRED, 1)
    change = before.acknowledge("intruder", [ack(1, 1, ack_type)], now_ms=NOW)
    assert (change.error, change.after) == (ShareError.INVALID_RECORD_STATE, before)


def test_release_member_leaves_other_members_alone():
    before = start(S.ACQUIRED, 1)
    change = before.release_member("nobody")
    assert change.after == before and change.update is None and change.released == ()
