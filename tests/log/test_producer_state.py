"""ProducerStateTable: prepare -> apply, the five-batch duplicate window, sequence wrap-around,
transactions and the first unstable offset, coordinator fencing, expiration, and replay equivalence."""

from __future__ import annotations

import gc
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.log.producer_entry import INT32_MAX, NUM_BATCHES_TO_RETAIN, ProducerEntry
from eoslog.log.producer_state import (
    CompletedTxn,
    Duplicate,
    InvalidProducerEpoch,
    InvalidTxnState,
    OngoingTxn,
    OutOfOrderSequence,
    ProducerAppendInfo,
    ProducerStateError,
    ProducerStateTable,
    StaleAppendInfo,
    TransactionCoordinatorFenced,
)
from eoslog.log.producer_validation import AppendOrigin
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.control import ControlType, EndTransactionMarker
from eoslog.records.header import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader, read_header

DAY_MS = 24 * 60 * 60 * 1000


def header(pid, epoch, base_seq, count=1, *, base_offset=0, txn=False, control=False, timestamp=1_000):
    attributes = (TRANSACTIONAL_BIT if txn or control else 0) | (CONTROL_BIT if control else 0)
    return BatchHeader(
        base_offset, 49 + 10 * count, -1, 2, 0, attributes, count - 1, timestamp, timestamp,
        pid, epoch, base_seq, count, 0,
    )  # fmt: skip


class Partition:
    """A stand-in for the partition layer: assigns offsets and drives prepare -> apply."""

    def __init__(self, table=None):
        self.table = table or ProducerStateTable()
        self.log_end_offset = 0
        self.history = []  # (header with offsets, marker) as written

    def append(self, batch, marker=None, now_ms=0, **kwargs):
        result = self.table.prepare_append(batch, now_ms, marker, **kwargs)
        if isinstance(result, Duplicate):
            return result
        first = self.log_end_offset
        last = first + batch.last_offset_delta
        self.log_end_offset = last + 1
        self.history.append((batch._replace(base_offset=first), marker))
        return self.table.apply(result, first, last), first, last

    def marker(self, pid, epoch, kind, coordinator_epoch=0, **kwargs):
        return self.append(
            header(pid, epoch, -1, control=True), EndTransactionMarker(kind, coordinator_epoch), **kwargs
        )


def test_first_batch_of_an_unknown_producer_then_the_next_one():
    p = Partition()
    assert p.append(header(7, 0, 0, 3)) == (None, 0, 2)
    assert p.append(header(7, 0, 3, 2)) == (None, 3, 4)
    entry = p.table.get(7)
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq, entry.last_data_offset) == (0, 0, 4, 4)
    assert p.table.map_end_offset == 5
    with pytest.raises(OutOfOrderSequence):
        p.append(header(7, 0, 6))  # sequence 5 was skipped


def test_batches_without_a_producer_id_are_not_tracked():
    table = ProducerStateTable()
    assert table.prepare_append(header(-1, -1, -1), 0) is None
    assert table.apply(None, 0, 9) is None
    assert len(table) == 0 and table.map_end_offset == 10


def test_nothing_changes_before_apply_and_a_stale_prepare_is_refused():
    table = ProducerStateTable()
    first = table.prepare_append(header(7, 0, 0), 0)
    again = table.prepare_append(header(7, 0, 0), 0)
    assert isinstance(first, ProducerAppendInfo) and len(table) == 0 and table.map_end_offset == 0
    table.apply(first, 0, 0)
    with pytest.raises(StaleAppendInfo):
        table.apply(again, 1, 1)
    assert table.get(7).last_seq == 0


