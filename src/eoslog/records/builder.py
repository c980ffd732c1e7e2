"""Building RecordBatch v2 bytes (docs/record-format.md).

The broker itself writes few batches (transaction markers, coordinator records); tests and tools write
many. Inputs are either :class:`SimpleRecord` (absolute timestamp, offsets assigned in order, like
Kafka's ``SimpleRecord``) or :class:`~eoslog.records.batch.Record` (deltas given, so batches with offset
gaps, as compaction leaves them, can be built too).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from eoslog.records.batch import Headers, Record
from eoslog.records.checksum import crc32c
from eoslog.records.compression import CompressionType, compress
from eoslog.records.header import (
    CONTROL_BIT,
    CRC,
    CRC_OFFSET,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
)
from eoslog.records.varint import INT32_MAX, INT64_MAX, INT64_MIN, write_varint, write_varlong

_BYTES_LIKE = (bytes, bytearray, memoryview)


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to write: timestamp in epoch milliseconds, or None for the batch's default."""

    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int | None = None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def build_batch(
    records: Iterable[SimpleRecord | Record],
    *,
    base_offset: int = 0,
    compression: int = CompressionType.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = 0,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    compression_level: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """One batch holding ``records``, CRC included.

    Timestamps: a SimpleRecord without one gets ``base_timestamp`` if given, else the current time.
    ``base_timestamp`` defaults to the first record's timestamp (Kafka's choice, so later deltas may be
    negative); Record deltas are relative to it. ``last_offset_delta`` defaults to the last record's
    offset delta; passing a larger one builds a batch whose tail was compacted away.
    """
    resolved, base_timestamp = _resolve(records, base_timestamp)
    body = bytearray()
    record = bytearray()
    previous_offset_delta = -1
    max_timestamp = base_timestamp if not resolved else None
    for offset_delta, timestamp_delta, key, value, headers in resolved:
        if not previous_offset_delta < offset_delta <= INT32_MAX:
            raise ValueError(
                f"offset deltas must increase within int32: {offset_delta} after {previous_offset_delta}"
            )
        if not INT64_MIN <= timestamp_delta <= INT64_MAX:
            raise ValueError(f"timestamp delta {timestamp_delta} out of int64 range")
        previous_offset_delta = offset_delta
        absolute = base_timestamp + timestamp_delta
        if max_timestamp is None or absolute > max_timestamp:
            max_timestamp = absolute
        _encode_record(record, offset_delta, timestamp_delta, key, value, headers)
        write_varint(body, len(record))
        body += record

    if last_offset_delta is None:
        last_offset_delta = max(previous_offset_delta, 0)
    elif last_offset_delta < previous_offset_delta:
        raise ValueError(
            f"last_offset_delta {last_offset_delta} is below the last record's {previous_offset_delta}"
        )

    compression = CompressionType(compression)
    section = body if compression is CompressionType.NONE else compress(compression, body, compression_level)
    attributes = int(compression)
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_BIT
    if is_transactional:
        attributes |= TRANSACTIONAL_BIT
    if is_control:
        attributes |= CONTROL_BIT

    batch = bytearray(HEADER_SIZE)
    batch += section
    HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,  # the CRC, filled in below once the bytes it covers are final
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(resolved),
    )
    CRC.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def build_simple(items: Iterable, **kwargs) -> bytes:
    """A batch from values, ``(key, value)`` or ``(key, value, headers)`` tuples; str is UTF-8 encoded.

    Keyword arguments go to :func:`build_batch`. Records and SimpleRecords pass through unchanged.
    """
    records = []
    for item in items:
        if isinstance(item, (SimpleRecord, Record)):
            records.append(item)
        elif isinstance(item, tuple):
            key, value, *rest = item
            headers = tuple((name, _as_bytes(v)) for name, v in rest[0]) if rest else ()
            records.append(SimpleRecord(_as_bytes(key), _as_bytes(value), headers))
        else:
            records.append(SimpleRecord(None, _as_bytes(item)))
    return build_batch(records, **kwargs)


def _as_bytes(value) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _resolve(records: Iterable[SimpleRecord | Record], base_timestamp: int | None) -> tuple[list[tuple], int]:
    """(offset_delta, timestamp_delta, key, value, headers) per record, and the base timestamp."""
    items = list(records)
    now = None
    if base_timestamp is None:
        first = items[0] if items else None
        if isinstance(first, SimpleRecord) and first.timestamp is not None:
            base_timestamp = first.timestamp
        elif first is None:
            base_timestamp = NO_TIMESTAMP
        else:
            base_timestamp = now = now_ms()
        default_timestamp = None  # a SimpleRecord without a timestamp gets the current time
    else:
        default_timestamp = base_timestamp
    resolved = []
    for index, item in enumerate(items):
        if isinstance(item, Record):
            resolved.append((item.offset_delta, item.timestamp_delta, item.key, item.value, item.headers))
        elif isinstance(item, SimpleRecord):
            timestamp = item.timestamp
            if timestamp is None:
                if default_timestamp is None:
                    default_timestamp = now if now is not None else now_ms()
                timestamp = default_timestamp
            resolved.append((index, timestamp - base_timestamp, item.key, item.value, item.headers))
        else:
            raise TypeError(f"build_batch takes SimpleRecord or Record, not {type(item).__name__}")
    return resolved, base_timestamp


def _encode_record(out: bytearray, offset_delta, timestamp_delta, key, value, headers) -> None:
    """The record body (everything after its length varint) into ``out``, which is cleared first."""
    out.clear()
    out.append(0)  # attributes: unused, always 0
    write_varlong(out, timestamp_delta)
    write_varint(out, offset_delta)
    _write_bytes(out, key, "key")
    _write_bytes(out, value, "value")
    write_varint(out, len(headers))
    for name, header_value in headers:
        if not isinstance(name, str):
            raise TypeError(f"header key must be str, not {type(name).__name__}")
        encoded = name.encode("utf-8")
        write_varint(out, len(encoded))
        out += encoded
        _write_bytes(out, header_value, "header value")


def _write_bytes(out: bytearray, data, what: str) -> None:
    if data is None:
        out.append(1)  # zigzag(-1): null
        return
    if not isinstance(data, _BYTES_LIKE):
        raise TypeError(f"record {what} must be bytes or None, not {type(data).__name__}")
    write_varint(out, len(data))
    out += data
