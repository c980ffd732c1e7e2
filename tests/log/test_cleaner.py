"""The log cleaner on a real Log: latest value per key, offsets kept, tombstones, lags, ratio, map budget."""

from __future__ import annotations

import random

import pytest
from cleaner_helpers import T0, Clock, clean_once, latest_by_key, open_log, put, read_all, records, target_for

from eoslog.log.cleaner import CleanerTarget, LogCleaner, cleanable_range
from eoslog.log.cleaner_offset_map import ENTRY_OVERHEAD, OffsetMap, measured_bytes_per_entry
from eoslog.records import CompressionType, SimpleRecord, build_batch, decode_batches
from eoslog.records.header import DELETE_HORIZON_BIT


def _random_updates(log, rounds=300, keys=40, per_batch=5, tombstones=0.1, seed=1):
    rnd = random.Random(seed)
    for i in range(rounds):
        put(log, [(f"k{rnd.randrange(keys)}", None if rnd.random() < tombstones else f"v{i}-{j}")
                  for j in range(per_batch)])


def test_keeps_exactly_the_latest_version_of_every_key_at_its_offset(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    _random_updates(log)
    log.roll()
    before = records(log)
    end = log.log_end_offset
    result, _ = clean_once(tmp_path, log, clock)
    after = records(log)
    assert result.groups_swapped > 0
    latest = latest_by_key(before)
    # every surviving record is the latest version of its key, with its original offset
    assert sorted(after) == sorted((offset, key, value) for key, (offset, value) in latest.items())
    assert log.log_end_offset == end
    assert log.size < result.size_before / 5
    offsets = [offset for offset, _, _ in after]
    assert offsets == sorted(offsets)


def test_a_second_pass_merges_the_small_cleaned_segments(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    _random_updates(log)
    log.roll()
    clean_once(tmp_path, log, clock)
    segments_after_first = len(log.segments)
    latest = latest_by_key(records(log))
    clean_once(tmp_path, log, clock)
    assert len(log.segments) < segments_after_first / 4
    assert latest_by_key(records(log)) == latest
    log.close()
    reopened = open_log(tmp_path / "t-0", clock)
    assert latest_by_key(records(reopened)) == latest
    assert not reopened.recovery_report.completed_swaps


def test_tombstones_stay_for_delete_retention_ms_then_go(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, delete_retention_ms=60_000)
    put(log, [("a", "1"), ("b", "1")])
    put(log, [("a", None)])  # a deleted
    put(log, [("c", "1")])
    log.roll()
    clean_once(tmp_path, log, clock)
    assert latest_by_key(records(log)) == {b"a": (2, None), b"b": (1, b"1"), b"c": (3, b"1")}
    tombstone_batch = next(b for b in read_all(log) if any(r.value is None for r in b.records))
    assert tombstone_batch.header.attributes & DELETE_HORIZON_BIT
    assert tombstone_batch.header.base_timestamp == T0 + 60_000
    assert tombstone_batch.absolute_records()[0].timestamp == T0  # the record keeps its timestamp

    clock.now += 59_999
    _, cleaner = clean_once(tmp_path, log, clock)
    assert b"a" in latest_by_key(records(log))
    clock.now += 1
    target = target_for(log)
    cleaner = LogCleaner(str(tmp_path), lambda: [target], clock=clock)
    cleaner._next_horizon[target.topic_partition] = T0 + 60_000
    assert cleaner.grab_filthiest() is not None  # the horizon passing makes the log eligible by itself
    clean_once(tmp_path, log, clock)
    assert latest_by_key(records(log)) == {b"b": (1, b"1"), b"c": (3, b"1")}


def test_never_cleans_at_or_past_the_last_stable_offset_or_the_active_segment(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    _random_updates(log, rounds=200)
    lso = log.segments[len(log.segments) // 2].base_offset + 3
    tail_before = [r for r in records(log) if r[0] >= log.segments[len(log.segments) // 2].base_offset]
    clean_once(tmp_path, log, clock, target=target_for(log, lso=lso))
    tail_after = [r for r in records(log) if r[0] >= tail_before[0][0]]
    assert tail_after == tail_before  # the segment holding the LSO and everything after: untouched


def test_a_last_stable_offset_inside_a_segment_leaves_no_duplicate_behind(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    _random_updates(log, rounds=100, tombstones=0)
    log.roll()
    put(log, [("solo", "1"), ("solo", "2")])  # a key written twice just below the LSO, never again
    lso = log.log_end_offset
    _random_updates(log, rounds=100, tombstones=0, seed=5)
    clean_once(tmp_path, log, clock, target=target_for(log, lso=lso))
    log.roll()
    clean_once(tmp_path, log, clock)
    keys = [key for _, key, _ in records(log)]
    assert len(keys) == len(set(keys))


def test_min_compaction_lag_protects_recent_segments(tmp_path):
    clock = Clock(T0 + 10_000)
    log = open_log(tmp_path / "t-0", clock, min_compaction_lag_ms=5_000)
    for i in range(40):
        put(log, [("k", f"old{i}")] * 10, timestamp=T0)
    old_end = log.log_end_offset
    for i in range(40):
        put(log, [("k", f"new{i}")] * 10, timestamp=T0 + 9_000)
    log.roll()
    found = cleanable_range(log, None, log.log_end_offset, clock.now)
    assert found.first_uncleanable_offset <= old_end
    clean_once(tmp_path, log, clock)
    new_records = [r for r in records(log) if r[0] >= old_end]
    assert len(new_records) == 400  # recent data untouched
    assert len([r for r in records(log) if r[0] < found.first_uncleanable_offset]) <= 1


def test_filthiest_log_is_chosen_and_ratio_threshold_respected(tmp_path):
    clock = Clock()
    dirty = open_log(tmp_path / "a-0", clock, min_cleanable_dirty_ratio=0.5)
    fresh = open_log(tmp_path / "b-0", clock, min_cleanable_dirty_ratio=0.5)
    _random_updates(dirty)
    _random_updates(fresh, rounds=100)
    dirty.roll()
    fresh.roll()
    targets = [CleanerTarget(("a", 0), dirty, lambda: dirty.log_end_offset),
               CleanerTarget(("b", 0), fresh, lambda: fresh.log_end_offset)]
    cleaner = LogCleaner(str(tmp_path), lambda: targets, clock=clock)
    cleaner._first_dirty[("b", 0)] = fresh.segments[-3].base_offset  # mostly clean already
    chosen = cleaner.grab_filthiest()
    assert chosen is not None and chosen[0].topic_partition == ("a", 0)
    cleaner._first_dirty[("a", 0)] = dirty.log_end_offset  # nothing dirty left in a; b is below 0.5
    assert cleaner.grab_filthiest() is None


def test_max_compaction_lag_forces_cleaning_and_rolls_the_active_segment(tmp_path):
    clock = Clock(T0)
    log = open_log(tmp_path / "t-0", clock, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=1_000,
                   segment_bytes=1 << 20)
    for i in range(20):
        put(log, [("k", f"v{i}")], timestamp=T0)
    target = target_for(log)
    cleaner = LogCleaner(str(tmp_path), lambda: [target], clock=clock)
    assert cleaner.grab_filthiest() is None
    clock.now = T0 + 2_000
    chosen = cleaner.grab_filthiest()
    assert len(log.segments) == 2  # the active segment rolled so its data can be cleaned
    assert chosen is not None and chosen[1].max_lag_due


def test_compressed_and_log_append_time_batches_are_rewritten_faithfully(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_bytes=1 << 20)
    for codec in (CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD, CompressionType.SNAPPY):
        records_ = [SimpleRecord(f"k{i % 3}".encode(), f"{codec.name}{i}".encode() * 5, timestamp=T0 + i)
                    for i in range(9)]
        log.append(build_batch(records_, compression=codec))
    log.roll()
    clean_once(tmp_path, log, clock)
    batches = read_all(log)
    assert {b.header.compression for b in batches} == {CompressionType.SNAPPY}
    assert [(r.key, r.value, r.timestamp) for b in batches for r in b.absolute_records()] == [
        (f"k{i % 3}".encode(), f"SNAPPY{i}".encode() * 5, T0 + i) for i in range(6, 9)
    ]
    assert batches[0].header.last_offset_delta == 8  # offsets of the removed records stay covered


def test_records_without_a_key_are_dropped(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    put(log, [(None, "x"), ("a", "1")])
    log.roll()
    clean_once(tmp_path, log, clock)
    assert records(log) == [(1, b"a", b"1")]


def test_a_full_offset_map_cleans_in_several_passes_and_loses_no_key(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_bytes=4096)
    for i in range(100):
        put(log, [(f"key-{i * 10 + j:05d}", f"a{i}") for j in range(10)])
    for i in range(100):
        put(log, [(f"key-{i * 10 + j:05d}", f"b{i}") for j in range(10)])
    log.roll()
    expected = latest_by_key(records(log))
    budget = 300 * (ENTRY_OVERHEAD + 9)  # room for 300 of the 1000 keys
    passes = 0
    while True:
        result, _ = clean_once(tmp_path, log, clock, map_budget=budget)
        passes += 1
        assert result.stats.map_bytes <= budget
        assert latest_by_key(records(log)) == expected
        if result.first_dirty_offset >= log.segments[-1].base_offset or passes > 10:
            break
    assert passes >= 3
    assert len(records(log)) == 1000


def test_offset_map_is_exact_and_budgeted():
    offset_map = OffsetMap(budget_bytes=10 * (ENTRY_OVERHEAD + 3))
    keys = [f"k{i:02d}".encode() for i in range(10)]
    assert offset_map.fits(keys)
    for offset, key in enumerate(keys):
        offset_map.put(key, offset)
    assert not offset_map.fits([b"new"])
    assert offset_map.fits([b"k00"])  # an existing key costs nothing more
    offset_map.put(b"k00", 99)
    assert [offset_map.get(k) for k in keys] == [99] + list(range(1, 10))
    assert offset_map.latest_offset == 99
    # the estimate is an upper bound of what the map really uses
    assert measured_bytes_per_entry(16, entries=20_000) <= ENTRY_OVERHEAD + 16


def test_checkpoint_survives_a_new_cleaner(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    _random_updates(log, rounds=100)
    log.roll()
    result, _ = clean_once(tmp_path, log, clock)
    cleaner = LogCleaner(str(tmp_path), lambda: [target_for(log)], clock=clock)
    assert cleaner.first_dirty_offset(("t", 0)) == result.first_dirty_offset == log.segments[-1].base_offset
    assert cleaner.grab_filthiest() is None  # nothing dirty


@pytest.mark.parametrize("seed", [2, 3])
def test_reads_from_any_offset_after_cleaning_return_whole_batches(tmp_path, seed):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    _random_updates(log, rounds=150, seed=seed)
    log.roll()
    clean_once(tmp_path, log, clock)
    kept = records(log)
    for offset in range(0, log.log_end_offset, 37):
        data = log.read(offset, 1 << 20).to_bytes()
        got = [(r.offset, r.key, r.value) for b in decode_batches(data) for r in b.absolute_records()]
        assert [g for g in got if g[0] >= offset] == [k for k in kept if k[0] >= offset]
