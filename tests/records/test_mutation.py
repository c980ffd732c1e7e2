"""Damaged batches raise CorruptRecordError and nothing else, from the header view and the full decoder."""

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.records import (
    CompressionType,
    ControlType,
    CorruptRecordError,
    Record,
    SimpleRecord,
    build_batch,
    build_control_batch,
    compress,
    decode_batch,
    decode_batches,
    iter_headers,
    read_header,
)
from eoslog.records.header import CRC_OFFSET, CRC_START, HEADER_SIZE


def _seed_batches() -> list[bytes]:
    records = [
        SimpleRecord(None, b"plain value", timestamp=1_000),
        SimpleRecord(b"key", None, (("trace-id", b"\x00\x01\x02"), ("empty", b""), ("null", None)), 1_500),
        SimpleRecord(b"", b"", timestamp=900),
        SimpleRecord(b"k" * 40, bytes(range(256)), (("\u00e9t\u00e9", b"v"),), 2_000),
    ]
    seeds = []
    for codec in CompressionType:
        seeds.append(
            build_batch(records, compression=codec, producer_id=5, producer_epoch=1, base_sequence=7)
        )
    seeds.append(
        build_batch(
            [Record(0, 0, b"a", b"b"), Record(9, -5, None, b"c")], base_timestamp=77, last_offset_delta=12
        )
    )
    seeds.append(build_control_batch(ControlType.COMMIT, 5, 1, 3, timestamp=10))
    seeds.append(build_batch([], base_timestamp=1))
    return seeds


SEEDS = _seed_batches()
OK = (CorruptRecordError,)


def _fix_crc(batch: bytearray) -> bytearray:
    if len(batch) >= HEADER_SIZE:
        struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[CRC_START:]))
    return batch


@st.composite
def mutated(draw):
    batch = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "length"]))
        if not batch:
            break
        # Half the time aim at the records section, where the parsers beyond the header live.
        low = HEADER_SIZE if draw(st.booleans()) and len(batch) > HEADER_SIZE else 0
        index = draw(st.integers(low, len(batch) - 1)) if low < len(batch) else len(batch) - 1
        if kind == "flip":
            batch[index] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            batch[index] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, draw(st.integers(0, 255))]))
        elif kind == "insert":
            batch[index:index] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del batch[index : index + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del batch[index:]
        elif kind == "length" and len(batch) >= 12:
            # Keep batch_length consistent with the (changed) size, so decoding goes past the header check.
            struct.pack_into(">i", batch, 8, len(batch) - 12 + draw(st.integers(-2, 2)))
    if draw(st.booleans()):
        _fix_crc(batch)
    return bytes(batch)


def _exercise(buf: bytes) -> None:
    for verify_crc in (True, False):
        try:
            read_header(buf, verify_crc=verify_crc)
        except OK:
            pass
        try:
            decode_batch(buf, verify_crc=verify_crc)
        except OK:
            pass
        try:
            list(iter_headers(buf + buf, verify_crc=verify_crc))
        except OK:
            pass
        try:
            decode_batches(buf + buf, verify_crc=verify_crc)
        except OK:
            pass


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_batches_raise_only_corrupt_record_error(buf):
    _exercise(buf)


@st.composite
def mutated_inside_compression(draw):
    """Damage the uncompressed records, then compress them properly and fix the CRC.

    Random damage to compressed bytes mostly stops at the decompressor; this reaches the record parser
    behind every codec.
    """
    seed = draw(st.sampled_from(SEEDS[:5]))
    header = read_header(seed)
    body = bytearray(decode_batch(seed).records and _records_section(seed))
    for _ in range(draw(st.integers(1, 3))):
        if not body:
            break
        index = draw(st.integers(0, len(body) - 1))
        choice = draw(st.integers(0, 2))
        if choice == 0:
            body[index] = draw(st.integers(0, 255))
        elif choice == 1:
            del body[index : index + draw(st.integers(1, 4))]
        else:
            body[index:index] = draw(st.binary(min_size=1, max_size=4))
    batch = bytearray(seed[:HEADER_SIZE]) + compress(header.compression, body)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    if draw(st.booleans()):
        struct.pack_into(">i", batch, 57, draw(st.integers(0, 10)))  # records_count
    return bytes(_fix_crc(batch))


def _records_section(batch: bytes) -> bytes:
    from eoslog.records.compression import decompress

    return decompress(read_header(batch).compression, batch[HEADER_SIZE:])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_inside_compression())
def test_damaged_records_behind_every_codec_raise_only_corrupt_record_error(buf):
    _exercise(buf)


@pytest.mark.parametrize("seed", range(len(SEEDS)))
def test_every_truncation_of_every_seed(seed):
    batch = SEEDS[seed]
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            read_header(batch[:cut])
        with pytest.raises(CorruptRecordError):
            decode_batch(batch[:cut], verify_crc=False)
