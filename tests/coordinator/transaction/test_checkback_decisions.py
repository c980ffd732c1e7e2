"""Check-back transactions in the coordinator's core (issue 20): every transit of decisions.py's check-back
decisions, idempotent and stale answers, max checks, fencing, and the record round trip (Checking is
written as Ongoing + eoslog's tags, which a Kafka-format reader skips)."""

from __future__ import annotations

import struct

import pytest

from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.checkback import Answer, CheckPolicy
from eoslog.coordinator.transaction.decisions import TransactionConfig, TxnError
from eoslog.coordinator.transaction.log_format import (
    decode_value,
    encode_key,
    encode_value,
    load_state,
    recovery_actions,
)
from eoslog.coordinator.transaction.metadata import TopicPartition, TransactionMetadata, TransactionResult
from eoslog.coordinator.transaction.state import TransactionState
from eoslog.protocol.wire import read_uvarint

S = TransactionState
POLICY = CheckPolicy(max_checks=3, backoff_ms=100, backoff_max_ms=250)
CONFIG = TransactionConfig(check_policy=POLICY, check_lease_ms=1000)
TP = TopicPartition("orders", 0)
T0 = 1_000_000


def _apply(metadata: TransactionMetadata, decision: d.Decision, log: list | None = None) -> d.Decision:
    """What the shell does: log the transit (here: encode it), then apply it."""
    assert decision.transit is not None, decision
    if log is not None:
        log.append((encode_key(metadata.transactional_id), encode_value(decision.transit)))
    metadata.complete_transition(decision.transit)
    return decision


def _init(log=None) -> TransactionMetadata:
    ids = iter(range(1000, 2000))
    decision = d.init_producer_id(None, "cb-1", 1000, T0, CONFIG, lambda: next(ids))
    metadata = decision.new_metadata
    _apply(metadata, decision, log)
    return metadata


def _ongoing(log=None, group="orders-app") -> TransactionMetadata:
    m = _init(log)
    _apply(m, d.begin_check_back(m, "cb-1", m.producer_id, m.producer_epoch, group, T0), log)
    _apply(m, d.add_partitions_to_txn(m, "cb-1", m.producer_id, m.producer_epoch, [TP], T0 + 1), log)
    return m


def _checking(log=None) -> TransactionMetadata:
    m = _ongoing(log)
    _apply(m, d.time_out_transaction(m, T0 + 2000), log)
    return m


def test_begin_check_back_is_logged_idempotent_and_checked():
    log: list = []
    m = _init(log)
    decision = d.begin_check_back(m, "cb-1", m.producer_id, m.producer_epoch, "g", T0)
    assert decision.transit.state is S.EMPTY and decision.transit.check_back_group == "g"
    _apply(m, decision, log)
    assert load_state(log)["cb-1"].check_back_group == "g"  # survives a restart
    again = d.begin_check_back(m, "cb-1", m.producer_id, m.producer_epoch, "g", T0)
    assert again.transit is None and again.error is TxnError.NONE
    assert d.begin_check_back(m, "cb-1", m.producer_id, m.producer_epoch + 1, "g", T0).error is TxnError.PRODUCER_FENCED
    assert d.begin_check_back(m, "cb-1", m.producer_id, m.producer_epoch, "", T0).error is TxnError.INVALID_REQUEST
    # A plain transaction already open: refused.
    plain = _init()
    _apply(plain, d.add_partitions_to_txn(plain, "cb-1", plain.producer_id, plain.producer_epoch, [TP], T0))
    assert d.begin_check_back(plain, "cb-1", plain.producer_id, plain.producer_epoch, "g",
                              T0).error is TxnError.CONCURRENT_TRANSACTIONS


def test_timeout_moves_a_check_back_transaction_to_checking_and_a_plain_one_to_abort():
    m = _ongoing()
    assert d.time_out_transaction(m, T0 + 1000).transit is None  # not yet: start + timeout is not passed
    assert d.abort_timed_out_transaction(m, T0 + 5000).transit is None  # never aborted by the timeout
    decision = d.time_out_transaction(m, T0 + 2000)
    assert decision.transit.state is S.CHECKING and decision.write_markers is None
    assert (decision.transit.check_count, decision.transit.next_check_ms) == (0, T0 + 2000)
    assert decision.transit.producer_epoch == m.producer_epoch  # no bump: the producer may still decide
    _apply(m, decision)
    assert d.time_out_transaction(m, T0 + 9000).transit is None  # Checking is never timed out again

    plain = _init()
    _apply(plain, d.add_partitions_to_txn(plain, "cb-1", plain.producer_id, plain.producer_epoch, [TP], T0))
    aborted = d.time_out_transaction(plain, T0 + 2000)
    assert aborted.transit.state is S.PREPARE_ABORT and aborted.transit.producer_epoch == plain.producer_epoch + 1


