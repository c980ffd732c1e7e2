"""Transaction version 2 (KIP-890 part 2) in the coordinator's pure core: the epoch bump at every EndTxn,
its retry, stale requests of the old epoch, epoch overflow, and the v1 value of the log record."""

from __future__ import annotations

import pytest
from txn_harness import Harness

from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.decisions import TxnError
from eoslog.coordinator.transaction.log_format import (
    FLEXIBLE_VALUE_VERSION,
    decode_value,
    encode_value,
    key_version,
    load_state,
    recovery_actions,
)
from eoslog.coordinator.transaction.metadata import (
    TRANSACTION_VERSION_2,
    TopicPartition,
    TransactionResult,
)
from eoslog.coordinator.transaction.state import TransactionState as S

COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
TP = TopicPartition("t", 0)


def end2(h: Harness, tid, pid, epoch, result=COMMIT, **kw) -> d.Decision:
    return h.carry_out(tid, d.end_txn(h.states.get(tid), tid, pid, epoch, result, h.now,
                                      transaction_version=TRANSACTION_VERSION_2, allocate_producer_id=h.allocate),
                       **kw)


def add2(h: Harness, tid, pid, epoch, tp=TP) -> d.Decision:
    return h.carry_out(tid, d.add_partitions_to_txn(h.states.get(tid), tid, pid, epoch, [tp], h.now,
                                                    transaction_version=TRANSACTION_VERSION_2))


def started(h: Harness, tid="tx") -> tuple[int, int]:
    init = h.init(tid)
    assert add2(h, tid, init.producer_id, init.producer_epoch).error is TxnError.NONE
    return init.producer_id, init.producer_epoch


def finish_markers(h: Harness, tid, decision):
    assert decision.write_markers is not None
    assert h.markers_done(tid, decision.write_markers).error is TxnError.NONE


@pytest.mark.parametrize("result,final", [(COMMIT, S.COMPLETE_COMMIT), (ABORT, S.COMPLETE_ABORT)])
def test_end_txn_bumps_the_epoch_and_returns_it(result, final):
    h = Harness()
    pid, epoch = started(h)
    decision = end2(h, "tx", pid, epoch, result)
    assert decision.error is TxnError.NONE
    assert (decision.producer_id, decision.producer_epoch) == (pid, epoch + 1)
    # The Prepare record and the markers already carry the bumped epoch.
    assert h.state("tx") is (S.PREPARE_COMMIT if result is COMMIT else S.PREPARE_ABORT)
    assert h.epoch("tx") == epoch + 1
    assert decision.write_markers.producer_epoch == epoch + 1
    assert decision.write_markers.partitions == frozenset({TP})
    finish_markers(h, "tx", decision)
    assert (h.state("tx"), h.pid("tx"), h.epoch("tx")) == (final, pid, epoch + 1)
    # The next transaction runs under the new epoch; the old one can no longer add partitions.
    assert add2(h, "tx", pid, epoch).error is TxnError.INVALID_PRODUCER_EPOCH
    assert add2(h, "tx", pid, epoch + 1).error is TxnError.NONE
    assert h.state("tx") is S.ONGOING


def test_retried_end_txn_is_answered_with_the_same_result_and_no_second_bump():
    h = Harness()
    pid, epoch = started(h)
    first = end2(h, "tx", pid, epoch)
    # While the markers are being written: retry later.
    assert end2(h, "tx", pid, epoch).error is TxnError.CONCURRENT_TRANSACTIONS
    finish_markers(h, "tx", first)
    retry = end2(h, "tx", pid, epoch)
    assert (retry.error, retry.transit, retry.write_markers) == (TxnError.NONE, None, None)
    assert (retry.producer_id, retry.producer_epoch) == (pid, epoch + 1)
    assert h.epoch("tx") == epoch + 1
    # The same old identity asking for the other result is not a retry.
    assert end2(h, "tx", pid, epoch, ABORT).error is TxnError.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("late", [COMMIT, ABORT])
def test_stale_end_txn_cannot_end_the_next_transaction(late):
    h = Harness()
    pid, epoch = started(h)
    finish_markers(h, "tx", end2(h, "tx", pid, epoch))
    assert add2(h, "tx", pid, epoch + 1).error is TxnError.NONE  # the next transaction
    stale = end2(h, "tx", pid, epoch, late)
    assert stale.error is TxnError.PRODUCER_FENCED and stale.transit is None
    assert (h.state("tx"), h.epoch("tx")) == (S.ONGOING, epoch + 1)
    # Two commits back is fenced too.
    finish_markers(h, "tx", end2(h, "tx", pid, epoch + 1))
    assert end2(h, "tx", pid, epoch, late).error is TxnError.PRODUCER_FENCED


