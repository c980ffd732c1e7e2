"""Crash recovery, one test per kind of damage (docs/storage-format.md, "Recovery")."""

import os

import pytest
from log_batches import payload_batch, read_all_batches, record_body

from eoslog.log import Log, LogConfig
from eoslog.records import CorruptRecordError, read_header

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=250, file_delete_delay_ms=0)
COUNT = 60


def _build(path, count=COUNT):
    """A closed log of ``count`` batches; returns their bodies and the log end offset."""
    log = Log.open(path, CONFIG)
    bodies = []
    for i in range(count):
        raw = payload_batch(i, 120 + (i * 37) % 200, timestamp=10_000 + i * 10)
        log.append(raw)
        bodies.append(record_body(raw))
    end = log.log_end_offset
    log.close()
    return bodies, end


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _files(path, suffix):
    return sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(suffix))


def _check_log(log, bodies):
    """Every surviving batch is byte-for-byte what was appended, lookups work, appends continue."""
    batches = read_all_batches(log)
    assert [o for o, _ in batches] == list(range(len(batches)))
    assert [record_body(raw) for _, raw in batches] == bodies[: len(batches)]
    for offset in range(0, len(batches), 7):
        assert read_header(log.read(offset, 1).to_bytes()).base_offset == offset
        assert log.offset_for_timestamp(10_000 + offset * 10) == (offset, 10_000 + offset * 10)
    for segment in log.segments:
        assert segment.size == os.path.getsize(segment.log_path)
    end = log.log_end_offset
    assert log.append(payload_batch(999, 100)).first_offset == end
    return len(batches)


@pytest.fixture
def built(tmp_path):
    path = str(tmp_path / "t-0")
    bodies, end = _build(path)
    return path, bodies, end


def test_torn_tail_is_cut_at_the_last_whole_batch(built):
    path, bodies, end = built
    last = _files(path, ".log")[-1]
    size = os.path.getsize(last)
    os.truncate(last, size - 50)  # half of the last batch is gone
    log = Log.open(path, CONFIG, recovery_point=end - 5)
    assert log.recovery_report.truncated_bytes > 0
    assert log.log_end_offset == end - 1
    assert _check_log(log, bodies) == end - 1
    log.close()


def test_bit_flip_in_the_last_batch_drops_it(built):
    path, bodies, end = built
    last = _files(path, ".log")[-1]
    with open(last, "r+b") as f:
        f.seek(os.path.getsize(last) - 10)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x04]))
    log = Log.open(path, CONFIG, recovery_point=0)
    assert log.log_end_offset == end - 1
    assert _check_log(log, bodies) == end - 1
    log.close()


def test_length_field_past_end_of_file(built):
    path, bodies, end = built
    log = Log.open(path, CONFIG, recovery_point=end, clean_shutdown=True)
    last_segment = log.segments[-1]
    last_batch = list(last_segment.batches())[-1]
    log.close()
    with open(last_segment.log_path, "r+b") as f:
        f.seek(last_batch.position + 8)
        f.write((10**9).to_bytes(4, "big"))
    log = Log.open(path, CONFIG, recovery_point=last_batch.base_offset)
    assert log.recovery_report.truncated_bytes == last_batch.size
    assert _check_log(log, bodies) == end - 1
    log.close()


def test_missing_index_is_rebuilt_identically(built):
    path, bodies, end = built
    index = _files(path, ".index")[1]
    original = _read(index)
    time_index = _files(path, ".timeindex")[2]
    original_time = _read(time_index)
    assert original and original_time
    os.unlink(index)
    os.unlink(time_index)
    log = Log.open(
        path, CONFIG, recovery_point=end, clean_shutdown=True
    )  # clean shutdown: only the damage is recovered
    rebuilt = [reason for _, reason in log.recovery_report.rebuilt_indexes]
    assert len(rebuilt) == 2 and "missing" in rebuilt[0]
    assert _read(index) == original
    assert _read(time_index) == original_time
    assert _check_log(log, bodies) == end
    log.close()


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda raw: raw + b"\x01\x02\x03", "multiple"),
        (lambda raw: raw[8:16] + raw[0:8] + raw[16:], "increase"),
        (lambda raw: raw[:-8] + (0x10).to_bytes(4, "big") + (10**8).to_bytes(4, "big"), "past the end"),
        (lambda raw: raw[:-8] + (10**6).to_bytes(4, "big") + raw[-4:], "next segment"),
    ],
    ids=["size", "order", "position", "offset"],
)
def test_corrupt_index_is_rebuilt(built, damage, reason):
    path, bodies, end = built
    index = _files(path, ".index")[0]
    original = _read(index)
    assert len(original) >= 16
    with open(index, "wb") as f:
        f.write(damage(original))
    log = Log.open(path, CONFIG, recovery_point=end, clean_shutdown=True)
    ((base, why),) = log.recovery_report.rebuilt_indexes
    assert base == 0 and reason in why
    assert _read(index) == original
    assert _check_log(log, bodies) == end
    log.close()


def test_corrupt_time_index_is_rebuilt(built):
    path, bodies, end = built
    time_index = _files(path, ".timeindex")[0]
    original = _read(time_index)
    with open(time_index, "wb") as f:
        f.write(original[12:24] + original[0:12] + original[24:])
    log = Log.open(path, CONFIG, recovery_point=end, clean_shutdown=True)
    assert log.recovery_report.rebuilt_indexes
    assert _read(time_index) == original
    assert _check_log(log, bodies) == end
    log.close()


