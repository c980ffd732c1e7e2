"""The partition's transaction side without a network: last stable offset arithmetic, markers, the
aborted-transaction index (.txnindex) and its rebuild at open, the KIP-890 verifier hook."""

from __future__ import annotations

import asyncio
import os

import pytest

from eoslog.cluster.partition import READ_COMMITTED, READ_UNCOMMITTED, Partition
from eoslog.log.config import LogConfig
from eoslog.log.manager import LogDirectory
from eoslog.log.transaction_index import (
    ENTRY_SIZE,
    AbortedTransactionIndex,
    AbortedTxn,
    TransactionIndex,
    TransactionIndexError,
    decode_entries,
)
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.control import ControlType, build_control_batch


def data(producer_id: int, epoch: int, sequence: int, n: int = 2, transactional: bool = True) -> bytes:
    return build_batch([SimpleRecord(None, f"v{sequence + i}".encode()) for i in range(n)], producer_id=producer_id,
                       producer_epoch=epoch, base_sequence=sequence, is_transactional=transactional)


def marker(control: ControlType, producer_id: int, epoch: int = 0) -> bytes:
    return build_control_batch(control, producer_id, epoch, 0)


class Harness:
    """A partition on a real log directory, driven on a private event loop, fsync on acknowledgement."""

    def __init__(self, path, segment_bytes: int = 1 << 20) -> None:
        self.path = path
        self.loop = asyncio.new_event_loop()
        config = LogConfig.from_properties({"segment.bytes": str(segment_bytes)})
        self.directory = LogDirectory.open(str(path), config)
        log = self.directory.get_or_create_log("t", 0, config)
        self.partition = Partition("t", 0, log, self.directory.group_commit)

    def run(self, fn, *args):
        async def call():
            result = fn(*args)
            await self.partition.wait_for_high_watermark(self.partition.log_end_offset)
            return result

        return self.loop.run_until_complete(call())

    def append(self, records: bytes):
        return self.run(lambda: self.partition.append(records, transactional_id="tx"))

    def control(self, batch: bytes):
        return self.run(self.partition.append_control, batch)

    def close(self) -> None:
        self.loop.run_until_complete(self.partition.close())
        self.directory.close()
        self.loop.close()


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path / "data")
    yield h
    if not h.loop.is_closed():
        h.close()


def test_last_stable_offset_follows_open_transactions(harness):
    p = harness.partition
    harness.append(data(1, 0, 0))                    # 0-1 producer 1, open
    assert (p.last_stable_offset, p.high_watermark) == (0, 2)
    harness.append(data(2, 0, 0, transactional=False))  # 2-3 idempotent, not transactional
    harness.append(data(3, 0, 0))                    # 4-5 producer 3, open
    assert p.last_stable_offset == 0
    harness.control(marker(ControlType.COMMIT, 1))   # 6: producer 1 commits
    assert p.last_stable_offset == 4                 # producer 3 still open
    harness.control(marker(ControlType.ABORT, 3))    # 7: producer 3 aborts
    assert p.last_stable_offset == p.high_watermark == 8
    assert p.transaction_index.all_entries() == [AbortedTxn(3, 4, 7, 8)]
    assert p.fetch_upper_bound(READ_COMMITTED) == 8 and p.fetch_upper_bound(READ_UNCOMMITTED) == 8


def test_marker_not_yet_durable_holds_the_last_stable_offset(harness):
    p = harness.partition
    harness.append(data(1, 0, 0))

    async def commit_and_look():
        appended = p.append_control(marker(ControlType.COMMIT, 1))
        before = (p.last_stable_offset, p.high_watermark)  # the group commit has not run yet
        await p.wait_for_high_watermark(appended.last_offset + 1)
        return before, p.last_stable_offset

    before, after = harness.loop.run_until_complete(commit_and_look())
    assert before == (0, 2)
    assert after == 3


def test_aborted_entry_records_lso_of_still_open_transaction(harness):
    p = harness.partition
    harness.append(data(1, 0, 0))                    # 0-1
    harness.append(data(2, 0, 0))                    # 2-3
    harness.control(marker(ControlType.ABORT, 2))    # 4
    assert p.transaction_index.all_entries() == [AbortedTxn(2, 2, 4, 0)]


