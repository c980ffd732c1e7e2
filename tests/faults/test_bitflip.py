"""The bitflip fault and the fetch path's CRC check, on a real Log in a real directory (issue 38).

A flipped bit in a stored batch must never be read back by a verified read (the fetch path): batches
before it are served, a read starting at it raises CorruptRecordError, and nothing after it is reached
through it. The real-broker tests (a consumer gets CORRUPT_MESSAGE) are in test_bitflip_broker.py."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from eoslog.faults.bitflip import flip_bit, stored_batches
from eoslog.log import Log, LogConfig, checked_read
from eoslog.records import CorruptRecordError, iter_headers
from eoslog.records.builder import build_simple

SMALL = LogConfig(segment_bytes=8000, index_interval_bytes=300, file_delete_delay_ms=0)


def _batch(i: int, size: int = 200) -> bytes:
    return build_simple([(f"k{i}".encode(), (f"{i}:" * size).encode()[:size])], base_timestamp=1_700_000_000_000)


def _log(tmp_path, batches: int = 40, config: LogConfig = SMALL) -> Log:
    log = Log.open(str(tmp_path / "orders-0"), config, clock=lambda: 5_000_000)
    for i in range(batches):
        log.append(_batch(i))
    log.flush()
    return log


def _offsets(result) -> list[int]:
    return [h.base_offset for h in iter_headers(result.to_bytes(), verify_crc=False)]


@pytest.mark.parametrize("chunk", [checked_read.CHECK_CHUNK, 500, 61])
@pytest.mark.parametrize("seed", [3, 4, 8])
def test_a_verified_read_serves_up_to_the_flipped_batch_and_refuses_it(tmp_path, monkeypatch, chunk, seed):
    monkeypatch.setattr(checked_read, "CHECK_CHUNK", chunk)  # small chunks: batches straddle every edge
    log = _log(tmp_path)
    directory = log.directory
    log.close()  # clean shutdown: the reopen reads no batch back, as a broker restart after SIGTERM
    flip = flip_bit(directory, random.Random(seed), below_offset=40)
    log = Log.open(directory, SMALL, clock=lambda: 5_000_000, recovery_point=40, clean_shutdown=True)
    try:
        damaged = flip.base_offset
        assert log.log_end_offset == 40
        # Unverified reads (what sendfile would send) hand the damaged bytes out: the reason for the check.
        assert damaged in _offsets(log.read(damaged, 1 << 20))
        before = log.read(0, 1 << 20, verify_crc=True)
        assert _offsets(before) == list(range(damaged))
        with pytest.raises(CorruptRecordError, match="will not serve"):
            log.read(damaged, 1 << 20, verify_crc=True)
        if damaged < 39:
            after = log.read(damaged + 1, 1 << 20, verify_crc=True)
            assert _offsets(after) == list(range(damaged + 1, 40))
    finally:
        log.close()


def test_batches_larger_than_a_check_chunk_and_chunk_edges(tmp_path, monkeypatch):
    monkeypatch.setattr(checked_read, "CHECK_CHUNK", 500)  # batches of ~290 bytes straddle every edge
    log = _log(tmp_path)
    try:
        assert _offsets(log.read(0, 1 << 20, verify_crc=True)) == list(range(40))
        big = Log.open(str(tmp_path / "big-0"), SMALL, clock=lambda: 5_000_000)
        big.append(_batch(0, 3000))
        big.append(_batch(1, 100))
        assert _offsets(big.read(0, 1 << 20, verify_crc=True)) == [0, 1]
        big.close()
    finally:
        log.close()


def test_flip_hits_a_batch_below_the_offset_and_inside_the_crc(tmp_path):
    log = _log(tmp_path)
    directory = log.directory
    log.close()
    before = {p: Path(p).read_bytes() for p, *_ in stored_batches(directory)}
    flip = flip_bit(directory, random.Random(11), below_offset=5)
    assert flip.last_offset < 5
    after = Path(flip.path).read_bytes()
    changed = [i for i, (a, b) in enumerate(zip(before[flip.path], after, strict=True)) if a != b]
    assert changed == [flip.byte]
    assert before[flip.path][flip.byte] ^ after[flip.byte] == 1 << flip.bit
    position = next(p for path, p, _, base, _ in stored_batches(directory) if path == flip.path and base == flip.base_offset)
    assert flip.byte >= position + 21
    assert os.path.getsize(flip.path) == len(before[flip.path])
    os.makedirs(tmp_path / "empty")
    with pytest.raises(ValueError, match="no stored batch"):
        flip_bit(str(tmp_path / "empty"), random.Random(1), below_offset=0)


def test_recovery_keeps_a_damaged_synced_batch_and_cuts_only_past_the_recovery_point(tmp_path):
    """After a crash (no clean shutdown) the last segment is re-read with CRC checks. A damaged batch
    below the recovery point was fsync'ed whole: rot, not a torn write. Cutting the log there would drop
    it and every acknowledged batch after it without a word, so it is kept and refused instead."""
    one_segment = LogConfig(segment_bytes=1 << 20, index_interval_bytes=300, file_delete_delay_ms=0)
    log = _log(tmp_path, config=one_segment)  # the last segment is the one a crash re-reads
    directory = log.directory
    log.close()
    flip = flip_bit(directory, random.Random(5), below_offset=30)
    log = Log.open(directory, one_segment, clock=lambda: 5_000_000, recovery_point=40, clean_shutdown=False)
    try:
        assert log.log_end_offset == 40
        assert log.recovery_report.damaged_batches == [flip.base_offset]
        with pytest.raises(CorruptRecordError):
            log.read(flip.base_offset, 1 << 20, verify_crc=True)
        assert _offsets(log.read(flip.base_offset + 1, 1 << 20, verify_crc=True))[0] == flip.base_offset + 1
    finally:
        log.close()
    # Past the recovery point the same damage may be a torn write: recovery cuts there (Kafka's rule).
    log = Log.open(directory, one_segment, clock=lambda: 5_000_000, recovery_point=0, clean_shutdown=False)
    try:
        assert log.log_end_offset == flip.base_offset
        assert log.recovery_report.damaged_batches == []
    finally:
        log.close()


def test_a_scrub_finds_damage_in_any_segment_and_truncation_clears_it(tmp_path):
    """A cluster replica opens with ``scrub``: every segment CRC-checked, not only those recovery
    re-reads. The damaged batch is kept (the leader decides who has good copies) and listed, and a
    follower's truncation at it (cluster/partition.py become_follower) clears the list."""
    log = _log(tmp_path)
    directory = log.directory
    assert len(log.segments) >= 2
    log.close()
    flip = flip_bit(directory, random.Random(2), below_offset=10)  # far from the last segment
    log = Log.open(directory, SMALL, clock=lambda: 5_000_000, recovery_point=40, clean_shutdown=True)
    try:
        assert log.damaged_batches == []  # a clean restart re-reads nothing: only fetches would notice
    finally:
        log.close()
    log = Log.open(directory, SMALL, clock=lambda: 5_000_000, recovery_point=40, clean_shutdown=True, scrub=True)
    try:
        assert log.damaged_batches == [flip.base_offset]
        assert log.log_end_offset == 40  # kept, not cut: a leader may hold the only copy
        log.truncate_to(flip.base_offset)
        assert log.damaged_batches == [] and log.log_end_offset == flip.base_offset
        assert _offsets(log.read(0, 1 << 20, verify_crc=True)) == list(range(flip.base_offset))
    finally:
        log.close()


