import struct

import pytest

from eoslog.records import (
    ControlType,
    CorruptRecordError,
    EndTransactionMarker,
    Record,
    build_batch,
    build_control_batch,
    build_simple,
    decode_batch,
    parse_control_batch,
    parse_control_record,
    read_end_transaction_marker,
    read_header,
)


@pytest.mark.parametrize("marker", list(ControlType))
def test_control_batch_layout(marker):
    batch = build_control_batch(
        marker,
        producer_id=77,
        producer_epoch=3,
        coordinator_epoch=12,
        base_offset=500,
        timestamp=1_700_000_000_000,
    )
    header = read_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, -1)
    assert (header.base_offset, header.records_count, header.last_offset_delta) == (500, 1, 0)
    assert header.compression == 0
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_000
    (record,) = decode_batch(batch).records
    assert record.key == struct.pack(">hh", 0, marker)
    assert record.value == struct.pack(">hi", 0, 12)
    assert read_end_transaction_marker(batch) == EndTransactionMarker(marker, 12)
    assert read_end_transaction_marker(batch).is_commit == (marker is ControlType.COMMIT)


def test_persisted_values():
    assert (ControlType.ABORT, ControlType.COMMIT) == (0, 1)


def test_newer_versions_are_read_by_their_version_zero_fields():
    record = Record(0, 0, struct.pack(">hh", 3, 1) + b"extra", struct.pack(">hi", 2, 9) + b"more")
    assert parse_control_record(record) == EndTransactionMarker(ControlType.COMMIT, 9)


@pytest.mark.parametrize(
    "key,value,message",
    [
        (None, b"\x00\x00\x00\x00\x00\x01", "key must be at least 4 bytes, got null"),
        (b"\x00\x00\x00", b"\x00\x00\x00\x00\x00\x01", "got 3"),
        (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1), "negative version"),
        (struct.pack(">hh", 0, 9), struct.pack(">hi", 0, 1), "unknown control record type 9"),
        (struct.pack(">hh", 0, 1), None, "got null"),
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00", "got 3"),
        (struct.pack(">hh", 0, 1), struct.pack(">hi", -2, 1), "marker has negative version"),
    ],
)
def test_bad_control_records(key, value, message):
    with pytest.raises(CorruptRecordError, match=message):
        parse_control_record(Record(0, 0, key, value))


def test_parse_control_batch_wants_one_record_in_a_control_batch():
    with pytest.raises(CorruptRecordError, match="not a control batch"):
        parse_control_batch(decode_batch(build_simple([b"x"], base_timestamp=0)))
    key, value = struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 0)
    two = build_batch(
        [Record(0, 0, key, value), Record(1, 0, key, value)],
        base_timestamp=0,
        producer_id=1,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    with pytest.raises(CorruptRecordError, match="holds 2 records"):
        parse_control_batch(decode_batch(two))


def test_marker_needs_a_producer():
    with pytest.raises(ValueError):
        build_control_batch(ControlType.ABORT, producer_id=-1, producer_epoch=0, coordinator_epoch=0)
