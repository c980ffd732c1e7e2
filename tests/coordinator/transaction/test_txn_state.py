"""The transition table: every (from, to) pair, at the table and at the metadata's prepare_* level."""

from __future__ import annotations

import itertools

import pytest

from eoslog.coordinator.transaction.metadata import (
    TopicPartition,
    TransactionMetadata,
    TransactionResult,
)
from eoslog.coordinator.transaction.state import (
    VALID_PREVIOUS_STATES,
    IllegalStateTransition,
    TransactionState,
    UnknownTransactionState,
    check_transition,
    is_valid_transition,
)

S = TransactionState

# Written out independently of the module, from Kafka's TransactionState (4.x) rules, plus eoslog's
# Checking (check-back transactions, docs/transactions.md).
EXPECTED_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING, S.CHECKING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT,
                      S.CHECKING},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    S.CHECKING: {S.ONGOING, S.CHECKING},
}

ALL_PAIRS = list(itertools.product(TransactionState, TransactionState))


def test_persisted_ids_are_kafkas():
    assert {s.name: s.id for s in S} == {
        "EMPTY": 0, "ONGOING": 1, "PREPARE_COMMIT": 2, "PREPARE_ABORT": 3,
        "COMPLETE_COMMIT": 4, "COMPLETE_ABORT": 5, "DEAD": 6, "PREPARE_EPOCH_FENCE": 7, "CHECKING": 8}
    for s in S:
        assert S.from_id(s.id) is s
        assert S.from_kafka_name(s.kafka_name) is s
    assert S.PREPARE_EPOCH_FENCE.kafka_name == "PrepareEpochFence"
    assert S.CHECKING.kafka_name == "Checking"
    with pytest.raises(UnknownTransactionState):
        S.from_id(9)
    with pytest.raises(UnknownTransactionState):
        S.from_kafka_name("Committed")


def test_table_covers_every_state():
    assert set(VALID_PREVIOUS_STATES) == set(S)
    assert {k: set(v) for k, v in VALID_PREVIOUS_STATES.items()} == EXPECTED_PREVIOUS


@pytest.mark.parametrize("from_state,to_state", ALL_PAIRS, ids=lambda s: s.kafka_name)
def test_every_pair(from_state, to_state):
    allowed = from_state in EXPECTED_PREVIOUS[to_state]
    assert is_valid_transition(from_state, to_state) is allowed
    if allowed:
        check_transition(from_state, to_state, "t")
    else:
        with pytest.raises(IllegalStateTransition) as info:
            check_transition(from_state, to_state, "t")
        assert info.value.from_state is from_state and info.value.to_state is to_state


def test_expiration_allowed_only_when_resting():
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


# ---- the same table, reached through TransactionMetadata.prepare_* -------------------------------------

TP = TopicPartition("t", 0)


def _metadata_in(state: TransactionState) -> TransactionMetadata:
    partitions = {TP} if state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT, S.DEAD) else set()
    return TransactionMetadata("tid", producer_id=7, producer_epoch=3, txn_timeout_ms=1000, state=state,
                               topic_partitions=partitions, txn_start_timestamp=10,
                               txn_last_update_timestamp=20, check_back_group="g",
                               check_count=0 if state is S.CHECKING else -1)


