"""A small RecordBatch v2 builder for the log tests (the log never decodes records, so the tests only need
valid bytes). Cross-checked against kafka-python's reader in test_log_batches.py."""

from __future__ import annotations

import struct

from crc32c import crc32c

from eoslog.records.header import HEADER

_NO_PARTITION_LEADER_EPOCH = -1


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _varint(timestamp_delta) + _varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += _varint(-1)
        else:
            body += _varint(len(field)) + field
    body += _varint(0)  # headers
    return _varint(len(body)) + bytes(body)


def make_batch(
    values: list[bytes],
    *,
    base_offset: int = 0,
    timestamp: int = 1_700_000_000_000,
    timestamps: list[int] | None = None,
    keys: list[bytes | None] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """One uncompressed batch holding ``values``; record i has timestamp ``timestamps[i]`` (default all
    ``timestamp``)."""
    stamps = timestamps or [timestamp] * len(values)
    keys = keys or [None] * len(values)
    base_ts = stamps[0]
    records = b"".join(_record(i, stamps[i] - base_ts, keys[i], value) for i, value in enumerate(values))
    header = bytearray(HEADER.size)
    HEADER.pack_into(
        header,
        0,
        base_offset,
        HEADER.size - 12 + len(records),
        _NO_PARTITION_LEADER_EPOCH,
        2,
        0,
        attributes,
        len(values) - 1,
        base_ts,
        max(stamps),
        producer_id,
        producer_epoch,
        base_sequence,
        len(values),
    )
    batch = header + records
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def payload_batch(index: int, size: int, *, timestamp: int = 1_700_000_000_000, records: int = 1) -> bytes:
    """A batch whose record values are derived from ``index`` (for byte-for-byte checks)."""
    chunk = max(size // records, 1)
    values = []
    for r in range(records):
        seed = f"{index}:{r}:".encode()
        values.append((seed * (chunk // len(seed) + 1))[:chunk])
    return make_batch(values, timestamp=timestamp)


def read_all_batches(log) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of every batch from the log start to the end, through Log.read."""
    from eoslog.records import iter_headers

    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).to_bytes()
        assert data, f"no data at offset {offset} below the log end {log.log_end_offset}"
        for header in iter_headers(data):
            if header.last_offset >= offset:
                out.append((header.base_offset, bytes(data[header.position : header.position + header.size])))
            offset = header.next_offset
    return out


def record_body(batch: bytes) -> bytes:
    """The bytes of a batch that the log must not change (everything after base_offset)."""
    return bytes(batch[8:])