def test_damage_in_an_unflushed_middle_segment_drops_the_segments_after_it(built):
    path, bodies, end = built
    logs = _files(path, ".log")
    assert len(logs) >= 4
    middle = logs[1]
    with open(middle, "r+b") as f:
        f.seek(200)
        f.write(b"\xff\xff")
    log = Log.open(path, CONFIG, recovery_point=0)
    report = log.recovery_report
    assert len(report.deleted_segments) == len(logs) - 2
    assert len(log.segments) == 2
    survivors = _check_log(log, bodies)
    assert survivors < end
    assert not any(os.path.exists(p) for p in logs[2:])
    log.close()


def test_leftover_files_are_handled(built):
    path, bodies, end = built
    for name in [
        "00000000000000000007.log.deleted",
        "00000000000000000007.index.deleted",
        "00000000000000000099.log.cleaned",
        "00000000000000000777.index",
    ]:
        open(os.path.join(path, name), "wb").close()
    log = Log.open(path, CONFIG, recovery_point=end, clean_shutdown=True)
    assert sorted(log.recovery_report.removed_files) == sorted(
        [
            "00000000000000000007.log.deleted",
            "00000000000000000007.index.deleted",
            "00000000000000000099.log.cleaned",
            "00000000000000000777.index",
        ]
    )
    assert not any(n.endswith((".deleted", ".cleaned")) for n in os.listdir(path))
    assert _check_log(log, bodies) == end
    log.close()


def test_swap_file_replaces_the_segments_it_covers(built):
    path, bodies, end = built
    log = Log.open(path, CONFIG, recovery_point=end, clean_shutdown=True)
    first, second = log.segments[0], log.segments[1]
    # a "cleaner" output holding the first two segments' batches, finished and renamed to .swap
    data = log.read(0, 1 << 20, upper_bound=log.segments[2].base_offset).to_bytes()
    log.close()
    swap = first.log_path + ".swap"
    with open(swap, "wb") as f:
        f.write(data)
    open(first.offset_index.path + ".swap", "wb").close()
    log = Log.open(path, CONFIG, recovery_point=end, clean_shutdown=True)
    assert log.recovery_report.completed_swaps == [0]
    assert second.base_offset in log.recovery_report.deleted_segments
    assert not os.path.exists(swap) and not os.path.exists(second.log_path)
    assert log.segments[0].base_offset == 0 and log.segments[1].base_offset != second.base_offset
    assert _check_log(log, bodies) == end
    log.close()


def test_log_start_offset_past_the_recovered_end_starts_empty_there(built):
    path, _, end = built
    last = _files(path, ".log")[-1]
    os.truncate(last, 0)
    log = Log.open(path, CONFIG, recovery_point=0, log_start_offset=end + 5)
    assert (log.log_start_offset, log.log_end_offset) == (end + 5, end + 5)
    assert len(log.segments) == 1
    log.close()


def test_recovery_skips_flushed_segments(built):
    path, _, end = built
    log = Log.open(path, CONFIG, recovery_point=end, clean_shutdown=True)
    assert log.recovery_report.recovered_segments == []
    log.close()
    last_base = int(os.path.basename(_files(path, ".log")[-1])[:20])
    log = Log.open(path, CONFIG, recovery_point=last_base, clean_shutdown=True)  # only the last holds >= it
    assert log.recovery_report.recovered_segments == [last_base]
    log.close()
    log = Log.open(path, CONFIG, recovery_point=end)  # unclean: the last segment's indexes are suspect
    assert log.recovery_report.recovered_segments == [last_base]
    log.close()


@pytest.mark.parametrize("field_byte, bit", [(36, 2), (26, 4)], ids=["max_timestamp", "last_offset_delta"])
def test_bit_flip_in_the_tail_after_a_clean_shutdown_is_kept_and_settled(built, field_byte, bit):
    """Rot found after a *clean* shutdown, where recovery re-reads nothing: the batches after the last
    offset-index entry are still walked to restore the segment's tail state, and that walk must check
    their CRCs. Trusted, a flipped max timestamp became the segment's, and the next append failed its
    time-index check after its bytes were written (the partition stayed wedged); a flipped last offset
    delta became the log end offset."""
    path, _bodies, end = built
    log = Log.open(path, CONFIG, recovery_point=end, clean_shutdown=True)
    for i in range(3):
        log.append(payload_batch(COUNT + i, 150, timestamp=10_000 + (COUNT + i) * 10))
    end = log.log_end_offset
    last_segment = log.segments[-1]
    before_max = last_segment.max_timestamp
    victim = list(last_segment.batches())[-1]  # after the last offset-index entry: the restored tail
    log.close()
    with open(last_segment.log_path, "r+b") as f:
        f.seek(victim.position + field_byte)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ (1 << bit)]))
    log = Log.open(path, CONFIG, recovery_point=end, clean_shutdown=True)
    assert log.damaged_batches == [victim.base_offset]
    assert log.log_end_offset == end
    assert log.segments[-1].max_timestamp <= before_max  # the damaged batch's own is dropped, not trusted
    with pytest.raises(CorruptRecordError):
        log.read(victim.base_offset, 1 << 20, verify_crc=True)
    for _ in range(30):  # enough appends to add offset- and time-index entries past the damage
        log.append(payload_batch(998, 100, timestamp=20_000))
    assert log.log_end_offset == end + 30
    log.close()