@pytest.mark.parametrize("age", range(5))
def test_a_retry_of_any_of_the_last_five_batches_returns_its_original_offsets(age):
    p = Partition()
    p.append(header(1, 0, 0, 1))  # other traffic interleaves, so offsets and sequences differ
    sent = []
    seq = 0
    for size in (2, 3, 1, 4, 2, 3):  # six batches: the first falls out of the window
        h = header(7, 0, seq, size, timestamp=2_000 + seq)
        _, first, last = p.append(h)
        p.append(header(1, 0, p.table.get(1).last_seq + 1, 1))
        sent.append((h, first, last))
        seq += size
    h, first, last = sent[-1 - age]
    assert p.table.prepare_append(h, 0) == Duplicate(7, first, last, h.max_timestamp)


def test_a_retry_older_than_five_batches_is_out_of_order():
    p = Partition()
    sent = [header(7, 0, seq, 1) for seq in range(6)]
    for h in sent:
        p.append(h)
    with pytest.raises(OutOfOrderSequence):
        p.table.prepare_append(sent[0], 0)
    assert isinstance(p.table.prepare_append(sent[1], 0), Duplicate)


def test_a_retry_with_a_different_sequence_range_is_not_a_duplicate():
    p = Partition()
    p.append(header(7, 0, 0, 4))
    with pytest.raises(OutOfOrderSequence):
        p.table.prepare_append(header(7, 0, 0, 2), 0)


def test_sequence_numbers_wrap_at_int_max():
    p = Partition()
    p.append(header(7, 0, INT32_MAX - 2, 2))  # unknown producer: any start is accepted
    p.append(header(7, 0, INT32_MAX, 1))
    assert p.table.get(7).last_seq == INT32_MAX
    with pytest.raises(OutOfOrderSequence):
        p.table.prepare_append(header(7, 0, 1), 0)  # after Int.MaxValue comes 0, not 1
    with pytest.raises(OutOfOrderSequence):
        p.table.prepare_append(header(7, 0, -(2**31)), 0)  # int32 overflow is not the wrap
    _, first, last = p.append(header(7, 0, 0, 3))
    assert p.table.get(7).last_seq == 2
    # A batch straddling the wrap: base INT_MAX - 1, four records (INT_MAX - 1, INT_MAX, 0, 1).
    q = Partition()
    straddle = header(8, 0, INT32_MAX - 1, 4)
    assert straddle.last_sequence == 1
    _, first, last = q.append(straddle)
    assert q.table.prepare_append(straddle, 0) == Duplicate(8, first, last, straddle.max_timestamp)
    with pytest.raises(OutOfOrderSequence):
        q.table.prepare_append(header(8, 0, 3), 0)
    assert isinstance(q.table.prepare_append(header(8, 0, 2), 0), ProducerAppendInfo)


def test_a_new_epoch_must_start_at_zero_and_fences_the_old_one():
    p = Partition()
    old = header(7, 0, 0, 2)
    p.append(old)
    with pytest.raises(OutOfOrderSequence):
        p.table.prepare_append(header(7, 1, 2), 0)
    p.append(header(7, 1, 0, 1))
    entry = p.table.get(7)
    assert (entry.producer_epoch, len(entry.batch_metadata)) == (1, 1)
    with pytest.raises(InvalidProducerEpoch):  # the old epoch's retry is now a zombie
        p.table.prepare_append(old, 0)


