"""Decisions of every coordinator API, driven through the conftest Harness (prepare -> log -> apply)."""

from __future__ import annotations

import pytest

from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.decisions import TxnError as E
from eoslog.coordinator.transaction.log_format import decode_value, partition_for
from eoslog.coordinator.transaction.metadata import (
    TopicPartition,
    TransactionMetadata,
    TransactionResult,
)
from eoslog.coordinator.transaction.state import TransactionState as S

COMMIT, ABORT = TransactionResult.COMMIT, TransactionResult.ABORT
T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def start_txn(h, tid="tx", *partitions):
    dec = h.init(tid)
    assert dec.error is E.NONE
    pid, epoch = dec.producer_id, dec.producer_epoch
    assert h.add(tid, pid, epoch, *(partitions or [("t", 0)])).error is E.NONE
    assert h.state(tid) is S.ONGOING
    return pid, epoch


# ---- InitProducerId ----------------------------------------------------------------------------------

def test_idempotent_producer_gets_a_fresh_id_and_nothing_is_logged(harness):
    dec = d.init_producer_id(None, None, 0, harness.now, harness.config, harness.allocate)
    assert (dec.error, dec.producer_id, dec.producer_epoch, dec.transit) == (E.NONE, 1000, 0, None)
    assert d.init_producer_id(None, None, 0, 0, harness.config, harness.allocate).producer_id == 1001


def test_new_transactional_id_allocates_and_logs_empty(harness):
    dec = harness.init("tx", timeout_ms=30_000)
    assert (dec.error, dec.producer_id, dec.producer_epoch) == (E.NONE, 1000, 0)
    assert dec.new_metadata is harness.states["tx"]
    assert harness.state("tx") is S.EMPTY and harness.states["tx"].txn_timeout_ms == 30_000
    value = decode_value(harness.log[-1][1])
    assert (value.state, value.producer_id, value.producer_epoch) == (S.EMPTY, 1000, 0)


def test_empty_transactional_id_is_invalid(harness):
    assert harness.init("").error is E.INVALID_REQUEST
    assert harness.add("", 1, 0).error is E.INVALID_REQUEST
    assert harness.end("", 1, 0).error is E.INVALID_REQUEST


@pytest.mark.parametrize("timeout_ms,ok", [(0, False), (-1, False), (1, True), (900_000, True),
                                           (900_001, False)])
def test_transaction_max_timeout(harness, timeout_ms, ok):
    dec = harness.init("tx", timeout_ms=timeout_ms)
    assert dec.error is (E.NONE if ok else E.INVALID_TRANSACTION_TIMEOUT)
    assert ("tx" in harness.states) is ok and bool(harness.log) is ok


def test_reinit_bumps_epoch_and_fences_the_zombie(harness):
    harness.init("tx")
    dec = harness.init("tx")
    assert (dec.producer_id, dec.producer_epoch) == (1000, 1)
    m = harness.states["tx"]
    assert (m.previous_producer_id, m.last_producer_epoch) == (-1, -1)  # a new producer remembers nothing
    # The zombie at epoch 0 is fenced on every API.
    assert harness.add("tx", 1000, 0).error is E.PRODUCER_FENCED
    assert harness.add_offsets("tx", 1000, 0, "g").error is E.PRODUCER_FENCED
    assert harness.end("tx", 1000, 0, ABORT).error is E.PRODUCER_FENCED
    assert harness.init("tx", producer_id=1000, producer_epoch=0).error is E.PRODUCER_FENCED
    assert harness.state("tx") is S.EMPTY and harness.epoch("tx") == 1


def test_init_during_ongoing_aborts_first_then_client_retries(harness):
    pid, epoch = start_txn(harness, "tx", ("t", 0), ("t", 1))
    dec = harness.init("tx")
    assert dec.error is E.CONCURRENT_TRANSACTIONS
    assert dec.transit.state is S.PREPARE_ABORT and dec.transit.producer_epoch == epoch + 1
    markers = dec.write_markers
    assert (markers.result, markers.producer_id, markers.producer_epoch) == (ABORT, pid, epoch + 1)
    assert markers.partitions == {T0, T1}
    assert harness.state("tx") is S.PREPARE_ABORT
    # The zombie cannot commit its transaction any more.
    assert harness.end("tx", pid, epoch, COMMIT).error is E.PRODUCER_FENCED
    assert harness.add("tx", pid, epoch, ("t", 2)).error is E.PRODUCER_FENCED
    # Retries while markers are being written.
    assert harness.init("tx").error is E.CONCURRENT_TRANSACTIONS
    assert harness.markers_done("tx", markers).error is E.NONE
    assert harness.state("tx") is S.COMPLETE_ABORT and harness.states["tx"].topic_partitions == set()
    retry = harness.init("tx")
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, pid, epoch + 2)