def test_aborted_transactions_for_a_fetch(harness):
    p = harness.partition
    harness.append(data(1, 0, 0))                    # 0-1
    harness.control(marker(ControlType.ABORT, 1))    # 2
    harness.append(data(1, 0, 2, transactional=False)) # 3-4 (plain idempotent batch, same producer)
    harness.append(data(2, 0, 0))                    # 5-6
    harness.control(marker(ControlType.ABORT, 2))    # 7
    result = p.read(0, 1 << 20, READ_COMMITTED, True)
    assert p.aborted_transactions(0, result) == [(1, 0), (2, 5)]
    result = p.read(3, 1 << 20, READ_COMMITTED, True)
    assert p.aborted_transactions(3, result) == [(2, 5)]
    first_batch_only = p.read(0, 10, READ_COMMITTED, True)  # min one batch: offsets 0-1
    assert p.aborted_transactions(0, first_batch_only) == [(1, 0)]


def test_index_survives_restart_and_is_rebuilt_past_the_snapshot(tmp_path):
    h = Harness(tmp_path / "data", segment_bytes=400)
    for producer in range(1, 6):
        h.append(data(producer, 0, 0))
        h.control(marker(ControlType.ABORT if producer % 2 else ControlType.COMMIT, producer))
    h.append(data(9, 0, 0))  # left open
    entries = h.partition.transaction_index.all_entries()
    assert [e.producer_id for e in entries] == [1, 3, 5]
    lso = h.partition.last_stable_offset
    directory = h.partition.log.directory
    assert len([n for n in os.listdir(directory) if n.endswith(".txnindex")]) >= 2
    h.loop.close()  # no clean shutdown: no final snapshot, the files as a crash leaves them
    h.directory.close()
    # Damage the newest file's tail: the entries past the last snapshot are rebuilt from the log anyway.
    newest = max(n for n in os.listdir(directory) if n.endswith(".txnindex"))
    with open(os.path.join(directory, newest), "ab") as f:
        f.write(b"\x00" * 7)
    h2 = Harness(tmp_path / "data", segment_bytes=400)
    try:
        assert h2.partition.transaction_index.all_entries() == entries
        assert h2.partition.last_stable_offset == lso
    finally:
        h2.close()


def test_damaged_index_file_is_rebuilt_from_the_log_start(tmp_path):
    h = Harness(tmp_path / "data", segment_bytes=400)
    for producer in range(1, 5):
        h.append(data(producer, 0, 0))
        h.control(marker(ControlType.ABORT, producer))
    entries = h.partition.transaction_index.all_entries()
    directory = h.partition.log.directory
    h.close()
    oldest = min(n for n in os.listdir(directory) if n.endswith(".txnindex"))
    with open(os.path.join(directory, oldest), "r+b") as f:
        f.write(b"\x00\x07")  # an unknown entry version
    h2 = Harness(tmp_path / "data", segment_bytes=400)
    try:
        assert h2.partition.transaction_index.all_entries() == entries
    finally:
        h2.close()


def test_transactional_batch_goes_through_the_verifier(harness):
    calls = []

    def refuse(*args):
        calls.append(args)
        raise RuntimeError("not in the transaction")

    harness.partition.transaction_verifier = refuse
    with pytest.raises(RuntimeError):
        harness.append(data(1, 0, 0))
    assert calls == [("tx", 1, 0, "t", 0)]
    assert harness.partition.log_end_offset == 0
    harness.append(data(2, 0, 0, transactional=False))  # idempotent batches are not verified
    assert len(calls) == 1


def test_index_file_format(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TransactionIndex(path, 0)
    index.append(AbortedTxn(1000, 40, 47, 48))
    index.append(AbortedTxn(7, 10, 50, 10))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(8, 10, 50, 51))  # markers only move forward
    index.close()
    raw = open(path, "rb").read()
    assert len(raw) == 2 * ENTRY_SIZE == 68
    assert raw[:ENTRY_SIZE].hex() == "0000" "00000000000003e8" "0000000000000028" "000000000000002f" "0000000000000030"
    assert decode_entries(raw + b"\x01\x02") == [AbortedTxn(1000, 40, 47, 48), AbortedTxn(7, 10, 50, 10)]
    assert TransactionIndex(path, 0).collect(48, 100) == [AbortedTxn(7, 10, 50, 10)]
    assert TransactionIndex(path, 0).collect(0, 40) == [AbortedTxn(7, 10, 50, 10)]
    assert TransactionIndex(path, 0).collect(0, 11) == [AbortedTxn(7, 10, 50, 10)]
    assert TransactionIndex(path, 0).collect(0, 10) == []
    with pytest.raises(TransactionIndexError):
        decode_entries(raw[ENTRY_SIZE:] + raw[:ENTRY_SIZE])  # out of order
    aborted = AbortedTransactionIndex.open(str(tmp_path), [0])
    aborted.truncate_to(48)
    assert aborted.all_entries() == [AbortedTxn(1000, 40, 47, 48)]
    aborted.retain_segments([100])
    assert aborted.all_entries() == [] and not os.path.exists(path)
