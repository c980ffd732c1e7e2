"""The validation table: every situation by example, and every (state, input) pair of a grid against an
independent, Kafka-shaped re-statement of the rules (ProducerAppendInfo.checkProducerEpoch/checkSequence)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.log.producer_entry import INT32_MAX, BatchMetadata, ProducerEntry
from eoslog.log.producer_state import (
    Duplicate,
    InvalidProducerEpoch,
    InvalidTxnState,
    OutOfOrderSequence,
    ProducerAppendInfo,
    ProducerStateError,
    ProducerStateTable,
    TransactionCoordinatorFenced,
    UnknownProducerId,
)
from eoslog.log.producer_validation import (
    STRICT_VALIDATION_TABLE,
    VALIDATION_TABLE,
    AppendOrigin,
    Situation,
    UnknownProducerPolicy,
    Verdict,
    classify,
)
from eoslog.records.control import ControlType, EndTransactionMarker
from eoslog.records.header import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader

PID = 42


def header(epoch, base_seq, count=1, *, pid=PID, base_offset=0, txn=False, control=False, timestamp=1_000):
    attributes = (TRANSACTIONAL_BIT if txn or control else 0) | (CONTROL_BIT if control else 0)
    return BatchHeader(
        base_offset, 49 + 10 * count, -1, 2, 0, attributes, count - 1, timestamp, timestamp,
        pid, epoch, base_seq, count, 0,
    )  # fmt: skip


def entry(epoch=5, seqs=((0, 4), (5, 9)), *, coordinator_epoch=3, txn_first_offset=None):
    batches = [BatchMetadata(f, l, 100 + f, 100 + l, 1_000) for f, l in seqs]
    return ProducerEntry(PID, epoch, batches, coordinator_epoch, 1_000, txn_first_offset)


def commit(coordinator_epoch=3):
    return EndTransactionMarker(ControlType.COMMIT, coordinator_epoch)


# The expected verdict of every situation, written out a second time on purpose (double entry).
EXPECTED = {
    Situation.UNKNOWN_PRODUCER_SEQUENCE_ZERO: Verdict.APPEND,
    Situation.UNKNOWN_PRODUCER_SEQUENCE_NONZERO: Verdict.APPEND,
    Situation.OLDER_EPOCH: Verdict.INVALID_PRODUCER_EPOCH,
    Situation.SAME_EPOCH_DUPLICATE: Verdict.DUPLICATE,
    Situation.SAME_EPOCH_IN_SEQUENCE: Verdict.APPEND,
    Situation.SAME_EPOCH_OUT_OF_SEQUENCE: Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Situation.NEWER_EPOCH_SEQUENCE_ZERO: Verdict.APPEND,
    Situation.NEWER_EPOCH_SEQUENCE_NONZERO: Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Situation.NON_TRANSACTIONAL_IN_OPEN_TXN: Verdict.INVALID_TXN_STATE,
    Situation.COORDINATOR_WRITE: Verdict.APPEND,
    Situation.MARKER_OLDER_EPOCH: Verdict.INVALID_PRODUCER_EPOCH,
    Situation.MARKER_EPOCH_NOT_BUMPED: Verdict.INVALID_PRODUCER_EPOCH,
    Situation.MARKER_STALE_COORDINATOR_EPOCH: Verdict.TRANSACTION_COORDINATOR_FENCED,
    Situation.MARKER_RETRY_AFTER_COMPLETION: Verdict.APPEND,
    Situation.MARKER_VALID: Verdict.APPEND,
}

# One concrete (state, input) per situation: entry, header, marker, origin, transaction version.
EXAMPLES = {
    Situation.UNKNOWN_PRODUCER_SEQUENCE_ZERO: (None, header(0, 0), None, AppendOrigin.CLIENT, 0),
    Situation.UNKNOWN_PRODUCER_SEQUENCE_NONZERO: (None, header(0, 17), None, AppendOrigin.CLIENT, 0),
    Situation.OLDER_EPOCH: (entry(), header(4, 10), None, AppendOrigin.CLIENT, 0),
    Situation.SAME_EPOCH_DUPLICATE: (entry(), header(5, 5, 5), None, AppendOrigin.CLIENT, 0),
    Situation.SAME_EPOCH_IN_SEQUENCE: (entry(), header(5, 10), None, AppendOrigin.CLIENT, 0),
    Situation.SAME_EPOCH_OUT_OF_SEQUENCE: (entry(), header(5, 11), None, AppendOrigin.CLIENT, 0),
    Situation.NEWER_EPOCH_SEQUENCE_ZERO: (entry(), header(6, 0), None, AppendOrigin.CLIENT, 0),
    Situation.NEWER_EPOCH_SEQUENCE_NONZERO: (entry(), header(6, 10), None, AppendOrigin.CLIENT, 0),
    Situation.NON_TRANSACTIONAL_IN_OPEN_TXN: (
        entry(txn_first_offset=100),
        header(5, 10),
        None,
        AppendOrigin.CLIENT,
        0,
    ),
    Situation.COORDINATOR_WRITE: (entry(), header(5, -1, txn=True), None, AppendOrigin.COORDINATOR, 0),
    Situation.MARKER_OLDER_EPOCH: (entry(), header(4, -1, control=True), commit(), AppendOrigin.CLIENT, 0),
    Situation.MARKER_EPOCH_NOT_BUMPED: (
        entry(txn_first_offset=100),
        header(5, -1, control=True),
        commit(),
        AppendOrigin.CLIENT,
        2,
    ),
    Situation.MARKER_STALE_COORDINATOR_EPOCH: (
        entry(),
        header(5, -1, control=True),
        commit(2),
        AppendOrigin.CLIENT,
        0,
    ),
    Situation.MARKER_RETRY_AFTER_COMPLETION: (
        entry(),
        header(5, -1, control=True),
        commit(),
        AppendOrigin.CLIENT,
        2,
    ),
    Situation.MARKER_VALID: (
        entry(txn_first_offset=100),
        header(5, -1, control=True),
        commit(),
        AppendOrigin.CLIENT,
        0,
    ),
}

ERROR_OF = {
    Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER: OutOfOrderSequence,
    Verdict.INVALID_PRODUCER_EPOCH: InvalidProducerEpoch,
    Verdict.UNKNOWN_PRODUCER_ID: UnknownProducerId,
    Verdict.INVALID_TXN_STATE: InvalidTxnState,
    Verdict.TRANSACTION_COORDINATOR_FENCED: TransactionCoordinatorFenced,
}


def test_the_table_has_a_row_for_every_situation_and_nothing_else():
    assert set(VALIDATION_TABLE) == set(Situation) == set(EXPECTED) == set(EXAMPLES)
    assert set(STRICT_VALIDATION_TABLE) == set(Situation)


def test_situation_values_are_explicit_and_unique():
    assert [s.value for s in Situation] == list(range(1, len(Situation) + 1))


@pytest.mark.parametrize("situation", list(Situation), ids=lambda s: s.name)
def test_every_situation(situation):
    state, batch, marker, origin, version = EXAMPLES[situation]
    assert classify(state, batch, marker, origin=origin, transaction_version=version) is situation
    verdict = VALIDATION_TABLE[situation]
    assert verdict is EXPECTED[situation]

    # The table object behaves the same way, and rejections carry Kafka's error name.
    table = ProducerStateTable.with_entries([] if state is None else [state], 200)
    before = table.entries()
    if verdict is Verdict.APPEND:
        result = table.prepare_append(batch, 5_000, marker, origin=origin, transaction_version=version)
        assert isinstance(result, ProducerAppendInfo) and result.situation is situation
    elif verdict is Verdict.DUPLICATE:
        result = table.prepare_append(batch, 5_000, marker, origin=origin, transaction_version=version)
        assert result == Duplicate(PID, 105, 109, 1_000)
    else:
        with pytest.raises(ERROR_OF[verdict]) as raised:
            table.prepare_append(batch, 5_000, marker, origin=origin, transaction_version=version)
        assert raised.value.error_name == verdict.name
        assert raised.value.situation is situation
    assert table.entries() == before  # prepare never changes state


def test_strict_policy_answers_unknown_producer_id_for_a_nonzero_first_sequence():
    table = ProducerStateTable(unknown_producer_policy=UnknownProducerPolicy.REJECT)
    with pytest.raises(UnknownProducerId):
        table.prepare_append(header(0, 17), 0)
    assert isinstance(table.prepare_append(header(0, 0), 0), ProducerAppendInfo)
    differing = {s for s in Situation if STRICT_VALIDATION_TABLE[s] is not VALIDATION_TABLE[s]}
    assert differing == {Situation.UNKNOWN_PRODUCER_SEQUENCE_NONZERO}


def test_every_error_names_a_kafka_error():
    for error in (OutOfOrderSequence, InvalidProducerEpoch, UnknownProducerId, InvalidTxnState,
                  TransactionCoordinatorFenced):  # fmt: skip
        assert issubclass(error, ProducerStateError)
        assert error.error_name in Verdict.__members__


# ---------------------------------------------------------------------------------------------------
# Every (state, input) pair of a grid, against the rules re-stated the way Kafka's code is written.


def kafka_rules(state, batch, marker, origin, version, strict):
    epoch = batch.producer_epoch
    current = state.producer_epoch if state is not None else -1
    open_txn = state is not None and state.current_txn_first_offset is not None
    if batch.is_control:
        if version >= 2:
            if epoch <= current and not (epoch == current and not open_txn):
                return Verdict.INVALID_PRODUCER_EPOCH
        elif epoch < current:
            return Verdict.INVALID_PRODUCER_EPOCH
        if (state.coordinator_epoch if state is not None else -1) > marker.coordinator_epoch:
            return Verdict.TRANSACTION_COORDINATOR_FENCED
        return Verdict.APPEND
    if origin is AppendOrigin.CLIENT and state is not None and epoch == state.producer_epoch:
        for cached in state.batch_metadata:
            if (cached.first_seq, cached.last_seq) == (batch.base_sequence, batch.last_sequence):
                return Verdict.DUPLICATE
    if epoch < current:
        return Verdict.INVALID_PRODUCER_EPOCH
    if origin is AppendOrigin.CLIENT:
        first = batch.base_sequence
        if epoch != current:
            if first != 0:
                if current != -1:
                    return Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
                if strict:
                    return Verdict.UNKNOWN_PRODUCER_ID
        else:
            last = state.batch_metadata[-1].last_seq if state.batch_metadata else -1
            if not (first == last + 1 or (first == 0 and last == INT32_MAX)):
                return Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER
    if open_txn and not batch.is_transactional:
        return Verdict.INVALID_TXN_STATE
    return Verdict.APPEND


STATES = [
    None,
    entry(),
    entry(txn_first_offset=100),
    entry(seqs=()),  # known epoch, no batches (after a marker bumped the epoch)
    entry(seqs=((0, 9), (10, 19), (20, 29), (30, 39), (40, 49))),
    entry(seqs=((INT32_MAX - 4, INT32_MAX),)),
    entry(epoch=0, coordinator_epoch=-1),
]
EPOCHS = [0, 4, 5, 6]
SEQUENCE_RANGES = [(0, 1), (5, 5), (10, 1), (11, 1), (3, 2), (40, 10), (50, 1), (INT32_MAX, 1), (-1, 1)]


def inputs():
    for epoch, (seq, count), txn in itertools.product(EPOCHS, SEQUENCE_RANGES, (False, True)):
        yield header(epoch, seq, count, txn=txn), None, AppendOrigin.CLIENT, 0
        yield header(epoch, -1 if seq < 0 else seq, count, txn=txn), None, AppendOrigin.COORDINATOR, 0
    for epoch, coordinator_epoch, version, kind in itertools.product(
        EPOCHS, (-1, 2, 3, 4), (0, 2), ControlType
    ):
        marker = EndTransactionMarker(kind, coordinator_epoch)
        yield header(epoch, -1, control=True), marker, AppendOrigin.CLIENT, version


@pytest.mark.parametrize("strict", [False, True])
def test_every_state_input_pair_of_the_grid_follows_kafkas_rules(strict):
    policy = UnknownProducerPolicy.REJECT if strict else UnknownProducerPolicy.ACCEPT
    table_rows = STRICT_VALIDATION_TABLE if strict else VALIDATION_TABLE
    seen = set()
    pairs = 0
    for state, (batch, marker, origin, version) in itertools.product(STATES, list(inputs())):
        situation = classify(state, batch, marker, origin=origin, transaction_version=version)
        seen.add(situation)
        expected = kafka_rules(state, batch, marker, origin, version, strict)
        assert table_rows[situation] is expected, (state, batch, marker, origin, version, situation)
        table = ProducerStateTable.with_entries(
            [] if state is None else [state], 200, unknown_producer_policy=policy
        )
        try:
            result = table.prepare_append(batch, 0, marker, origin=origin, transaction_version=version)
        except ProducerStateError as error:
            assert error.error_name == expected.name
        else:
            assert isinstance(result, Duplicate) == (expected is Verdict.DUPLICATE)
            assert expected in (Verdict.APPEND, Verdict.DUPLICATE)
        pairs += 1
    assert seen == set(Situation)  # the grid reaches every row of the table
    assert pairs > 1000


@given(
    state=st.sampled_from(STATES),
    epoch=st.integers(0, 8),
    seq=st.one_of(st.integers(-1, 60), st.integers(INT32_MAX - 10, INT32_MAX)),
    count=st.integers(1, 12),
    txn=st.booleans(),
)
def test_random_data_batches_follow_kafkas_rules(state, epoch, seq, count, txn):
    batch = header(epoch, seq, count, txn=txn)
    situation = classify(state, batch)
    assert VALIDATION_TABLE[situation] is kafka_rules(state, batch, None, AppendOrigin.CLIENT, 0, False)
