"""Log: appending, offset assignment, reads, rolls, index lookups, time lookups, truncation."""

import os

import pytest
from log_batches import make_batch, payload_batch, read_all_batches, record_body

from eoslog.log import (
    InvalidRecordError,
    Log,
    LogConfig,
    OffsetOutOfRange,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    TimestampType,
)
from eoslog.records import CorruptRecordError, read_header

SMALL = LogConfig(segment_bytes=4000, index_interval_bytes=300, file_delete_delay_ms=0)


@pytest.fixture
def log(tmp_path):
    log = Log.open(str(tmp_path / "orders-0"), SMALL, clock=lambda: 5_000_000)
    yield log
    log.close()


def test_empty_log(log):
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (0, 0, 0)
    assert log.read(0, 1000).regions == []
    assert log.topic_partition == ("orders", 0)
    assert sorted(os.listdir(log.directory)) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]


def test_append_assigns_consecutive_offsets_and_keeps_the_rest_of_the_bytes(log):
    first = make_batch([b"a", b"b", b"c"], base_offset=999, timestamps=[10, 30, 20])
    info = log.append(first)
    assert info == (0, 2, 30, 2, -1, 1, len(first))
    two = make_batch([b"d"], timestamp=40) + make_batch([b"e", b"f"], timestamp=35)
    info = log.append(memoryview(two))
    assert (info.first_offset, info.last_offset, info.batch_count) == (3, 5, 2)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (40, 3)
    assert log.log_end_offset == 6
    batches = read_all_batches(log)
    assert [offset for offset, _ in batches] == [0, 3, 4]
    assert record_body(batches[0][1]) == record_body(first)
    for _, raw in batches:
        read_header(raw)  # CRC still good: base_offset is outside it


def test_append_validates_before_writing(log):
    good = make_batch([b"x"])
    bad = bytearray(make_batch([b"y"]))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(good + bytes(bad))
    with pytest.raises(CorruptRecordError):
        log.append(good[:-1])
    with pytest.raises(InvalidRecordError):
        log.append(b"")
    wrong_count = bytearray(make_batch([b"a", b"b"]))
    wrong_count[23:27] = (5).to_bytes(4, "big")  # last_offset_delta 5 for 2 records (CRC is recomputed)
    from crc32c import crc32c

    wrong_count[17:21] = crc32c(bytes(wrong_count[21:])).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError, match="last_offset_delta"):
        log.append(bytes(wrong_count))
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_size_limits(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), LogConfig(max_message_bytes=500, segment_bytes=1000))
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch([b"x" * 600]))
    with pytest.raises(RecordBatchTooLargeError):
        log.append(b"".join(make_batch([b"x" * 300]) for _ in range(3)))
    log.close()


def test_log_append_time_rewrites_timestamp_and_crc(tmp_path):
    config = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    log = Log.open(str(tmp_path / "t-0"), config, clock=lambda: 123_456)
    info = log.append(make_batch([b"a"], timestamp=5) + make_batch([b"b"], timestamp=6))
    assert (info.log_append_time, info.max_timestamp, info.offset_of_max_timestamp) == (123_456, 123_456, 0)
    for _, raw in read_all_batches(log):
        header = read_header(raw)  # verifies the recomputed CRC
        assert header.max_timestamp == 123_456 and header.timestamp_type == 1
        assert header.base_timestamp in (5, 6)
    log.close()


def test_roll_by_size_and_index_lookups(log):
    batches = [payload_batch(i, 180) for i in range(100)]
    rolls = []
    log.on_roll(rolls.append)
    for raw in batches:
        log.append(raw)
    segments = log.segments
    assert len(segments) > 3
    assert rolls == [s.base_offset for s in segments[1:]]
    for segment in segments[:-1]:
        assert segment.size <= SMALL.segment_bytes
        assert segment.offset_index.entries > 0  # sparse, but present
    for offset in (0, 1, 17, 50, 99):
        result = log.read(offset, 1)  # min_one_batch: exactly the batch holding it
        assert len(result.regions) == 1
        header = read_header(result.to_bytes())
        assert header.base_offset == offset
        assert record_body(result.to_bytes()) == record_body(batches[offset])