def test_abort_when_unsure_bumps_with_no_partitions_and_commit_of_nothing_is_refused():
    h = Harness()
    init = h.init("tx")
    pid, epoch = init.producer_id, init.producer_epoch
    assert end2(h, "tx", pid, epoch, COMMIT).error is TxnError.INVALID_TXN_STATE
    abort = end2(h, "tx", pid, epoch, ABORT)
    assert abort.error is TxnError.NONE and abort.write_markers.partitions == frozenset()
    assert (abort.producer_id, abort.producer_epoch) == (pid, epoch + 1)
    finish_markers(h, "tx", abort)
    assert (h.state("tx"), h.epoch("tx")) == (S.COMPLETE_ABORT, epoch + 1)


def test_epoch_overflow_moves_to_a_new_producer_id():
    h = Harness()
    pid, _ = started(h)
    h.states["tx"].producer_epoch = 32766  # the last epoch a client may hold
    decision = end2(h, "tx", pid, 32766)
    new_pid = decision.producer_id
    assert new_pid not in (pid, -1) and decision.producer_epoch == 0
    # Markers go out under the old producer id at the very last epoch, fencing it for good.
    assert (decision.write_markers.producer_id, decision.write_markers.producer_epoch) == (pid, 32767)
    assert h.states["tx"].next_producer_id == new_pid
    finish_markers(h, "tx", decision)
    metadata = h.states["tx"]
    assert (metadata.state, metadata.producer_id, metadata.producer_epoch) == (S.COMPLETE_COMMIT, new_pid, 0)
    assert metadata.next_producer_id == -1
    retry = end2(h, "tx", pid, 32766)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (TxnError.NONE, new_pid, 0)
    assert add2(h, "tx", new_pid, 0).error is TxnError.NONE


def test_init_producer_id_aborting_an_ongoing_v2_transaction_bumps_once():
    """KAFKA-19367: the fence's abort is one bump, then InitProducerId's own; never two for the abort."""
    h = Harness()
    _, epoch = started(h)
    fence = h.init("tx")
    assert fence.error is TxnError.CONCURRENT_TRANSACTIONS
    assert fence.write_markers.producer_epoch == epoch + 1
    finish_markers(h, "tx", fence)
    again = h.init("tx")
    assert (again.error, again.producer_epoch) == (TxnError.NONE, epoch + 2)


def test_version_1_is_unchanged():
    h = Harness()
    init = h.init("tx")
    pid, epoch = init.producer_id, init.producer_epoch
    h.add("tx", pid, epoch)
    decision = h.end("tx", pid, epoch)
    assert (decision.producer_id, decision.producer_epoch) == (-1, -1)
    finish_markers(h, "tx", decision)
    assert h.epoch("tx") == epoch
    # Version 1 ids keep writing the version 0 value, byte for byte as before.
    assert [int.from_bytes(value[:2], "big") for _, value in h.log if value is not None] == [0] * len(h.log)


def test_the_v1_record_round_trips_and_reload_keeps_the_retry_and_the_next_producer_id():
    h = Harness()
    pid, _ = started(h)
    h.states["tx"].producer_epoch = 32766
    decision = end2(h, "tx", pid, 32766)
    raw = h.log[-1][1]
    assert int.from_bytes(raw[:2], "big") == FLEXIBLE_VALUE_VERSION
    value = decode_value(raw)
    assert (value.state, value.producer_epoch, value.next_producer_id, value.client_transaction_version) == (
        S.PREPARE_COMMIT, 32767, decision.producer_id, 2)
    assert value.topic_partitions == frozenset({TP})
    assert key_version(h.log[-1][0]) == 0
    # A crash before the Complete record: the reload finishes onto the new producer id.
    loaded = load_state(h.log)
    (action,) = recovery_actions(loaded, h.now)
    assert (action.markers.producer_id, action.markers.producer_epoch) == (pid, 32767)
    assert (action.complete.producer_id, action.complete.producer_epoch) == (decision.producer_id, 0)
    loaded["tx"].complete_transition(action.complete)
    assert loaded["tx"].is_recoverable_identity(pid, 32766)
    # And a reload after the Complete record still answers the retry.
    finish_markers(h, "tx", decision)
    reloaded = load_state(h.log)
    retry = d.end_txn(reloaded["tx"], "tx", pid, 32766, COMMIT, h.now, transaction_version=2,
                      allocate_producer_id=h.allocate)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (TxnError.NONE, decision.producer_id, 0)


def test_v1_value_of_an_ongoing_transaction_round_trips():
    h = Harness()
    pid, epoch = started(h)
    add2(h, "tx", pid, epoch, TopicPartition("other", 3))
    value = decode_value(encode_value(h.states["tx"].snapshot()))
    assert value.topic_partitions == frozenset({TP, TopicPartition("other", 3)})
    assert value.state is S.ONGOING and value.client_transaction_version == 2