def test_fence_whose_append_fails_leaves_nothing_behind(harness):
    _, epoch = start_txn(harness)
    before = harness.states["tx"].snapshot()
    dec = harness.init("tx", append_fails=True)
    assert dec.transit is not None
    assert harness.states["tx"].snapshot() == before and not harness.states["tx"].pending_transition_in_progress
    again = harness.init("tx")
    assert again.transit.producer_epoch == epoch + 1  # bumped once, not twice


def test_epoch_exhaustion_rotates_the_producer_id(harness):
    harness.init("tx")
    harness.states["tx"].producer_epoch = 32766  # as if 32766 InitProducerIds had happened
    dec = harness.init("tx")
    assert (dec.producer_id, dec.producer_epoch) == (1001, 0)
    m = harness.states["tx"]
    assert (m.previous_producer_id, m.last_producer_epoch) == (-1, -1)
    assert harness.add("tx", 1000, 32766).error is E.INVALID_PRODUCER_ID_MAPPING


def test_epoch_exhaustion_with_kip360_remembers_and_retry_returns_the_new_id(harness):
    harness.init("tx")
    harness.states["tx"].producer_epoch = 32766
    dec = harness.init("tx", producer_id=1000, producer_epoch=32766)
    assert (dec.producer_id, dec.producer_epoch) == (1001, 0)
    retry = harness.init("tx", producer_id=1000, producer_epoch=32766)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, 1001, 0)
    assert harness.next_producer_id == 1002  # the retry allocated nothing


def test_fence_at_32766_goes_to_32767_and_the_retry_rotates(harness):
    harness.init("tx")
    harness.states["tx"].producer_epoch = 32766
    harness.add("tx", 1000, 32766)
    fence = harness.init("tx")
    assert fence.transit.producer_epoch == 32767  # never handed out
    harness.markers_done("tx", fence.write_markers)
    dec = harness.init("tx")
    assert (dec.producer_id, dec.producer_epoch) == (1001, 0)