def test_read_returns_whole_batches_within_max_bytes(log):
    sizes = []
    for i in range(30):
        sizes.append(len(log.append(payload_batch(i, 100 + 10 * i)) and payload_batch(i, 100 + 10 * i)))
    result = log.read(3, 700)
    data = result.to_bytes()
    assert result.size == len(data) <= 700
    offsets = [h.base_offset for h in _headers(data)]
    assert offsets[0] == 3 and offsets == list(range(3, 3 + len(offsets)))
    assert result.size + sizes[3 + len(offsets)] > 700  # the next batch would not have fitted
    assert log.read(3, 10).size == sizes[3]  # KIP-74: one batch even past max_bytes
    assert log.read(3, 10, min_one_batch=False).regions == []


def test_read_spans_segments_and_respects_upper_bound(log):
    for i in range(60):
        log.append(payload_batch(i, 150))
    whole = log.read(0, 1 << 20)
    assert len(whole.regions) == len(log.segments)
    assert [h.base_offset for h in _headers(whole.to_bytes())] == list(range(60))
    bounded = log.read(10, 1 << 20, upper_bound=25)
    assert [h.base_offset for h in _headers(bounded.to_bytes())] == list(range(10, 25))
    assert log.read(25, 1 << 20, upper_bound=25).regions == []
    assert log.read(60, 1000).regions == []  # at the log end: empty, not an error
    with pytest.raises(OffsetOutOfRange):
        log.read(61, 1000)


def test_read_at_or_past_the_upper_bound_is_empty_but_still_range_checked(log):
    # A caught-up fetcher (offset = high watermark or LSO) takes the short way; the answer must be the
    # one the segment walk gave: nothing, even with min_one_batch, even inside a batch straddling the bound.
    log.append(make_batch([b"a"] * 5))  # offsets 0-4
    log.append(make_batch([b"b"] * 5))  # offsets 5-9
    assert log.read(3, 1000, upper_bound=3, min_one_batch=True).regions == []
    assert log.read(7, 1000, upper_bound=5).regions == []
    assert log.read(9, 1000, upper_bound=5).size == 0
    assert [h.base_offset for h in _headers(log.read(3, 1000, upper_bound=10).to_bytes())] == [0, 5]
    with pytest.raises(OffsetOutOfRange):
        log.read(11, 1000, upper_bound=5)


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch(log):
    log.append(make_batch([b"a"] * 5))
    log.append(make_batch([b"b"] * 5))
    data = log.read(7, 1000).to_bytes()
    assert [h.base_offset for h in _headers(data)] == [5]


