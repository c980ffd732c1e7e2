"""The .snapshot file (docs/producer-state.md): round trips, atomic writing, one test per kind of damage."""

from __future__ import annotations

import logging
import os
import re
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.log import producer_snapshot
from eoslog.log.producer_entry import INT32_MAX, BatchMetadata, ProducerEntry
from eoslog.log.producer_snapshot import (
    CorruptSnapshotError,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
    snapshot_path,
)
from eoslog.log.producer_state import Duplicate, ProducerStateTable
from eoslog.records.header import BatchHeader

INT64 = st.integers(-(2**63), 2**63 - 1)
OFFSETS = st.integers(0, 2**62)


@st.composite
def entries(draw):
    batches = []
    offset = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(0, 5))):
        delta = draw(st.integers(0, 2**31 - 1))
        first_seq = draw(st.integers(-1, INT32_MAX))
        last_seq = draw(st.integers(-1, INT32_MAX))
        batches.append(BatchMetadata(first_seq, last_seq, offset, offset + delta, draw(INT64)))
        offset += delta + draw(st.integers(1, 1000))
    return ProducerEntry(
        draw(st.integers(0, 2**63 - 1)),
        draw(st.integers(-1, 2**15 - 1)),
        batches,
        draw(st.integers(-1, 2**31 - 1)),
        draw(INT64),
        draw(st.one_of(st.none(), OFFSETS)),
    )


def unique(items):
    return list({entry.producer_id: entry for entry in items}.values())


@given(offset=OFFSETS, items=st.lists(entries(), max_size=8).map(unique))
def test_encode_decode_round_trip(offset, items):
    data = encode_snapshot(offset, items)
    decoded_offset, decoded = decode_snapshot(data)
    assert decoded_offset == offset
    assert sorted(decoded, key=lambda e: e.producer_id) == sorted(items, key=lambda e: e.producer_id)
    assert encode_snapshot(offset, reversed(items)) == data  # same state, same bytes


def example_entry():
    return ProducerEntry(1000, 3, [BatchMetadata(0, 4, 40, 44, 1_700_000_000_000)], 7, 1_700_000_000_000, 40)


def test_the_worked_example_of_the_format_document():
    """The hex dump in docs/producer-state.md is exactly what the encoder writes."""
    document = (Path(__file__).parents[2] / "docs" / "producer-state.md").read_text()
    dump = document.split("### Worked example", 1)[1].split("```", 2)[1]
    documented = bytes.fromhex(
        "".join(line[6:53] for line in dump.splitlines() if re.match(r"^[0-9a-f]{4}  ", line))
    )
    data = encode_snapshot(45, [example_entry()])
    assert data == documented and len(data) == 81
    assert decode_snapshot(documented) == (45, [example_entry()])


def test_every_single_bit_flip_is_detected():
    data = encode_snapshot(45, [example_entry(), ProducerEntry(5, 0, [], -1, 10, None)])
    for position in range(len(data)):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[position] ^= 1 << bit
            with pytest.raises(CorruptSnapshotError):
                decode_snapshot(bytes(damaged))


def test_every_truncation_is_detected():
    data = encode_snapshot(45, [example_entry()])
    for length in range(len(data)):
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(data[:length])


def test_trailing_bytes_and_structural_damage_with_a_valid_crc_are_detected():
    from crc32c import crc32c

    def resealed(body):  # damage that a recomputed CRC would hide: the structure checks must catch it
        return producer_snapshot.MAGIC + struct.pack(">hI", 1, crc32c(body)) + body

    good = encode_snapshot(45, [example_entry()])
    body = good[producer_snapshot.CRC_START :]
    assert decode_snapshot(resealed(body))[0] == 45
    with pytest.raises(CorruptSnapshotError, match="unexpected bytes"):
        decode_snapshot(resealed(body + b"\0"))
    with pytest.raises(CorruptSnapshotError, match="runs past|run past"):
        decode_snapshot(resealed(body[:8] + struct.pack(">i", 2) + body[12:]))  # entry_count 2, one entry
    too_many = bytearray(body)
    too_many[12 + 30] = 6  # batch_count of the first entry
    with pytest.raises(CorruptSnapshotError, match="at most 5"):
        decode_snapshot(resealed(bytes(too_many)))
    version_2 = bytearray(good)
    version_2[4:6] = struct.pack(">h", 2)
    with pytest.raises(CorruptSnapshotError, match="version"):
        decode_snapshot(bytes(version_2))