# operation name -> (callable, target state as a function of the current state)
OPERATIONS = {
    "increment_epoch": (lambda m: m.prepare_increment_producer_epoch(1000, 100, remember_current=False),
                        lambda s: S.EMPTY),
    "keep_epoch": (lambda m: m.prepare_keep_producer_epoch(1000, 100), lambda s: S.EMPTY),
    "rotate_producer_id": (lambda m: m.prepare_producer_id_rotation(8, 1000, 100, remember=None),
                           lambda s: S.EMPTY),
    "add_partitions": (lambda m: m.prepare_add_partitions([TopicPartition("u", 1)], 100), lambda s: S.ONGOING),
    "commit": (lambda m: m.prepare_abort_or_commit(TransactionResult.COMMIT, 100), lambda s: S.PREPARE_COMMIT),
    "abort": (lambda m: m.prepare_abort_or_commit(TransactionResult.ABORT, 100), lambda s: S.PREPARE_ABORT),
    "fence_and_abort": (lambda m: m.prepare_fence_and_abort(100, recoverable=False),
                        lambda s: S.PREPARE_ABORT),
    "complete": (lambda m: m.prepare_complete(100),
                 lambda s: {S.PREPARE_COMMIT: S.COMPLETE_COMMIT, S.PREPARE_ABORT: S.COMPLETE_ABORT}.get(s)),
    "dead": (lambda m: m.prepare_dead(), lambda s: S.DEAD),
    "checking": (lambda m: m.prepare_checking(1, 500, 100), lambda s: S.CHECKING),
    "begin_check_back": (lambda m: m.prepare_begin_check_back("g2", 100), lambda s: S.EMPTY),
}


@pytest.mark.parametrize("state", list(S), ids=lambda s: s.kafka_name)
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_every_state_and_operation(state, operation):
    prepare, target_of = OPERATIONS[operation]
    metadata = _metadata_in(state)
    target = target_of(state)
    if target is not None and state in EXPECTED_PREVIOUS[target]:
        transit = prepare(metadata)
        assert transit.state is target and transit.from_state is state
        assert metadata.pending_state is target and metadata.state is state  # nothing applied yet
        # A second prepare while one is pending is refused, whatever it is.
        with pytest.raises(IllegalStateTransition):
            OPERATIONS["add_partitions"][0](metadata)
        metadata.complete_transition(transit)
        assert metadata.state is target and metadata.pending_state is None
        assert metadata.producer_epoch == transit.producer_epoch
        assert metadata.topic_partitions == set(transit.topic_partitions)
    else:
        with pytest.raises(IllegalStateTransition):
            prepare(metadata)
        assert metadata.pending_state is None and metadata.state is state


def test_complete_requires_the_pending_transit():
    m = _metadata_in(S.ONGOING)
    with pytest.raises(IllegalStateTransition):
        m.complete_transition(_metadata_in(S.ONGOING).prepare_abort_or_commit(TransactionResult.COMMIT, 5))
    transit = m.prepare_abort_or_commit(TransactionResult.COMMIT, 100)
    other = _metadata_in(S.ONGOING).prepare_abort_or_commit(TransactionResult.ABORT, 100)
    with pytest.raises(IllegalStateTransition):
        m.complete_transition(other)
    m.abort_transition()
    assert not m.pending_transition_in_progress and m.state is S.ONGOING
    with pytest.raises(IllegalStateTransition):
        m.complete_transition(transit)  # aborted: no longer pending


def test_transit_changes_only_what_it_should():
    m = _metadata_in(S.ONGOING)
    before = m.snapshot()
    transit = m.prepare_fence_and_abort(now_ms=500, recoverable=True)
    assert m.snapshot() == before  # prepare applies nothing
    assert transit.producer_epoch == 4 and transit.last_producer_epoch == 3
    assert transit.previous_producer_id == 7 and transit.topic_partitions == frozenset({TP})
    assert transit.txn_start_timestamp == 10 and transit.txn_last_update_timestamp == 500


def test_last_update_timestamp_never_goes_back():
    m = _metadata_in(S.EMPTY)
    transit = m.prepare_add_partitions([TP], now_ms=5)  # the clock went back from 20
    assert transit.txn_last_update_timestamp == 20 and transit.txn_start_timestamp == 5


def test_exhausted_epoch_cannot_be_incremented_and_32767_cannot_be_fenced():
    m = TransactionMetadata("tid", producer_id=1, producer_epoch=32766)
    with pytest.raises(IllegalStateTransition):
        m.prepare_increment_producer_epoch(1000, 1, remember_current=False)
    m = TransactionMetadata("tid", producer_id=1, producer_epoch=32767, state=S.ONGOING)
    with pytest.raises(IllegalStateTransition):
        m.prepare_fence_and_abort(1, recoverable=False)