def test_offset_for_timestamp(log):
    stamps = [100, 200, 200, 150, 300, 400, 350, 500]
    for i, ts in enumerate(stamps * 5):
        log.append(payload_batch(i, 150, timestamp=ts + (i // 8) * 1000))
    all_stamps = [ts + (i // 8) * 1000 for i, ts in enumerate(stamps * 5)]
    assert len(log.segments) > 2
    for target in [0, 100, 101, 150, 200, 201, 1150, 1351, 4500, 4501]:
        expected = next(((i, ts) for i, ts in enumerate(all_stamps) if ts >= target), None)
        assert log.offset_for_timestamp(target) == expected, target
    assert log.max_timestamp_and_offset() == (39, 4500)


def test_truncate_to(log):
    for i in range(50):
        log.append(make_batch([b"x" * 60] * 2, timestamp=i))  # offsets 2i, 2i+1
    log.flush()
    before = len(log.segments)
    assert log.truncate_to(61)  # inside batch 60-61: the whole batch goes
    assert log.log_end_offset == 60 and log.recovery_point == 60
    assert len(log.segments) < before
    assert log.max_timestamp_and_offset() == (59, 29)
    info = log.append(make_batch([b"y"]))
    assert info.first_offset == 60
    assert [o for o, _ in read_all_batches(log)][-2:] == [58, 60]
    assert not log.truncate_to(100)
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (0, 0, 1)


def test_append_as_is_keeps_offsets_and_refuses_to_go_backwards(log):
    log.append(make_batch([b"a"]))
    info = log.append_as_is(make_batch([b"m"], base_offset=10))
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (10, 10, 11)
    with pytest.raises(InvalidRecordError):
        log.append_as_is(make_batch([b"m"], base_offset=5))
    assert log.read(5, 1000).to_bytes()[:8] == (10).to_bytes(8, "big")  # reads skip the gap


def test_roll_by_time(tmp_path):
    now = [1_000_000]
    log = Log.open(str(tmp_path / "t-0"), LogConfig(segment_ms=1000), clock=lambda: now[0])
    log.append(make_batch([b"a"], timestamp=1_000_000))
    log.append(make_batch([b"b"], timestamp=1_000_900))
    assert len(log.segments) == 1
    log.append(make_batch([b"c"], timestamp=1_001_001))  # more than segment.ms after the first batch
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_when_the_index_is_full(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=0, segment_index_bytes=8 * 4))
    for i in range(12):
        log.append(make_batch([b"v"], timestamp=i))
    assert all(s.offset_index.entries <= 4 for s in log.segments)
    assert len(log.segments) >= 2
    log.close()


def test_reopen_after_clean_close_needs_no_recovery(tmp_path):
    path = str(tmp_path / "t-0")
    log = Log.open(path, SMALL)
    for i in range(40):
        log.append(payload_batch(i, 150, timestamp=1000 + i))
    before = read_all_batches(log)
    end = log.log_end_offset
    log.close()
    again = Log.open(path, SMALL, recovery_point=end, clean_shutdown=True)
    assert not again.recovery_report.changed_anything and again.recovery_report.recovered_segments == []
    assert again.log_end_offset == end and read_all_batches(again) == before
    assert again.offset_for_timestamp(1020) == (20, 1020)
    assert again.append(make_batch([b"z"])).first_offset == end
    again.close()


def _headers(data):
    from eoslog.records import iter_headers

    return list(iter_headers(data))


def test_write_fully_resumes_after_short_writes(tmp_path, monkeypatch):
    from eoslog.log import segment as segment_module

    pieces = [b"abc", bytearray(b"defgh"), memoryview(b"ij"), b"klmnop"] * 3
    expected = b"".join(bytes(p) for p in pieces)
    real_writev = os.writev
    calls = []

    def stingy_writev(fd, buffers):
        calls.append(len(buffers))
        data = b"".join(bytes(b) for b in buffers)[:4]  # at most 4 bytes per call
        return real_writev(fd, [data])

    monkeypatch.setattr(os, "writev", stingy_writev)
    monkeypatch.setattr(segment_module, "IOV_MAX", 3)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    segment_module.write_fully(fd, pieces, len(expected))
    os.close(fd)
    assert (tmp_path / "f").read_bytes() == expected
    assert max(calls) <= 3 and len(calls) == -(-len(expected) // 4)


def test_failed_write_leaves_no_partial_batch_and_takes_the_log_offline(tmp_path, monkeypatch):
    from eoslog.log import LogStorageError

    log = Log.open(str(tmp_path / "t-0"), SMALL)
    log.append(make_batch([b"ok"]))
    size = log.active_segment.size
    real_writev = os.writev

    def disk_full(fd, buffers):
        real_writev(fd, [bytes(buffers[0])[:5]])  # a few bytes land, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "writev", disk_full)
    with pytest.raises(LogStorageError, match="No space"):
        log.append(make_batch([b"lost"]))
    monkeypatch.undo()
    assert os.path.getsize(log.active_segment.log_path) == size and log.log_end_offset == 1
    with pytest.raises(LogStorageError):
        log.append(make_batch([b"later"]))
    log.close()  # closes the files without flushing an offline log
    again = Log.open(log.directory, SMALL)
    assert again.log_end_offset == 1 and not again.recovery_report.truncated_bytes
    again.close()


def test_worked_example_of_docs_storage_format(tmp_path):
    """The bytes shown in docs/storage-format.md, "Worked example"."""
    log = Log.open(str(tmp_path / "orders-0"), LogConfig(index_interval_bytes=100))
    log.append(make_batch([b"v" * 10, b"w" * 10], timestamp=1700000000000))
    log.append(make_batch([b"x" * 10], timestamp=1700000000500))
    log.append(make_batch([b"y" * 10, b"z" * 10], timestamp=1700000001000))
    log.append(make_batch([b"q" * 10], timestamp=1700000000900))
    assert [(b.position, b.size, b.base_offset, b.last_offset) for b in log.active_segment.batches()] == [
        (0, 95, 0, 1),
        (95, 78, 2, 2),
        (173, 95, 3, 4),
        (268, 78, 5, 5),
    ]
    assert log.read(5, 1).regions[0].position == 268
    assert log.offset_for_timestamp(1700000000600) == (3, 1700000001000)
    log.close()
    stem = tmp_path / "orders-0" / "00000000000000000000"
    assert stem.with_suffix(".index").read_bytes().hex(" ") == "00 00 00 04 00 00 00 ad"
    assert stem.with_suffix(".timeindex").read_bytes().hex(" ") == "00 00 01 8b cf e5 6b e8 00 00 00 04"
    assert os.path.getsize(stem.with_suffix(".log")) == 346


def test_a_damaged_last_offset_delta_does_not_hide_its_batch_from_a_bounded_read(log):
    """A bit flipped in a stored batch's last_offset_delta (after a clean restart nothing re-reads it) makes
    it claim offsets far past its own. A read bounded by the LSO or the high watermark must still reach
    it and be refused, not stop before it with nothing and no error (a consumer would wait forever), and
    the offset after it must read the next batch."""
    for value in (b"a", b"b", b"c"):
        log.append(make_batch([value]))
    position = log.active_segment.find_batch(1).position
    fd = os.open(os.path.join(log.directory, "00000000000000000000.log"), os.O_WRONLY)
    try:
        os.pwrite(fd, (1 << 25).to_bytes(4, "big"), position + 23)  # last_offset_delta: one high bit set
    finally:
        os.close(fd)
    assert log.active_segment.find_batch(1).last_offset == 1  # the next batch's base offset decides
    with pytest.raises(CorruptRecordError):
        log.read(1, 1000, upper_bound=3, verify_crc=True)
    batches = [read_header(os.pread(region.fd, region.length, region.position))
               for region in log.read(2, 1000, upper_bound=3, verify_crc=True).regions]
    assert [header.base_offset for header in batches] == [2]


def test_an_index_refusing_its_entry_cuts_the_append_back_and_takes_the_log_offline(tmp_path):
    """An index append that fails after the batch's bytes are written (here the segment's max timestamp
    is what a trusted damaged header made it before log/segment.py restore_tail_state checked CRCs: far
    in the future, at an offset behind the time index) must not leave those bytes in the file: the next
    recovery would find an append its producer was told failed, with no producer state applied for it."""
    from eoslog.log.errors import LogStorageError

    path = str(tmp_path / "orders-0")
    log = Log.open(path, SMALL, clock=lambda: 5_000_000)
    for i in range(8):
        log.append(payload_batch(i, 120, timestamp=10_000 + i))
    end, segment = log.log_end_offset, log.active_segment
    size = os.path.getsize(segment.log_path)
    assert segment.time_index.last_entry().offset > 0
    segment.max_timestamp, segment.offset_of_max_timestamp = 1 << 50, 0
    with pytest.raises(LogStorageError):
        for i in range(8):  # until the index interval is crossed and the time index is asked
            log.append(payload_batch(100 + i, 120, timestamp=10_100 + i))
    assert os.path.getsize(segment.log_path) == segment.size
    with pytest.raises(LogStorageError):
        log.append(payload_batch(200, 120))
    log.close(flush=False)
    reopened = Log.open(path, SMALL, clock=lambda: 5_000_000)
    assert reopened.log_end_offset >= end and os.path.getsize(reopened.segments[-1].log_path) >= size
    batches = read_all_batches(reopened)
    assert [o for o, _ in batches] == list(range(reopened.log_end_offset))
    reopened.close()