class TestKip360:
    """InitProducerId v3+ with the producer's current (producer_id, producer_epoch)."""

    def test_none_bumps(self, harness):
        harness.init("tx")
        assert harness.init("tx").producer_epoch == 1

    def test_matching_current_bumps_and_remembers(self, harness):
        harness.init("tx")
        dec = harness.init("tx", producer_id=1000, producer_epoch=0)
        assert (dec.error, dec.producer_epoch) == (E.NONE, 1)
        m = harness.states["tx"]
        assert (m.previous_producer_id, m.last_producer_epoch) == (1000, 0)

    def test_matching_last_epoch_is_a_retry_returning_current(self, harness):
        harness.init("tx")
        harness.init("tx", producer_id=1000, producer_epoch=0)
        log_length = len(harness.log)
        dec = harness.init("tx", producer_id=1000, producer_epoch=0)
        assert (dec.error, dec.producer_id, dec.producer_epoch) == (E.NONE, 1000, 1)
        assert harness.epoch("tx") == 1 and len(harness.log) == log_length + 1  # timeout refresh logged

    def test_other_epoch_is_fenced(self, harness):
        harness.init("tx")
        harness.init("tx", producer_id=1000, producer_epoch=0)
        for epoch in (2, 5, -2):
            assert harness.init("tx", producer_id=1000, producer_epoch=epoch).error is E.PRODUCER_FENCED
        assert harness.epoch("tx") == 1

    def test_other_producer_id_is_fenced(self, harness):
        harness.init("tx")
        assert harness.init("tx", producer_id=999, producer_epoch=0).error is E.PRODUCER_FENCED

    def test_a_new_producer_clears_the_remembered_identity(self, harness):
        harness.init("tx")
        harness.init("tx", producer_id=1000, producer_epoch=0)  # epoch 1, remembers 0
        harness.init("tx")  # new instance: epoch 2
        assert harness.init("tx", producer_id=1000, producer_epoch=0).error is E.PRODUCER_FENCED
        assert harness.init("tx", producer_id=1000, producer_epoch=1).error is E.PRODUCER_FENCED
        assert harness.add("tx", 1000, 1).error is E.PRODUCER_FENCED

    def test_only_one_of_the_pair_is_invalid(self, harness):
        assert harness.init("tx", producer_id=5).error is E.INVALID_REQUEST
        assert harness.init("tx", producer_epoch=5).error is E.INVALID_REQUEST

    def test_unknown_transactional_id_gets_a_new_producer(self, harness):
        dec = harness.init("tx", producer_id=77, producer_epoch=4)
        assert (dec.error, dec.producer_id, dec.producer_epoch) == (E.NONE, 1000, 0)

    def test_current_producer_during_ongoing_aborts_and_recovers_the_bumped_epoch(self, harness):
        pid, epoch = start_txn(harness)
        dec = harness.init("tx", producer_id=pid, producer_epoch=epoch)
        assert dec.error is E.CONCURRENT_TRANSACTIONS
        harness.markers_done("tx", dec.write_markers)
        retry = harness.init("tx", producer_id=pid, producer_epoch=epoch)
        assert (retry.error, retry.producer_epoch) == (E.NONE, epoch + 1)

    def test_stale_identity_during_ongoing_is_fenced_without_aborting(self, harness):
        harness.init("tx")
        harness.init("tx", producer_id=1000, producer_epoch=0)  # epoch 1, remembers 0
        harness.add("tx", 1000, 1)
        assert harness.init("tx", producer_id=1000, producer_epoch=0).error is E.PRODUCER_FENCED
        assert harness.state("tx") is S.ONGOING

    def test_producer_fenced_is_invalid_producer_epoch_for_old_request_versions(self):
        assert d.error_for_version(E.PRODUCER_FENCED, 22, 3) is E.INVALID_PRODUCER_EPOCH
        assert d.error_for_version(E.PRODUCER_FENCED, 22, 4) is E.PRODUCER_FENCED
        for api_key in (24, 25, 26):
            assert d.error_for_version(E.PRODUCER_FENCED, api_key, 1) is E.INVALID_PRODUCER_EPOCH
            assert d.error_for_version(E.PRODUCER_FENCED, api_key, 2) is E.PRODUCER_FENCED
        assert d.error_for_version(E.PRODUCER_FENCED, 0, 0) is E.PRODUCER_FENCED
        assert d.error_for_version(E.CONCURRENT_TRANSACTIONS, 26, 0) is E.CONCURRENT_TRANSACTIONS


# ---- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------------

def test_add_partitions_starts_and_widens_the_transaction(harness):
    harness.init("tx")
    harness.now = 5_000_000
    assert harness.add("tx", 1000, 0, ("t", 0)).transit.state is S.ONGOING
    m = harness.states["tx"]
    assert m.topic_partitions == {T0} and m.txn_start_timestamp == 5_000_000
    harness.now += 10
    assert harness.add("tx", 1000, 0, ("t", 1)).error is E.NONE
    assert m.topic_partitions == {T0, T1} and m.txn_start_timestamp == 5_000_000
    assert m.txn_last_update_timestamp == 5_000_010
    # Partitions already in the transaction: answered at once, nothing logged.
    log_length = len(harness.log)
    dec = harness.add("tx", 1000, 0, ("t", 1))
    assert dec.error is E.NONE and dec.transit is None and len(harness.log) == log_length


def test_add_partitions_after_a_completed_transaction_starts_a_new_one(harness):
    pid, epoch = start_txn(harness)
    harness.markers_done("tx", harness.end("tx", pid, epoch, COMMIT).write_markers)
    harness.now += 1000
    assert harness.add("tx", pid, epoch, ("u", 3)).error is E.NONE
    m = harness.states["tx"]
    assert m.state is S.ONGOING and m.topic_partitions == {TopicPartition("u", 3)}
    assert m.txn_start_timestamp == harness.now


@pytest.mark.parametrize("result", [COMMIT, ABORT])
def test_add_partitions_while_preparing_is_concurrent(harness, result):
    pid, epoch = start_txn(harness)
    harness.end("tx", pid, epoch, result)
    assert harness.add("tx", pid, epoch, ("t", 9)).error is E.CONCURRENT_TRANSACTIONS
    assert harness.add_offsets("tx", pid, epoch, "g").error is E.CONCURRENT_TRANSACTIONS


