import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.records import (
    AbsoluteRecord,
    CorruptRecordError,
    Record,
    SimpleRecord,
    build_batch,
    build_simple,
    decode_batch,
    decode_batches,
    iter_batches,
)
from eoslog.records.batch import parse_records
from eoslog.records.header import CRC_OFFSET, CRC_START, HEADER_SIZE

from .strategies import compressions, delta_records, producer_fields, simple_records, timestamps


def _fix_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[CRC_START:]))
    return batch


@settings(max_examples=150, deadline=None)
@given(simple_records(), compressions, producer_fields(), st.integers(0, 2**40), timestamps, st.data())
def test_simple_records_round_trip(records, compression, producer, base_offset, default_timestamp, data):
    timestamp_type = data.draw(st.sampled_from([0, 1]))
    # Without a timestamp a record gets base_timestamp, so give one when any record lacks it.
    pass_base = any(r.timestamp is None for r in records) or data.draw(st.booleans())
    batch = build_batch(
        records,
        base_offset=base_offset,
        compression=compression,
        base_timestamp=default_timestamp if pass_base else None,
        timestamp_type=timestamp_type,
        partition_leader_epoch=data.draw(st.integers(-1, 2**31 - 1)),
        **producer,
    )
    decoded = decode_batch(batch)
    header = decoded.header
    assert header.size == len(batch)
    assert header.base_offset == base_offset
    assert header.compression == compression
    assert header.records_count == len(records)
    assert header.last_offset_delta == max(len(records) - 1, 0)
    assert header.producer_id == producer["producer_id"]
    assert header.producer_epoch == producer["producer_epoch"]
    assert header.base_sequence == producer["base_sequence"]
    assert header.is_transactional == producer["is_transactional"]
    assert not header.is_control
    assert header.timestamp_type == timestamp_type

    expected_timestamps = [r.timestamp if r.timestamp is not None else default_timestamp for r in records]
    if records:
        assert header.base_timestamp == (default_timestamp if pass_base else expected_timestamps[0])
        assert header.max_timestamp == max(expected_timestamps)
    else:
        assert header.max_timestamp == header.base_timestamp == (default_timestamp if pass_base else -1)
    assert [(r.key, r.value, r.headers) for r in decoded.records] == [
        (r.key, r.value, r.headers) for r in records
    ]
    assert [r.offset_delta for r in decoded.records] == list(range(len(records)))
    absolute = decoded.absolute_records()
    assert [r.offset for r in absolute] == [base_offset + i for i in range(len(records))]
    if timestamp_type == 0:
        assert [r.timestamp for r in absolute] == expected_timestamps
    else:
        assert all(r.timestamp == header.max_timestamp for r in absolute)


@settings(max_examples=100, deadline=None)
@given(delta_records(), compressions, st.integers(-(2**40), 2**40))
def test_delta_records_round_trip_with_gaps(records, compression, base_timestamp):
    batch = build_batch(records, compression=compression, base_timestamp=base_timestamp)
    decoded = decode_batch(batch)
    assert decoded.records == tuple(records)
    if records:
        assert decoded.header.last_offset_delta == records[-1].offset_delta
        assert decoded.header.max_timestamp == base_timestamp + max(r.timestamp_delta for r in records)


def test_base_timestamp_is_the_first_records_and_deltas_may_be_negative():
    batch = build_batch(
        [
            SimpleRecord(None, b"a", timestamp=5000),
            SimpleRecord(None, b"b", timestamp=4000),
            SimpleRecord(None, b"c", timestamp=7000),
        ]
    )
    decoded = decode_batch(batch)
    assert decoded.header.base_timestamp == 5000
    assert decoded.header.max_timestamp == 7000
    assert [r.timestamp_delta for r in decoded.records] == [0, -1000, 2000]


def test_build_simple_accepts_values_and_tuples():
    batch = build_simple(
        ["a", b"b", None, ("k", "v"), (b"k2", None, [("h", "x"), ("n", None)])], base_timestamp=9
    )
    assert decode_batch(batch).absolute_records() == [
        AbsoluteRecord(0, 9, None, b"a"),
        AbsoluteRecord(1, 9, None, b"b"),
        AbsoluteRecord(2, 9, None, None),
        AbsoluteRecord(3, 9, b"k", b"v"),
        AbsoluteRecord(4, 9, b"k2", None, (("h", b"x"), ("n", None))),
    ]


def test_empty_batch_keeps_a_compacted_last_offset_delta():
    batch = build_batch(
        [], base_offset=100, last_offset_delta=9, producer_id=3, producer_epoch=0, base_sequence=0
    )
    decoded = decode_batch(batch)
    assert decoded.records == ()
    assert decoded.header.records_count == 0
    assert decoded.header.next_offset == 110
    assert decoded.header.last_sequence == 9