def test_a_transaction_opens_at_its_first_batch_and_a_marker_closes_it():
    p = Partition()
    p.append(header(1, 0, 0, 2))  # offsets 0-1, not transactional
    p.append(header(7, 0, 0, 3, txn=True))  # 2-4 opens producer 7's transaction
    p.append(header(7, 0, 3, 1, txn=True))  # 5 does not move its first offset
    p.append(header(8, 0, 0, 1, txn=True))  # 6 opens producer 8's transaction
    assert p.table.get(7).current_txn_first_offset == 2
    assert p.table.first_unstable_offset() == 2
    assert p.table.ongoing_transactions() == [OngoingTxn(7, 0, 2, 1_000, -1), OngoingTxn(8, 0, 6, 1_000, -1)]

    completed, _, _ = p.marker(7, 0, ControlType.COMMIT, coordinator_epoch=4)  # offset 7
    assert completed == CompletedTxn(7, 2, 7, is_aborted=False)
    assert p.table.first_unstable_offset() == 6
    assert p.table.last_stable_offset_after(completed) == 6
    assert p.table.get(7).coordinator_epoch == 4 and p.table.get(7).current_txn_first_offset is None

    completed, _, _ = p.marker(8, 0, ControlType.ABORT)  # offset 8
    assert completed == CompletedTxn(8, 6, 8, is_aborted=True)
    assert p.table.first_unstable_offset() is None and p.table.ongoing_transactions() == []
    assert p.table.last_stable_offset_after(completed) == 9

    # A marker with nothing open (e.g. an abort after a fencing) closes nothing.
    assert p.marker(8, 0, ControlType.ABORT)[0] is None
    # Sequences continue across transactions of one epoch.
    p.append(header(7, 0, 4, 1, txn=True))
    assert p.table.first_unstable_offset() == 10


def test_a_plain_batch_inside_an_open_transaction_is_refused():
    p = Partition()
    p.append(header(7, 0, 0, 1, txn=True))
    with pytest.raises(InvalidTxnState):
        p.table.prepare_append(header(7, 0, 1, 1, txn=False), 0)


def test_coordinator_writes_skip_sequence_checks_but_open_transactions():
    p = Partition()
    p.append(header(7, 3, -1, 1, txn=True), origin=AppendOrigin.COORDINATOR)  # a TxnOffsetCommit
    p.append(header(7, 3, -1, 1, txn=True), origin=AppendOrigin.COORDINATOR)
    assert p.table.first_unstable_offset() == 0
    with pytest.raises(InvalidProducerEpoch):
        p.table.prepare_append(header(7, 2, -1, 1, txn=True), 0, origin=AppendOrigin.COORDINATOR)


def test_markers_from_an_older_coordinator_are_fenced():
    p = Partition()
    p.append(header(7, 0, 0, 1, txn=True))
    p.marker(7, 0, ControlType.COMMIT, coordinator_epoch=5)
    p.append(header(7, 0, 1, 1, txn=True))
    with pytest.raises(TransactionCoordinatorFenced) as raised:
        p.marker(7, 0, ControlType.ABORT, coordinator_epoch=4)
    assert raised.value.error_name == "TRANSACTION_COORDINATOR_FENCED"
    assert p.table.first_unstable_offset() == 2  # still open: the zombie's marker changed nothing
    p.marker(7, 0, ControlType.ABORT, coordinator_epoch=5)  # same coordinator epoch is fine
    p.append(header(7, 0, 2, 1, txn=True))
    p.marker(7, 0, ControlType.COMMIT, coordinator_epoch=9)  # a newer coordinator takes over
    with pytest.raises(TransactionCoordinatorFenced):
        p.marker(7, 0, ControlType.COMMIT, coordinator_epoch=5)


def test_markers_with_an_older_producer_epoch_are_refused():
    p = Partition()
    p.append(header(7, 3, 0, 1, txn=True))
    with pytest.raises(InvalidProducerEpoch):
        p.marker(7, 2, ControlType.COMMIT)
    # The coordinator fences a producer by aborting with a bumped epoch: that empties the batch cache.
    completed, _, _ = p.marker(7, 4, ControlType.ABORT)
    assert completed.is_aborted and p.table.get(7).producer_epoch == 4
    assert len(p.table.get(7).batch_metadata) == 0
    with pytest.raises(OutOfOrderSequence):  # epoch 4 is known but has no batch yet: must start at 0
        p.table.prepare_append(header(7, 4, 1, 1, txn=True), 0)
    p.append(header(7, 4, 0, 1, txn=True))