def test_a_transaction_started_after_a_complete_one_is_plain():
    m = _checking()
    _apply(m, d.answer_check_back(m, "cb-1", m.producer_id, m.producer_epoch, 0, Answer.COMMIT, T0 + 2100, POLICY))
    _apply(m, d.markers_written(m, d.WriteTxnMarkers("cb-1", m.producer_id, m.producer_epoch,
                                                    TransactionResult.COMMIT, frozenset({TP})), T0 + 2200))
    assert m.state is S.COMPLETE_COMMIT
    _apply(m, d.add_partitions_to_txn(m, "cb-1", m.producer_id, m.producer_epoch, [TP], T0 + 3000))
    assert m.check_back_group is None and m.check_count == -1


def test_poll_leases_due_checks_and_an_expired_lease_counts_as_a_check():
    m = _checking()
    assert d.lease_due_checks([m], "other", T0 + 2000, 1000, 10) == []
    assert d.lease_due_checks([m], "orders-app", T0 + 2000, 1000, 0) == []
    assert d.lease_due_checks([m], "orders-app", T0 + 2000, 1000, 10) == [m]
    assert m.check_lease_until_ms == T0 + 3000
    assert d.lease_due_checks([m], "orders-app", T0 + 2500, 1000, 10) == []  # lent out
    assert d.next_check_due_ms([m], "orders-app") == T0 + 3000
    assert d.expired_check_leases({"cb-1": m}, T0 + 2999) == []
    assert d.expired_check_leases({"cb-1": m}, T0 + 3000) == ["cb-1"]
    decision = d.check_lease_expired(m, T0 + 3000, POLICY)
    assert decision.transit.state is S.CHECKING and decision.transit.check_count == 1
    assert decision.transit.next_check_ms == T0 + 3000 + 100
    _apply(m, decision)
    assert m.check_lease_until_ms == -1  # the new check is not lent out
    assert d.lease_due_checks([m], "orders-app", T0 + 3099, 1000, 10) == []
    assert d.lease_due_checks([m], "orders-app", T0 + 3100, 1000, 10) == [m]


def test_commit_answer_prepares_commit_with_markers():
    m = _checking()
    decision = d.answer_check_back(m, "cb-1", m.producer_id, m.producer_epoch, 0, Answer.COMMIT, T0 + 2100, POLICY)
    assert decision.transit.state is S.PREPARE_COMMIT and decision.transit.producer_epoch == m.producer_epoch
    assert decision.write_markers.result is TransactionResult.COMMIT and decision.write_markers.partitions == {TP}
    _apply(m, decision)
    # Idempotent: the same answer again is NONE; a contradicting one INVALID_TXN_STATE; nothing changes.
    for answer, error in ((Answer.COMMIT, TxnError.NONE), (Answer.UNKNOWN, TxnError.NONE),
                          (Answer.ROLLBACK, TxnError.INVALID_TXN_STATE)):
        again = d.answer_check_back(m, "cb-1", m.producer_id, m.producer_epoch, 0, answer, T0 + 2200, POLICY)
        assert again.transit is None and again.error is error


def test_rollback_answer_aborts_under_a_bumped_epoch_with_the_reason():
    m = _checking()
    pid, epoch = m.producer_id, m.producer_epoch
    decision = d.answer_check_back(m, "cb-1", pid, epoch, 0, Answer.ROLLBACK, T0 + 2100, POLICY)
    assert decision.transit.state is S.PREPARE_ABORT and decision.transit.producer_epoch == epoch + 1
    assert decision.transit.abort_reason == "check-back: rollback"
    assert decision.write_markers.result is TransactionResult.ABORT
    _apply(m, decision)
    retry = d.answer_check_back(m, "cb-1", pid, epoch, 0, Answer.ROLLBACK, T0 + 2200, POLICY)
    assert retry.transit is None and retry.error is TxnError.NONE
    assert d.answer_check_back(m, "cb-1", pid, epoch, 0, Answer.COMMIT, T0 + 2200,
                               POLICY).error is TxnError.INVALID_TXN_STATE