def _in_state(state: S) -> tuple[Harness, int, int]:
    """An id in ``state`` with a version 2 history: (harness, producer id, the epoch of the EndTxn that
    ended the previous transaction, i.e. the retry identity's epoch)."""
    h = Harness()
    h.init("tx")  # so that every epoch below has an older one: the stale identity
    pid, epoch = started(h)
    assert epoch >= 1
    finish_markers(h, "tx", end2(h, "tx", pid, epoch, COMMIT if state is not S.COMPLETE_ABORT else ABORT))
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        return h, pid, epoch
    if state is S.EMPTY:
        h.states["tx"].previous_producer_id, h.states["tx"].last_producer_epoch = pid, epoch
        h.carry_out("tx", d.Decision(transit=h.states["tx"].prepare_keep_producer_epoch(60_000, h.now)))
        return h, pid, epoch
    assert add2(h, "tx", pid, epoch + 1).error is TxnError.NONE
    if state is S.ONGOING:
        return h, pid, epoch
    decision = end2(h, "tx", pid, epoch + 1, COMMIT if state is S.PREPARE_COMMIT else ABORT)
    assert decision.error is TxnError.NONE
    return h, pid, epoch + 1


# (state, whose EndTxn, result) -> the answer. "current": the id's producer and epoch now; "retry": the
# identity of the EndTxn that ended the last transaction; "stale": an epoch before that.
_V2_TABLE = {
    (S.ONGOING, "current", COMMIT): TxnError.NONE, (S.ONGOING, "current", ABORT): TxnError.NONE,
    (S.ONGOING, "retry", COMMIT): TxnError.PRODUCER_FENCED, (S.ONGOING, "retry", ABORT): TxnError.PRODUCER_FENCED,
    (S.EMPTY, "current", COMMIT): TxnError.INVALID_TXN_STATE, (S.EMPTY, "current", ABORT): TxnError.NONE,
    (S.EMPTY, "retry", COMMIT): TxnError.PRODUCER_FENCED, (S.EMPTY, "retry", ABORT): TxnError.PRODUCER_FENCED,
    (S.COMPLETE_COMMIT, "current", COMMIT): TxnError.INVALID_TXN_STATE,
    (S.COMPLETE_COMMIT, "current", ABORT): TxnError.NONE,
    (S.COMPLETE_COMMIT, "retry", COMMIT): TxnError.NONE,
    (S.COMPLETE_COMMIT, "retry", ABORT): TxnError.INVALID_PRODUCER_EPOCH,
    (S.COMPLETE_ABORT, "current", COMMIT): TxnError.INVALID_TXN_STATE,
    (S.COMPLETE_ABORT, "current", ABORT): TxnError.NONE,
    (S.COMPLETE_ABORT, "retry", COMMIT): TxnError.INVALID_PRODUCER_EPOCH,
    (S.COMPLETE_ABORT, "retry", ABORT): TxnError.NONE,
    (S.PREPARE_COMMIT, "retry", COMMIT): TxnError.CONCURRENT_TRANSACTIONS,
    (S.PREPARE_COMMIT, "retry", ABORT): TxnError.INVALID_PRODUCER_EPOCH,
    (S.PREPARE_ABORT, "retry", ABORT): TxnError.CONCURRENT_TRANSACTIONS,
    (S.PREPARE_ABORT, "retry", COMMIT): TxnError.INVALID_PRODUCER_EPOCH,
    (S.PREPARE_COMMIT, "current", COMMIT): TxnError.CONCURRENT_TRANSACTIONS,
    (S.PREPARE_ABORT, "current", ABORT): TxnError.CONCURRENT_TRANSACTIONS,
}


@pytest.mark.parametrize("state,who,result", sorted(_V2_TABLE, key=str))
def test_end_txn_v2_every_state_and_identity(state, who, result):
    h, pid, retry_epoch = _in_state(state)
    metadata = h.states["tx"]
    assert metadata.state is state
    epoch = {"current": metadata.producer_epoch, "retry": retry_epoch}[who]
    if state.is_prepare and who == "retry":
        epoch = metadata.last_producer_epoch
    before = metadata.snapshot()
    decision = d.end_txn(metadata, "tx", pid, epoch, result, h.now, transaction_version=2,
                         allocate_producer_id=h.allocate)
    assert decision.error is _V2_TABLE[(state, who, result)]
    if decision.transit is None:
        assert metadata.snapshot() == before  # an answer without a transit changes nothing
    else:
        assert decision.error is TxnError.NONE and decision.transit.producer_epoch == before.producer_epoch + 1
        metadata.abort_transition()
    # An epoch older than both is fenced everywhere, and changes nothing.
    stale = d.end_txn(metadata, "tx", pid, retry_epoch - 1, result, h.now, transaction_version=2,
                      allocate_producer_id=h.allocate)
    assert stale.error is TxnError.PRODUCER_FENCED and stale.transit is None
    assert metadata.snapshot() == before