def table_with_traffic():
    """Producer 7 with five cached batches and an open transaction, producer 8 idempotent only."""
    table = ProducerStateTable()
    offset = 0
    sent = []
    for seq in range(0, 12, 2):
        batch = BatchHeader(offset, 69, -1, 2, 0, 0x10, 1, 500 + seq, 500 + seq, 7, 2, seq, 2, 0)
        table.replay(batch)
        sent.append(batch)
        offset += 2
        table.replay(BatchHeader(offset, 59, -1, 2, 0, 0, 0, 9, 9, 8, 0, seq // 2, 1, 0))
        offset += 1
    return table, sent


def test_a_written_snapshot_restores_the_state_and_the_whole_duplicate_window(tmp_path):
    table, sent = table_with_traffic()
    offset = table.write_snapshot(tmp_path)
    assert offset == table.map_end_offset == 18
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000018.snapshot"]  # no .tmp left over

    restored = ProducerStateTable()
    assert restored.load_latest_snapshot(tmp_path) == 18
    assert restored.entries() == table.entries()
    assert restored.first_unstable_offset() == 0
    assert restored.map_end_offset == 18
    for batch in sent[-5:]:  # all five cached batches are still recognised as retries after a restart
        assert restored.prepare_append(batch, 0) == Duplicate(
            7, batch.base_offset, batch.last_offset, batch.max_timestamp
        )


def write(table_or_none, directory, offset, keep=None):
    table = table_or_none or ProducerStateTable.with_entries(
        [ProducerEntry(offset, 0, [], -1, offset, None)], offset
    )
    return table.write_snapshot(directory, offset, keep_newest=keep)


@pytest.mark.parametrize(
    "damage",
    ["bit_flip", "truncated", "empty", "wrong_name", "garbage"],
)
def test_a_damaged_newest_snapshot_is_deleted_in_favour_of_an_older_valid_one(tmp_path, caplog, damage):
    for offset in (10, 20, 30):
        write(None, tmp_path, offset)
    newest = snapshot_path(tmp_path, 30)
    data = newest.read_bytes()
    if damage == "bit_flip":
        newest.write_bytes(data[:40] + bytes([data[40] ^ 0x08]) + data[41:])
    elif damage == "truncated":
        newest.write_bytes(data[:-7])
    elif damage == "empty":
        newest.write_bytes(b"")
    elif damage == "garbage":
        newest.write_bytes(os.urandom(len(data)))
    else:  # a valid file under another offset's name
        newest.write_bytes(snapshot_path(tmp_path, 20).read_bytes())
    table = ProducerStateTable()
    with caplog.at_level(logging.WARNING, logger="eoslog.log.producer_snapshot"):
        assert table.load_latest_snapshot(tmp_path) == 20
    assert [e.producer_id for e in table.entries()] == [20]
    assert not newest.exists()
    assert "00000000000000000030.snapshot" in caplog.text
    assert [offset for offset, _ in list_snapshots(tmp_path)] == [10, 20]


def test_when_every_snapshot_is_damaged_the_state_starts_empty(tmp_path):
    table, _ = table_with_traffic()
    table.write_snapshot(tmp_path, 18)
    path = snapshot_path(tmp_path, 18)
    path.write_bytes(path.read_bytes()[:30])
    fresh = ProducerStateTable.with_entries([ProducerEntry(1)], 99)
    assert fresh.load_latest_snapshot(tmp_path) is None
    assert len(fresh) == 0 and fresh.map_end_offset == 0 and list_snapshots(tmp_path) == []


def test_load_picks_the_newest_at_or_below_the_offset_and_cleans_temporary_files(tmp_path):
    for offset in (10, 20, 30):
        write(None, tmp_path, offset)
    (tmp_path / "00000000000000000040.snapshot.tmp").write_bytes(b"half a snapshot")
    (tmp_path / "00000000000000000000.log").write_bytes(b"not ours")
    table = ProducerStateTable()
    assert table.load_latest_snapshot(tmp_path, 29) == 20
    assert table.load_latest_snapshot(tmp_path, 30) == 30
    assert table.load_latest_snapshot(tmp_path, 9) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000.log",
        "00000000000000000010.snapshot",
        "00000000000000000020.snapshot",
        "00000000000000000030.snapshot",
    ]
    assert ProducerStateTable().load_latest_snapshot(tmp_path / "missing") is None


def test_only_the_newest_snapshots_are_kept(tmp_path):
    for offset in (10, 20, 30, 40):
        write(None, tmp_path, offset, keep=2)
    assert [offset for offset, _ in list_snapshots(tmp_path)] == [30, 40]


def test_delete_snapshots_below(tmp_path):
    for offset in (10, 20, 30):
        write(None, tmp_path, offset)
    assert ProducerStateTable().delete_snapshots_below(tmp_path, 20) == [10]
    assert [offset for offset, _ in list_snapshots(tmp_path)] == [20, 30]


def test_truncate_to_drops_newer_snapshots_and_reloads_an_older_one(tmp_path):
    for offset in (10, 20, 30):
        write(None, tmp_path, offset)
    table = ProducerStateTable.with_entries([ProducerEntry(30)], 35)
    assert table.truncate_to(tmp_path, 25) == 20
    assert [e.producer_id for e in table.entries()] == [20] and table.map_end_offset == 20
    assert [offset for offset, _ in list_snapshots(tmp_path)] == [10, 20]
    assert table.truncate_to(tmp_path, 20) == 20  # a snapshot exactly at the truncation point is kept
    assert table.truncate_to(tmp_path, 5) is None
    assert len(table) == 0 and list_snapshots(tmp_path) == []


def test_truncate_fully_and_start_at(tmp_path):
    for offset in (10, 20):
        write(None, tmp_path, offset)
    table = ProducerStateTable.with_entries([ProducerEntry(1)], 20)
    table.truncate_fully_and_start_at(tmp_path, 500)
    assert len(table) == 0 and table.map_end_offset == 500 and list_snapshots(tmp_path) == []