def test_unknown_backs_off_and_max_checks_abort_with_the_reason_recorded():
    log: list = []
    m = _checking(log)
    now = T0 + 2000
    for check, backoff in ((0, 100), (1, 200)):
        decision = d.answer_check_back(m, "cb-1", m.producer_id, m.producer_epoch, check, Answer.UNKNOWN, now, POLICY)
        assert decision.transit.state is S.CHECKING
        assert (decision.transit.check_count, decision.transit.next_check_ms) == (check + 1, now + backoff)
        _apply(m, decision, log)
        # A stale answer (to the check before) is a no-op success, even a commit.
        stale = d.answer_check_back(m, "cb-1", m.producer_id, m.producer_epoch, check, Answer.COMMIT, now, POLICY)
        assert stale.transit is None and stale.error is TxnError.NONE and m.state is S.CHECKING
    decision = d.answer_check_back(m, "cb-1", m.producer_id, m.producer_epoch, 2, Answer.UNKNOWN, now, POLICY)
    assert decision.transit.state is S.PREPARE_ABORT
    assert decision.transit.abort_reason == "check-back: max checks (3) reached"
    assert decision.transit.check_count == 2  # the count logged with the decision is the last one asked
    _apply(m, decision, log)
    # The reason is in the log and survives a reload, through the Complete record too.
    reloaded = load_state(log)["cb-1"]
    assert reloaded.state is S.PREPARE_ABORT and reloaded.abort_reason == "check-back: max checks (3) reached"
    (action,) = recovery_actions({"cb-1": reloaded}, now)
    assert action.complete.state is S.COMPLETE_ABORT and action.complete.abort_reason == reloaded.abort_reason


def test_fencing_init_producer_id_aborts_a_checking_transaction_and_the_zombie_cannot_resolve():
    m = _checking()
    pid, epoch = m.producer_id, m.producer_epoch
    decision = d.init_producer_id(m, "cb-1", 1000, T0 + 2100, CONFIG, lambda: 9999)
    assert decision.error is TxnError.CONCURRENT_TRANSACTIONS
    assert decision.transit.state is S.PREPARE_ABORT and decision.transit.producer_epoch == epoch + 1
    assert decision.transit.abort_reason == d.FENCED_WHILE_CHECKING
    _apply(m, decision)
    for answer in Answer:
        fenced = d.answer_check_back(m, "cb-1", pid, epoch, 0, answer, T0 + 2200, POLICY)
        assert fenced.transit is None and fenced.error is TxnError.PRODUCER_FENCED
    assert d.end_txn(m, "cb-1", pid, epoch, TransactionResult.COMMIT, T0 + 2200).error is TxnError.PRODUCER_FENCED
    # An answer from an identity that never held the id, on a Checking one: fenced too.
    other = _checking()
    assert d.answer_check_back(other, "cb-1", other.producer_id, other.producer_epoch - 1, 0, Answer.COMMIT,
                               T0, POLICY).error is TxnError.PRODUCER_FENCED
    assert d.answer_check_back(None, "cb-1", 1, 1, 0, Answer.COMMIT, T0,
                               POLICY).error is TxnError.INVALID_PRODUCER_ID_MAPPING


def test_the_owner_may_still_end_a_checking_transaction_but_not_widen_it():
    m = _checking()
    assert d.add_partitions_to_txn(m, "cb-1", m.producer_id, m.producer_epoch, [TopicPartition("x", 1)],
                                   T0).error is TxnError.INVALID_TXN_STATE
    verified = d.verify_partitions_in_txn(m, "cb-1", m.producer_id, m.producer_epoch, [TP])
    assert verified.partition_errors[TP] is TxnError.INVALID_TXN_STATE
    assert not d.is_partition_in_transaction(m, m.producer_id, m.producer_epoch, TP)
    decision = d.end_txn(m, "cb-1", m.producer_id, m.producer_epoch, TransactionResult.COMMIT, T0 + 2100)
    assert decision.transit.state is S.PREPARE_COMMIT and decision.transit.abort_reason is None


def test_pending_and_plain_transactions():
    m = _checking()
    m.prepare_checking(1, T0, T0)  # something else is being logged
    assert d.answer_check_back(m, "cb-1", m.producer_id, m.producer_epoch, 0, Answer.COMMIT, T0,
                               POLICY).error is TxnError.CONCURRENT_TRANSACTIONS
    assert d.lease_due_checks([m], "orders-app", T0 + 9000, 1000, 10) == []
    plain = _init()
    _apply(plain, d.add_partitions_to_txn(plain, "cb-1", plain.producer_id, plain.producer_epoch, [TP], T0))
    assert d.answer_check_back(plain, "cb-1", plain.producer_id, plain.producer_epoch, 0, Answer.COMMIT, T0,
                               POLICY).error is TxnError.INVALID_TXN_STATE


# ---- the record --------------------------------------------------------------------------------------------