def test_builder_rejects_programming_errors():
    with pytest.raises(ValueError, match="increase"):
        build_batch([Record(1, 0, None, b""), Record(1, 0, None, b"")], base_timestamp=0)
    with pytest.raises(TypeError):
        build_batch([SimpleRecord(None, "text")])
    with pytest.raises(TypeError):
        build_batch([SimpleRecord(None, b"", headers=((b"bytes-name", b""),))])
    with pytest.raises(ValueError, match="below"):
        build_batch([Record(5, 0, None, b"")], base_timestamp=0, last_offset_delta=4)


def test_iter_batches_over_back_to_back_batches():
    batches = [
        build_simple([b"x"] * n, base_offset=o, compression=c, base_timestamp=1)
        for n, o, c in [(1, 0, 0), (3, 1, 1), (2, 4, 4)]
    ]
    decoded = decode_batches(b"".join(batches))
    assert [b.header.position for b in decoded] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [r.offset for b in decoded for r in b.absolute_records()] == list(range(6))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(b"".join(batches)[:-1]))


def test_decode_at_a_position_inside_a_larger_buffer():
    batch = build_simple([b"hello"], base_offset=7, base_timestamp=1)
    decoded = decode_batch(b"\x00" * 13 + batch + b"\x00" * 5, 13)
    assert decoded.header.position == 13
    assert decoded.absolute_records()[0] == AbsoluteRecord(7, 1, None, b"hello")


def test_records_count_too_high_is_a_count_mismatch():
    batch = bytearray(build_simple([b"a", b"b"], base_timestamp=0))
    struct.pack_into(">i", batch, 57, 3)
    with pytest.raises(CorruptRecordError, match="count mismatch"):
        decode_batch(_fix_crc(batch))


def test_records_count_too_low_is_a_count_mismatch():
    batch = bytearray(build_simple([b"a", b"b"], base_timestamp=0))
    struct.pack_into(">i", batch, 57, 1)
    with pytest.raises(CorruptRecordError, match="count mismatch"):
        decode_batch(_fix_crc(batch))


def test_hostile_records_count_is_rejected_before_parsing():
    batch = bytearray(build_simple([b"a"], base_timestamp=0))
    struct.pack_into(">i", batch, 57, 2**31 - 1)
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        decode_batch(_fix_crc(batch))


def test_record_length_that_disagrees_with_its_fields_is_corrupt():
    batch = bytearray(build_simple([b"abc"], base_timestamp=0))
    # The first record's length varint sits right after the header: claim one byte more, add a byte.
    assert batch[HEADER_SIZE] == 2 * 9  # zigzag(9): attrs, ts, offset, key, value len, 3 value bytes, headers
    batch[HEADER_SIZE] = 2 * 10
    batch += b"\x00"
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    with pytest.raises(CorruptRecordError, match="record fields end"):
        decode_batch(_fix_crc(batch))


def test_trailing_bytes_after_the_records_are_corrupt():
    batch = bytearray(build_simple([b"abc"], base_timestamp=0)) + b"\x00\x00"
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    with pytest.raises(CorruptRecordError, match="count mismatch: 2 bytes left"):
        decode_batch(_fix_crc(batch))


def test_header_key_must_be_utf8():
    batch = bytearray(build_simple([(None, b"v", [("\u00e9", b"")])], base_timestamp=0))
    index = batch.index("\u00e9".encode())
    batch[index] = 0xFF
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        decode_batch(_fix_crc(batch))


@pytest.mark.parametrize(
    "body,message",
    [
        (b"\x01", "negative record length"),
        (b"\x0c\x00\x00\x00\x03\x01\x00", "key length -2"),
        (b"\x0c\x00\x00\x01\x01\x01\x00", "negative offset delta"),
        (b"\x0c\x00\x00\x00\x01\x01\x01", "negative header count"),
        (b"\x0c\x00\x00\x00\x01\x0a\x00", "value of 5 bytes runs past"),
        (b"\x10\x00\x00\x00\x01\x01\x02\x01\x00", "negative header key length"),
        (b"\x7e\x00\x00\x00\x01\x01\x00", "runs past the records section"),
        (b"\x08\x00\x00\x00\x01", "shorter than the smallest record"),
    ],
)
def test_record_field_errors(body, message):
    with pytest.raises(CorruptRecordError, match=message):
        parse_records(body + b"\x00" * (7 - len(body)) if len(body) < 7 else body, 1)


def test_crc_is_checked_unless_told_not_to():
    batch = bytearray(build_simple([b"abc"], base_timestamp=0))
    batch[-2] ^= 0x01  # inside the value: still parses
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        decode_batch(batch)
    assert decode_batch(batch, verify_crc=False).records[0].value == b"abb"
