"""Retention by time and size, DeleteRecords, deferred file deletion."""

import os

import pytest
from log_batches import payload_batch, read_all_batches

from eoslog.log import Log, LogConfig, OffsetOutOfRange


def _fill(log, count, *, timestamp=lambda i: 1000 + i, size=150):
    for i in range(count):
        log.append(payload_batch(i, size, timestamp=timestamp(i)))


def _open(tmp_path, clock, **settings):
    config = LogConfig(segment_bytes=2000, index_interval_bytes=300, **settings)
    return Log.open(str(tmp_path / "t-0"), config, clock=clock)


def test_retention_ms_deletes_old_segments_by_their_largest_timestamp(tmp_path):
    now = [0]
    log = _open(tmp_path, lambda: now[0], retention_ms=10_000, file_delete_delay_ms=0)
    _fill(log, 60, timestamp=lambda i: 1000 * i)  # ~10 batches per segment
    segments = log.segments
    assert len(segments) >= 5
    # at now, a segment is expired when now - its largest timestamp > 10 s
    now[0] = segments[2].max_timestamp + 10_001
    assert log.apply_retention() == 3
    assert log.segments[0] is segments[3]
    assert log.log_start_offset == segments[3].base_offset
    assert read_all_batches(log)[0][0] == segments[3].base_offset
    now[0] = 10**12
    log.apply_retention()
    assert len(log.segments) == 1  # never the active segment
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    log.close()


def test_retention_bytes_keeps_at_most_that_many_bytes(tmp_path):
    log = _open(tmp_path, lambda: 0, retention_bytes=5000, retention_ms=-1, file_delete_delay_ms=0)
    _fill(log, 80)
    total = log.size
    deleted = log.apply_retention()
    assert deleted > 0
    # Kafka's rule: drop the oldest segments while what is left stays at or above retention.bytes
    assert 5000 <= log.size < 5000 + log.segments[0].size
    assert log.size < total
    log.close()


def test_compact_only_topics_keep_old_segments(tmp_path):
    log = _open(tmp_path, lambda: 10**12, retention_ms=1, cleanup_policy=frozenset({"compact"}))
    _fill(log, 40)
    assert log.apply_retention() == 0
    log.close()


def test_high_watermark_limits_retention(tmp_path):
    log = _open(tmp_path, lambda: 10**12, retention_ms=1, file_delete_delay_ms=0)
    _fill(log, 40)
    second = log.segments[1]
    assert log.apply_retention(high_watermark=second.base_offset + 1) == 1
    log.close()


def test_delete_records_before(tmp_path):
    log = _open(tmp_path, lambda: 0, file_delete_delay_ms=0)
    _fill(log, 50)
    third = log.segments[2]
    assert log.delete_records_before(third.base_offset + 2) == third.base_offset + 2
    assert log.segments[0] is third  # segments wholly below the new start are gone
    with pytest.raises(OffsetOutOfRange):
        log.read(third.base_offset + 1, 100)
    assert log.read(third.base_offset + 2, 1).size > 0
    assert log.delete_records_before(3) == third.base_offset + 2  # never moves back
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(log.log_end_offset + 1)
    end = log.log_end_offset
    assert log.delete_records_before(end) == end  # everything: the active segment stays, empty of offsets
    assert log.read(end, 100).regions == []
    assert log.offset_for_timestamp(0) is None
    log.close()


def test_deleted_segments_stay_readable_until_the_delay_passes(tmp_path):
    now = [0]
    log = _open(tmp_path, lambda: now[0], file_delete_delay_ms=60_000)
    _fill(log, 30)
    region = log.read(0, 100).regions[0]
    expected = os.pread(region.fd, region.length, region.position)
    first = log.segments[0]
    log.delete_records_before(log.segments[1].base_offset)
    names = os.listdir(log.directory)
    assert f"{first.log_path.rsplit('/', 1)[1]}" in names and first.log_path.endswith(".log.deleted")
    assert os.pread(region.fd, region.length, region.position) == expected  # handed-out region still valid
    now[0] = 59_999
    assert log.delete_expired_files() == 0
    now[0] = 60_000
    assert log.delete_expired_files() == 1
    assert not any(name.endswith(".deleted") for name in os.listdir(log.directory))
    log.close()


def test_log_start_offset_survives_reopen_through_the_caller(tmp_path):
    log = _open(tmp_path, lambda: 0, file_delete_delay_ms=0)
    _fill(log, 30)
    start = log.delete_records_before(7)
    log.close()
    again = Log.open(log.directory, log.config, log_start_offset=start)
    assert again.log_start_offset == 7
    again.close()