def _kafka_reader(value: bytes) -> dict:
    """A reader that knows only Kafka's TransactionLogValue v1 (tags 0-2), written independently of
    log_format: unknown tags are skipped by their size, as Kafka's generated readers do."""
    version, pid, epoch, _timeout, status = struct.unpack_from(">hqhib", value)
    pos = 17
    topics, pos = read_uvarint(value, pos)
    for _ in range(max(topics - 1, 0)):
        n, pos = read_uvarint(value, pos)
        pos += n - 1
        count, pos = read_uvarint(value, pos)
        pos += 4 * (count - 1)
        tags, pos = read_uvarint(value, pos)
        assert tags == 0
    pos += 16
    known = {}
    tags, pos = read_uvarint(value, pos)
    for _ in range(tags):
        tag, pos = read_uvarint(value, pos)
        size, pos = read_uvarint(value, pos)
        if tag in (0, 1, 2):
            known[tag] = value[pos:pos + size]
        pos += size
    assert pos == len(value)
    return {"version": version, "status": status, "producer_id": pid, "producer_epoch": epoch, "tags": known}


def test_checking_is_written_as_ongoing_with_our_tags_and_reloads_as_checking():
    log: list = []
    m = _checking(log)
    _key, value = log[-1]
    kafka = _kafka_reader(value)
    assert kafka["version"] == 1 and kafka["status"] == S.ONGOING.id and kafka["tags"] == {}
    assert (kafka["producer_id"], kafka["producer_epoch"]) == (m.producer_id, m.producer_epoch)
    decoded = decode_value(value)
    assert decoded.state is S.CHECKING and decoded.check_count == 0 and decoded.next_check_ms == T0 + 2000
    assert decoded.check_back_group == "orders-app" and decoded.abort_reason is None
    reloaded = load_state(log)["cb-1"]
    assert reloaded.snapshot() == m.snapshot()
    assert recovery_actions({"cb-1": reloaded}, T0) == []  # Checking needs no markers; the timer resumes it
    # The Ongoing check-back record before it reloads as Ongoing with its group (not yet checking).
    ongoing = load_state(log[:-1])["cb-1"]
    assert ongoing.state is S.ONGOING and ongoing.check_back_group == "orders-app" and ongoing.check_count == -1


@pytest.mark.parametrize("reason", [None, "check-back: rollback", "ü" * 200])
def test_every_tag_round_trips(reason):
    m = TransactionMetadata("t", producer_id=5, producer_epoch=7, txn_timeout_ms=1000, state=S.CHECKING,
                            topic_partitions={TP}, txn_start_timestamp=10, txn_last_update_timestamp=20,
                            check_back_group="g" * 300, check_count=12, next_check_ms=2**40,
                            abort_reason=reason, client_transaction_version=2, previous_producer_id=4)
    transit = m.snapshot()
    value = encode_value(transit)
    decoded = decode_value(value)
    assert (decoded.state, decoded.check_back_group, decoded.check_count, decoded.next_check_ms,
            decoded.abort_reason, decoded.client_transaction_version, decoded.previous_producer_id) == (
        S.CHECKING, "g" * 300, 12, 2**40, reason, 2, 4)
    assert _kafka_reader(value)["tags"].keys() == {0, 2}


def test_a_plain_transaction_is_written_byte_for_byte_as_before():
    m = _init()
    _apply(m, d.add_partitions_to_txn(m, "cb-1", m.producer_id, m.producer_epoch, [TP], T0))
    value = encode_value(m.snapshot())
    assert struct.unpack_from(">h", value)[0] == 0  # value version 0: no tags at all


def test_the_worked_example_of_docs_transactions_md():
    m = TransactionMetadata("txn-1", producer_id=1000, producer_epoch=2, txn_timeout_ms=60000, state=S.CHECKING,
                            topic_partitions={TopicPartition("orders", 0)}, txn_start_timestamp=1700000000000,
                            txn_last_update_timestamp=1700000060123, check_back_group="app", check_count=1,
                            next_check_ms=1700000061123)
    assert encode_value(m.snapshot()) == bytes.fromhex(
        "000100000000000003e800020000ea60" "0102076f72646572730200000000000000"
        "018bcfe652db0000018bcfe568000380fc01040461707081fc01040000000182fc01080000018bcfe656c3")


def test_an_abort_by_prefix_takes_a_checking_transaction_with_its_reason():
    from eoslog.coordinator.transaction_groups import decisions as gd

    m = _checking()
    assert gd.prefix_abort_candidates([m], "cb-", (), ()) == ["cb-1"]
    decision = gd.abort_by_prefix(m, T0 + 2100)
    assert decision.transit.state is S.PREPARE_ABORT and decision.transit.producer_epoch == m.producer_epoch + 1
    assert decision.transit.abort_reason == gd.ABORTED_BY_PREFIX
