"""OffsetIndex and TimeIndex on their own: lookups, truncation, file round trip, sanity checks."""

import os

from eoslog.log.offset_index import OffsetIndex
from eoslog.log.time_index import TimeIndex


def test_offset_index_lookup_and_round_trip(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    index = OffsetIndex(path, 100, max_entries=10)
    assert index.lookup(150) == (100, 0)  # nothing indexed: start of the segment
    for offset, position in [(110, 1000), (120, 2000), (130, 3000)]:
        index.append(offset, position)
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 1000)
    assert index.lookup(125) == (120, 2000)
    assert index.lookup(10**9) == (130, 3000)
    assert index.lookup_position(2999) == 2000
    assert index.lookup_position(3000) == 3000
    index.flush()
    assert os.path.getsize(path) == 3 * 8
    with open(path, "rb") as f:
        assert f.read(8) == (10).to_bytes(4, "big") + (1000).to_bytes(4, "big")  # big-endian, relative
    index.close()

    again = OffsetIndex(path, 100, max_entries=10)
    assert again.load() is None
    assert again.entries == 3 and again.lookup(125) == (120, 2000)
    assert again.check(log_size=4000, next_offset_bound=131) is None
    again.truncate_to(120)
    assert again.entries == 1 and again.lookup(125) == (110, 1000)
    assert os.path.getsize(path) == 8
    again.close()


def test_offset_index_rejects_non_increasing_entries(tmp_path):
    index = OffsetIndex(str(tmp_path / "x.index"), 0, max_entries=2)
    index.append(5, 100)
    for offset, position in [(5, 200), (6, 100)]:
        try:
            index.append(offset, position)
        except ValueError:
            continue
        raise AssertionError("accepted a non-increasing entry")
    index.append(6, 200)
    assert index.is_full


def test_offset_index_check_finds_damage(tmp_path):
    path = str(tmp_path / "x.index")
    with open(path, "wb") as f:
        f.write(b"\x00" * 12)
    assert "multiple" in OffsetIndex(path, 0, 100).load()
    with open(path, "wb") as f:
        f.writelines(rel.to_bytes(4, "big") + pos.to_bytes(4, "big") for rel, pos in [(10, 100), (5, 200)])
    index = OffsetIndex(path, 0, 100)
    assert index.load() is None
    assert "increase" in index.check(10_000, None)
    with open(path, "wb") as f:
        f.write((10).to_bytes(4, "big") + (5000).to_bytes(4, "big"))
    index = OffsetIndex(path, 0, 100)
    index.load()
    assert "past the end" in index.check(4000, None)
    assert "next segment" in index.check(9000, 10)


def test_time_index_entries_only_grow(tmp_path):
    path = str(tmp_path / "00000000000000000000.timeindex")
    index = TimeIndex(path, 0, max_entries=10)
    assert index.last_entry() == (-1, 0)
    index.maybe_append(1000, 5)
    index.maybe_append(1000, 7)  # same timestamp: skipped
    index.maybe_append(900, 8)  # smaller: skipped
    index.maybe_append(2000, 9)
    assert index.entries == 2 and index.last_entry() == (2000, 9)
    assert index.lookup_before(1000) == (-1, 0)
    assert index.lookup_before(1001) == (1000, 5)
    assert index.lookup_before(99999) == (2000, 9)
    index.close()
    again = TimeIndex(path, 0, max_entries=10)
    assert again.load() is None and again.last_entry() == (2000, 9)
    assert again.check(next_offset_bound=10) is None
    assert "next segment" in again.check(next_offset_bound=9)
    again.truncate_to(9)
    assert again.last_entry() == (1000, 5) and os.path.getsize(path) == 12
    again.close()


def test_time_index_full_check_can_be_skipped_for_the_final_entry(tmp_path):
    index = TimeIndex(str(tmp_path / "t.timeindex"), 0, max_entries=1)
    index.maybe_append(10, 1)
    index.maybe_append(20, 2)
    assert index.entries == 1
    index.maybe_append(20, 2, skip_full_check=True)
    assert index.last_entry() == (20, 2)