def test_transaction_version_2_markers_must_bump_the_epoch():
    p = Partition()
    p.append(header(7, 3, 0, 1, txn=True))
    with pytest.raises(InvalidProducerEpoch):
        p.marker(7, 3, ControlType.COMMIT, transaction_version=2)
    completed, _, _ = p.marker(7, 4, ControlType.COMMIT, transaction_version=2)
    assert completed == CompletedTxn(7, 0, 1, is_aborted=False)
    # A resend of that marker (transaction already closed) is written again and closes nothing.
    assert p.marker(7, 4, ControlType.COMMIT, transaction_version=2)[0] is None


def test_expiration_drops_silent_producers_without_open_transactions():
    p = Partition()
    p.append(header(1, 0, 0, timestamp=1_000))
    p.append(header(2, 0, 0, timestamp=5_000))
    p.append(header(3, 0, 0, txn=True, timestamp=1_000))
    assert p.table.remove_expired(1_000 + DAY_MS - 1) == []
    assert sorted(p.table.remove_expired(1_000 + DAY_MS)) == [1]
    assert p.table.remove_expired(10 * DAY_MS) == [2]  # producer 3 has an open transaction
    assert [e.producer_id for e in p.table.entries()] == [3]
    p.marker(3, 0, ControlType.COMMIT, now_ms=0)
    assert p.table.remove_expired(10 * DAY_MS, producer_id_expiration_ms=DAY_MS) == [3]
    # A forgotten producer starts afresh (Kafka 2.5+ accepts its next sequence).
    assert isinstance(p.table.prepare_append(header(1, 0, 1), 0), ProducerAppendInfo)


def test_a_batch_without_a_timestamp_takes_the_brokers_time():
    table = ProducerStateTable()
    info = table.prepare_append(header(1, 0, 0, timestamp=-1), 123_456)
    table.apply(info, 0, 0)
    assert table.get(1).last_timestamp == 123_456


def test_works_on_headers_read_from_real_batch_bytes():
    batch = build_batch(
        [SimpleRecord(b"k", b"v", timestamp=50), SimpleRecord(b"k", b"w", timestamp=60)],
        producer_id=11, producer_epoch=2, base_sequence=0, is_transactional=True,
    )  # fmt: skip
    p = Partition()
    p.append(read_header(batch))
    entry = p.table.get(11)
    assert (entry.producer_epoch, entry.last_seq, entry.current_txn_first_offset) == (2, 1, 0)
    assert entry.last_timestamp == 60
    assert isinstance(p.table.prepare_append(read_header(batch), 0), Duplicate)


def test_replay_never_refuses_history():
    table = ProducerStateTable()
    table.replay(header(7, 5, 0, 2, base_offset=0))
    table.replay(header(7, 4, 9, 1, base_offset=2))  # an older epoch, a gap: history is what it is
    table.replay(header(7, 4, -1, control=True, base_offset=3), EndTransactionMarker(ControlType.ABORT, 0))
    table.replay(header(7, 4, 0, control=True, base_offset=4))  # empty control batch: skipped
    assert table.map_end_offset == 5
    table.replay(header(7, 9, 0, 1, base_offset=1))  # below map_end_offset: already applied
    assert table.get(7).producer_epoch == 4


# ---------------------------------------------------------------------------------------------------
# Replay equivalence: the state rebuilt from the log (whole, or from a mid-way snapshot) equals the
# state built by live appends, for random client behaviour including retries, fencing and markers.

OPERATIONS = st.lists(
    st.tuples(
        st.integers(1, 3),  # producer id
        st.sampled_from(["send", "send_txn", "retry", "bump", "commit", "abort", "gap", "zombie"]),
        st.integers(1, 4),  # record count, or which earlier batch to retry
        st.integers(0, 2),  # coordinator epoch for markers
    ),
    max_size=60,
)