def test_a_scrub_that_must_cut_a_synced_segment_lists_the_hole_for_a_follower_to_cut(tmp_path):
    """Damage to a batch's framing (its batch_length, outside the CRC) cannot be stepped over: the
    segment is cut there, leaving a hole before the next segment. A replica lists the cut as damage, so
    as a follower it cuts its whole log there and refetches instead of keeping a hole."""
    log = _log(tmp_path)
    directory = log.directory
    first = log.segments[0]
    batches = list(first.batches())
    victim = batches[len(batches) // 2]
    assert len(log.segments) >= 2
    log.close()
    fd = os.open(os.path.join(directory, "00000000000000000000.log"), os.O_RDWR)
    try:
        os.pwrite(fd, (10 ** 6).to_bytes(4, "big"), victim.position + 8)  # batch_length past the file
    finally:
        os.close(fd)
    log = Log.open(directory, SMALL, clock=lambda: 5_000_000, recovery_point=40, clean_shutdown=True, scrub=True)
    try:
        assert log.damaged_batches == [victim.base_offset]
        log.truncate_to(log.damaged_batches[0])
        assert log.log_end_offset == victim.base_offset and log.damaged_batches == []
    finally:
        log.close()


def test_a_refused_batch_is_logged_once_per_interval_and_every_refusal_counted(tmp_path, monkeypatch, caplog):
    # A consumer stuck at the damaged batch fetches it again after every back-off: one line, many counts.
    monkeypatch.setattr(checked_read, "_refusals", {})
    log = _log(tmp_path)
    directory = log.directory
    log.close()
    flip = flip_bit(directory, random.Random(3), below_offset=40)
    log = Log.open(directory, SMALL, clock=lambda: 5_000_000, recovery_point=40, clean_shutdown=True)
    try:
        counted = checked_read.DAMAGED_BATCH_READS[directory]
        with caplog.at_level("ERROR", logger="eoslog.log"):
            for _ in range(5):
                with pytest.raises(CorruptRecordError):
                    log.read(flip.base_offset, 1 << 20, verify_crc=True)
            # A read that starts before the damage and is cut short there counts too, and is not logged.
            assert _offsets(log.read(0, 1 << 20, verify_crc=True)) == list(range(flip.base_offset))
        lines = [r.getMessage() for r in caplog.records if "refusing to serve" in r.getMessage()]
        assert len(lines) == 1, lines
        assert checked_read.DAMAGED_BATCH_READS[directory] - counted == 6
        # Once the interval has passed, the next refusal is logged again, with the count of the quiet ones.
        monkeypatch.setattr(checked_read, "REFUSAL_LOG_INTERVAL_S", 0.0)
        caplog.clear()
        with caplog.at_level("ERROR", logger="eoslog.log"), pytest.raises(CorruptRecordError):
            log.read(flip.base_offset, 1 << 20, verify_crc=True)
        lines = [r.getMessage() for r in caplog.records if "refusing to serve" in r.getMessage()]
        assert len(lines) == 1 and "5 more reads of it refused since the last line" in lines[0], lines
    finally:
        log.close()


@pytest.mark.parametrize("clean", [False, True], ids=["crash", "clean-restart"])
@pytest.mark.parametrize("field_byte, bit", [(25, 1), (23, 7), (57, 7), (35, 3)])
def test_recovery_keeps_a_batch_whose_flip_hit_a_header_field_recovery_reads(tmp_path, field_byte, bit, clean):
    """A flip inside the CRC-covered header: last_offset_delta (bytes 23-26; bit 7 of byte 23 makes it
    negative, bit 1 of byte 25 adds 512), records_count (57-60) or max_timestamp (35-42). Those fields
    are as damaged as the records, so they must not decide whether recovery keeps the batch, nor where
    it thinks the batch ends: the log keeps every acknowledged batch and offsets after the damaged one
    are still found (found in `eoslog verify --faults bitflip`: a flip at byte 25 of the first batch of
    a partition made recovery cut the whole log). After a clean restart nothing is re-read or settled:
    offset lookups must still find the batches after the damaged one (the next base offset decides)."""
    one_segment = LogConfig(segment_bytes=1 << 20, index_interval_bytes=300, file_delete_delay_ms=0)
    log = _log(tmp_path, config=one_segment)
    directory = log.directory
    log.close()
    path, position, _, base, last = stored_batches(directory)[10]
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(position + field_byte)
        old = f.read(1)[0]
        f.seek(position + field_byte)
        f.write(bytes([old ^ (1 << bit)]))
    log = Log.open(directory, one_segment, clock=lambda: 5_000_000, recovery_point=40, clean_shutdown=clean)
    try:
        assert log.log_end_offset == 40, log.recovery_report
        assert os.path.getsize(path) == size  # the settled header was written in place, not appended
        assert log.recovery_report.damaged_batches == ([] if clean else [base])
        assert log.recovery_report.truncated_bytes == 0
        with pytest.raises(CorruptRecordError):
            log.read(base, 1 << 20, verify_crc=True)
        assert _offsets(log.read(last + 1, 1 << 20, verify_crc=True)) == list(range(last + 1, 40))
        if not clean:  # producer-state rebuilds and coordinator loads walk read_batches: not the damaged batch
            assert [h.base_offset for _, h in log.read_batches()] == [b for b in range(40) if b != base]
    finally:
        log.close()