def test_add_partitions_identity_errors(harness):
    assert harness.add("nobody", 1000, 0).error is E.INVALID_PRODUCER_ID_MAPPING
    harness.init("tx")
    assert harness.add("tx", 999, 0).error is E.INVALID_PRODUCER_ID_MAPPING
    assert harness.add("tx", 1000, 1).error is E.PRODUCER_FENCED  # a future epoch is wrong too
    assert harness.state("tx") is S.EMPTY


def test_add_offsets_adds_the_groups_consumer_offsets_partition(harness):
    harness.init("tx")
    assert harness.add_offsets("tx", 1000, 0, "my-group").error is E.NONE
    expected = TopicPartition("__consumer_offsets", partition_for("my-group", 50))
    assert harness.states["tx"].topic_partitions == {expected}
    assert d.consumer_offsets_partition("my-group", harness.config) == expected


def test_every_api_answers_concurrent_while_a_transit_is_pending(harness):
    pid, epoch = start_txn(harness)
    m = harness.states["tx"]
    pending = m.prepare_add_partitions([T1], harness.now)  # in flight to the log
    assert d.init_producer_id(m, "tx", 60_000, 0, harness.config, harness.allocate).error \
        is E.CONCURRENT_TRANSACTIONS
    assert d.init_producer_id(m, "tx", 60_000, 0, harness.config, harness.allocate,
                              producer_id=pid, producer_epoch=epoch).error is E.CONCURRENT_TRANSACTIONS
    assert d.add_partitions_to_txn(m, "tx", pid, epoch, [TopicPartition("x", 0)], 0).error \
        is E.CONCURRENT_TRANSACTIONS
    for result in (COMMIT, ABORT):
        assert d.end_txn(m, "tx", pid, epoch, result, 0).error is E.CONCURRENT_TRANSACTIONS
    verify = d.verify_partitions_in_txn(m, "tx", pid, epoch, [T0])
    assert verify.partition_errors == {T0: E.CONCURRENT_TRANSACTIONS}
    assert d.expired_transactions({"tx": m}, 10**15) == []
    assert d.abort_timed_out_transaction(m, 10**15).transit is None
    assert m.pending_transit is pending


# ---- KIP-890 part 1: verify only ----------------------------------------------------------------------

def test_verify_partitions_in_transaction(harness):
    pid, epoch = start_txn(harness, "tx", ("t", 0))
    m = harness.states["tx"]
    dec = d.verify_partitions_in_txn(m, "tx", pid, epoch, [T0, T1])
    assert dec.error is E.NONE and dec.partition_errors == {T0: E.NONE, T1: E.INVALID_TXN_STATE}
    assert dec.transit is None and not m.pending_transition_in_progress
    assert d.is_partition_in_transaction(m, pid, epoch, T0)
    assert not d.is_partition_in_transaction(m, pid, epoch, T1)
    assert not d.is_partition_in_transaction(m, pid, epoch + 1, T0)
    assert not d.is_partition_in_transaction(None, pid, epoch, T0)
    fenced = d.verify_partitions_in_txn(m, "tx", pid, epoch - 1 if epoch else 5, [T0])
    assert fenced.partition_errors == {T0: E.PRODUCER_FENCED}
    assert d.verify_partitions_in_txn(None, "tx", pid, epoch, [T0]).error is E.INVALID_PRODUCER_ID_MAPPING


def test_verify_after_the_transaction_ended(harness):
    pid, epoch = start_txn(harness)
    dec = harness.end("tx", pid, epoch, COMMIT)
    m = harness.states["tx"]
    assert d.verify_partitions_in_txn(m, "tx", pid, epoch, [T0]).partition_errors == \
        {T0: E.CONCURRENT_TRANSACTIONS}
    harness.markers_done("tx", dec.write_markers)
    assert d.verify_partitions_in_txn(m, "tx", pid, epoch, [T0]).partition_errors == \
        {T0: E.INVALID_TXN_STATE}
    assert not d.is_partition_in_transaction(m, pid, epoch, T0)


# ---- EndTxn and markers -----------------------------------------------------------------------------