def run_clients(operations, partition):
    epoch = {1: 0, 2: 0, 3: 0}
    next_seq = {1: 0, 2: 0, 3: INT32_MAX - 5}  # producer 3 wraps around
    sent = {1: [], 2: [], 3: []}
    offsets_of = {}
    outcomes = []
    for step, (pid, op, n, coordinator_epoch) in enumerate(operations):
        timestamp = 1_000 + step
        marker = None
        if op == "bump":
            epoch[pid] += 1
            next_seq[pid] = 0
            continue
        if op in ("commit", "abort"):
            kind = ControlType.COMMIT if op == "commit" else ControlType.ABORT
            batch = header(pid, epoch[pid], -1, control=True, timestamp=timestamp)
            marker = EndTransactionMarker(kind, coordinator_epoch)
        elif op == "retry":
            if not sent[pid]:
                continue
            batch = sent[pid][-1 - (n - 1) % len(sent[pid])]
        elif op == "zombie":
            batch = header(pid, epoch[pid] - 1, next_seq[pid], n, timestamp=timestamp)
        else:
            seq = next_seq[pid] + (3 if op == "gap" else 0)
            batch = header(
                pid, epoch[pid], seq % (INT32_MAX + 1), n, txn=op == "send_txn", timestamp=timestamp
            )
        try:
            result = partition.append(batch, marker)
        except ProducerStateError as error:
            outcomes.append(error.error_name)
            continue
        if isinstance(result, Duplicate):
            key = (pid, batch.producer_epoch, batch.base_sequence, batch.last_sequence)
            assert (result.first_offset, result.last_offset) == offsets_of[key]
            outcomes.append("DUPLICATE")
            continue
        _, first, last = result
        outcomes.append("APPEND")
        if marker is None:
            offsets_of[(pid, batch.producer_epoch, batch.base_sequence, batch.last_sequence)] = (first, last)
            sent[pid].append(batch)
            next_seq[pid] = (batch.last_sequence + 1) % (INT32_MAX + 1)
    return outcomes


def state_of(table):
    return table.entries(), table.ongoing_transactions(), table.first_unstable_offset(), table.map_end_offset


@settings(max_examples=150, deadline=None)
@given(operations=OPERATIONS, cut=st.floats(0, 1))
def test_replay_rebuilds_the_live_state(operations, cut):
    live = Partition()
    run_clients(operations, live)

    replayed = ProducerStateTable()
    for batch, marker in live.history:
        replayed.replay(batch, marker)
    assert state_of(replayed) == state_of(live.table)

    # Recovery: a snapshot taken part-way, then the rest of the log replayed on top of it.
    split = int(len(live.history) * cut)
    partial = ProducerStateTable()
    for batch, marker in live.history[:split]:
        partial.replay(batch, marker)
    with tempfile.TemporaryDirectory() as directory:
        offset = partial.write_snapshot(directory)
        recovered = ProducerStateTable()
        assert recovered.load_latest_snapshot(directory, live.log_end_offset) == offset
        for batch, marker in live.history:  # from the log start: replay skips what the snapshot holds
            recovered.replay(batch, marker)
    assert state_of(recovered) == state_of(live.table)


def test_an_entry_is_one_object_for_the_garbage_collector():
    # A broker keeps one entry per producer per partition and replaces it on every batch; its batch
    # history must not add objects for the collector to walk (producer_entry.py, docs/benchmarks.md "The
    # garbage collector at 1,000 partitions").
    entries = []
    for producer_id in range(2_000):
        entry = ProducerEntry(producer_id)
        for seq in range(NUM_BATCHES_TO_RETAIN + 2):
            entry = entry.with_batch(0, (seq, seq, 10 * seq, 10 * seq, 1_000 + seq))
        entries.append(entry)
    gc.collect()
    assert all(gc.is_tracked(entry) for entry in entries)
    assert not any(gc.is_tracked(entry._batches) for entry in entries)
    last = entries[-1]
    assert [b.first_seq for b in last.batch_metadata] == [2, 3, 4, 5, 6]
    assert (last.first_seq, last.last_seq, last.last_data_offset, last.last_timestamp) == (2, 6, 60, 1_006)
    assert last.find_duplicate(0, 4, 4) == (4, 4, 40, 40, 1_004) and last.find_duplicate(0, 1, 1) is None