@pytest.mark.parametrize("result", [COMMIT, ABORT])
def test_end_txn_full_cycle_and_retries(harness, result):
    pid, epoch = start_txn(harness, "tx", ("t", 0), ("t", 1))
    other = ABORT if result is COMMIT else COMMIT
    prepare = {COMMIT: S.PREPARE_COMMIT, ABORT: S.PREPARE_ABORT}[result]
    complete = {COMMIT: S.COMPLETE_COMMIT, ABORT: S.COMPLETE_ABORT}[result]

    dec = harness.end("tx", pid, epoch, result)
    assert dec.error is E.NONE and dec.transit.state is prepare
    assert decode_value(harness.log[-1][1]).state is prepare  # the commit point is logged
    assert dec.write_markers == d.WriteTxnMarkers("tx", pid, epoch, result, frozenset({T0, T1}))

    assert harness.end("tx", pid, epoch, result).error is E.CONCURRENT_TRANSACTIONS
    assert harness.end("tx", pid, epoch, other).error is E.INVALID_TXN_STATE
    # A completion report for the other result or an old epoch is refused.
    wrong = d.WriteTxnMarkers("tx", pid, epoch, other, frozenset({T0, T1}))
    assert harness.markers_done("tx", wrong).error is E.INVALID_TXN_STATE
    stale = d.WriteTxnMarkers("tx", pid, epoch - 1, result, frozenset({T0, T1}))
    assert harness.markers_done("tx", stale).error is E.PRODUCER_FENCED
    assert harness.state("tx") is prepare

    assert harness.markers_done("tx", dec.write_markers).error is E.NONE
    m = harness.states["tx"]
    assert m.state is complete and m.topic_partitions == set()
    assert decode_value(harness.log[-1][1]).state is complete
    # The EndTxn retried after its answer got lost succeeds; the other result does not.
    assert harness.end("tx", pid, epoch, result).error is E.NONE
    assert harness.end("tx", pid, epoch, other).error is E.INVALID_TXN_STATE
    assert harness.markers_done("tx", dec.write_markers).error is E.INVALID_TXN_STATE


def test_end_txn_in_empty(harness):
    harness.init("tx")
    assert harness.end("tx", 1000, 0, ABORT).error is E.NONE
    assert harness.end("tx", 1000, 0, COMMIT).error is E.INVALID_TXN_STATE
    assert harness.state("tx") is S.EMPTY and len(harness.log) == 1


def test_end_txn_identity_errors(harness):
    assert harness.end("nobody", 1, 0).error is E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = start_txn(harness)
    assert harness.end("tx", pid + 1, epoch).error is E.INVALID_PRODUCER_ID_MAPPING
    assert harness.end("tx", pid, epoch + 1).error is E.PRODUCER_FENCED
    assert harness.state("tx") is S.ONGOING


def test_end_txn_append_failure_keeps_the_transaction_open(harness):
    pid, epoch = start_txn(harness)
    dec = harness.end("tx", pid, epoch, COMMIT, append_fails=True)
    assert dec.transit is not None and harness.state("tx") is S.ONGOING
    assert harness.end("tx", pid, epoch, COMMIT).error is E.NONE
    assert harness.state("tx") is S.PREPARE_COMMIT


def test_dead_metadata_is_treated_as_absent(harness):
    m = TransactionMetadata("tx", producer_id=5, producer_epoch=0, state=S.DEAD)
    assert d.add_partitions_to_txn(m, "tx", 5, 0, [T0], 0).error is E.INVALID_PRODUCER_ID_MAPPING
    assert d.end_txn(m, "tx", 5, 0, ABORT, 0).error is E.INVALID_PRODUCER_ID_MAPPING
    dec = d.init_producer_id(m, "tx", 1000, 0, harness.config, harness.allocate)
    assert dec.new_metadata is not None and dec.producer_id == 1000


# ---- transaction timeout ----------------------------------------------------------------------------

def test_transaction_timeout_aborts_with_an_epoch_bump_and_the_producer_recovers(harness):
    harness.init("tx", timeout_ms=60_000)
    start = harness.now
    harness.add("tx", 1000, 0, ("t", 0))
    harness.init("other")  # Empty: never times out

    harness.now = start + 60_000
    assert d.expired_transactions(harness.states, harness.now) == []
    harness.now = start + 60_001
    assert d.expired_transactions(harness.states, harness.now) == ["tx"]

    dec = harness.carry_out("tx", d.abort_timed_out_transaction(harness.states["tx"], harness.now))
    assert dec.transit.state is S.PREPARE_ABORT and dec.transit.producer_epoch == 1
    assert dec.write_markers == d.WriteTxnMarkers("tx", 1000, 1, ABORT, frozenset({T0}))
    assert d.expired_transactions(harness.states, harness.now + 10**6) == []

    # The timed-out producer (epoch 0) is told INVALID_PRODUCER_EPOCH (abortable), not PRODUCER_FENCED.
    assert harness.add("tx", 1000, 0, ("t", 1)).error is E.INVALID_PRODUCER_EPOCH
    assert harness.end("tx", 1000, 0, COMMIT).error is E.INVALID_PRODUCER_EPOCH
    assert harness.end("tx", 1000, 0, ABORT).error is E.CONCURRENT_TRANSACTIONS  # markers in flight
    harness.markers_done("tx", dec.write_markers)
    assert harness.state("tx") is S.COMPLETE_ABORT
    assert harness.end("tx", 1000, 0, ABORT).error is E.NONE  # its abortTransaction() succeeds
    # ... and KIP-360 InitProducerId with its old identity gets the bumped epoch back.
    recovered = harness.init("tx", producer_id=1000, producer_epoch=0)
    assert (recovered.error, recovered.producer_id, recovered.producer_epoch) == (E.NONE, 1000, 1)
    assert harness.add("tx", 1000, 1).error is E.NONE
    # A stale abort from epoch 0 can no longer touch the new transaction.
    assert harness.end("tx", 1000, 0, ABORT).error is E.INVALID_PRODUCER_EPOCH
    assert harness.state("tx") is S.ONGOING


def test_after_a_timeout_a_new_producer_still_fences_the_old_one(harness):
    harness.init("tx", timeout_ms=1000)
    harness.add("tx", 1000, 0)
    harness.now += 1001
    dec = harness.carry_out("tx", d.abort_timed_out_transaction(harness.states["tx"], harness.now))
    harness.markers_done("tx", dec.write_markers)
    assert harness.init("tx").producer_epoch == 2  # new instance, no identity supplied
    assert harness.add("tx", 1000, 0).error is E.PRODUCER_FENCED
    assert harness.init("tx", producer_id=1000, producer_epoch=0).error is E.PRODUCER_FENCED


def test_abort_timed_out_is_a_no_op_when_nothing_expired(harness):
    harness.init("tx", timeout_ms=1000)
    assert d.abort_timed_out_transaction(harness.states["tx"], harness.now + 5000).transit is None  # Empty
    harness.add("tx", 1000, 0)
    assert d.abort_timed_out_transaction(harness.states["tx"], harness.now + 1000).transit is None
    assert not harness.states["tx"].pending_transition_in_progress


def test_timeout_while_end_txn_races(harness):
    harness.init("tx", timeout_ms=1000)
    harness.add("tx", 1000, 0)
    harness.now += 2000
    assert d.expired_transactions(harness.states, harness.now) == ["tx"]
    harness.end("tx", 1000, 0, COMMIT)  # the client's commit wins the race
    assert d.abort_timed_out_transaction(harness.states["tx"], harness.now).transit is None
    assert harness.state("tx") is S.PREPARE_COMMIT


# ---- transactional id expiration ---------------------------------------------------------------------

def test_transactional_id_expiration(harness):
    exp = harness.config.transactional_id_expiration_ms
    harness.init("idle")
    start_txn(harness, "busy")
    harness.init("done")
    harness.add("done", harness.pid("done"), 0)
    harness.markers_done("done", harness.end("done", harness.pid("done"), 0, COMMIT).write_markers)
    now = harness.now + exp
    assert d.expired_transactional_ids(harness.states, now - 1, harness.config) == []
    assert d.expired_transactional_ids(harness.states, now, harness.config) == ["done", "idle"]
    for tid in ("done", "idle"):
        dec = harness.carry_out(tid, d.expire_transactional_id(harness.states[tid], now, harness.config))
        assert dec.transit.state is S.DEAD
        assert harness.log[-1][1] is None  # a tombstone
        assert tid not in harness.states
    assert d.expire_transactional_id(harness.states["busy"], now, harness.config).transit is None
    assert set(harness.states) == {"busy"}
    # An expired id starts over with a new producer id.
    harness.now = now
    dec = harness.init("idle")
    assert dec.new_metadata is not None and dec.producer_epoch == 0 and dec.producer_id == harness.next_producer_id - 1


def test_expiration_skips_an_id_that_became_busy(harness):
    harness.init("tx")
    now = harness.now + harness.config.transactional_id_expiration_ms
    assert d.expired_transactional_ids(harness.states, now, harness.config) == ["tx"]
    harness.now = now - 1
    harness.add("tx", 1000, 0)  # used again before the expiry ran
    assert d.expire_transactional_id(harness.states["tx"], now, harness.config).transit is None
