"""Decoding whole RecordBatch v2 batches, records included (docs/record-format.md, "Record").

The broker's append and fetch paths never come here (they use the header view in ``header.py``); this is
for readers of our own data: coordinators loading ``__consumer_offsets`` and ``__transaction_state``,
tools, and tests. Decoding is strict: a record whose fields do not fill its declared length exactly, a
record count that disagrees with the bytes, or anything left over after the last record is corruption.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from eoslog.records.compression import CompressionType, decompress
from eoslog.records.errors import CorruptRecordError
from eoslog.records.header import HEADER_SIZE, BatchHeader, read_header
from eoslog.records.varint import decode_varint, decode_varlong

Headers = tuple[tuple[str, "bytes | None"], ...]

# The smallest record: length, attributes, timestamp delta, offset delta, key length, value length and
# header count, one byte each. Lets a hostile records_count be rejected before any parsing.
MIN_RECORD_SIZE = 7


@dataclass(frozen=True, slots=True)
class Record:
    """One record as stored: offset and timestamp relative to its batch's base_offset and base_timestamp."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class AbsoluteRecord:
    """A record with its batch's base added back: what a consumer sees."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    header: BatchHeader
    records: tuple[Record, ...]

    def __len__(self) -> int:
        return len(self.records)

    def absolute_records(self) -> list[AbsoluteRecord]:
        """Records with absolute offsets and timestamps.

        In a LogAppendTime batch every record carries the batch's max_timestamp (the time the broker
        appended it), as Kafka's consumers report.
        """
        header = self.header
        base_offset = header.base_offset
        if header.timestamp_type == 1:
            append_time = header.max_timestamp
            return [
                AbsoluteRecord(base_offset + r.offset_delta, append_time, r.key, r.value, r.headers)
                for r in self.records
            ]
        base_timestamp = header.base_timestamp
        return [
            AbsoluteRecord(
                base_offset + r.offset_delta, base_timestamp + r.timestamp_delta, r.key, r.value, r.headers
            )
            for r in self.records
        ]


def decode_batch(
    buf: bytes | bytearray | memoryview, position: int = 0, *, verify_crc: bool = True
) -> DecodedBatch:
    """Reads the header at ``position``, decompresses the records and parses every one of them."""
    header = read_header(buf, position, verify_crc=verify_crc)
    body = memoryview(buf)[position + HEADER_SIZE : position + header.size]
    codec = header.attributes & 0x07
    if codec != CompressionType.NONE:
        body = decompress(codec, body)
    records = parse_records(body, header.records_count, where=f"batch at byte {position}")
    return DecodedBatch(header, records)


def iter_batches(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> Iterator[DecodedBatch]:
    """Every batch of a buffer holding whole batches back to back."""
    position = 0
    size = len(buf)
    while position < size:
        batch = decode_batch(buf, position, verify_crc=verify_crc)
        yield batch
        position += batch.header.size


def decode_batches(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> list[DecodedBatch]:
    return list(iter_batches(buf, verify_crc=verify_crc))


def parse_records(
    data: bytes | bytearray | memoryview, count: int, *, where: str = "batch"
) -> tuple[Record, ...]:
    """Exactly ``count`` records filling ``data`` exactly (the uncompressed records section)."""
    if type(data) is not bytes:
        # Indexing bytes is cheaper than indexing a memoryview, and key/value slices must be copied anyway.
        data = bytes(data)
    end = len(data)
    if count * MIN_RECORD_SIZE > end:
        raise CorruptRecordError(
            f"{where}: count mismatch: records_count {count} cannot fit in {end} bytes of records"
        )
    records = []
    append = records.append
    position = 0
    for index in range(count):
        if position >= end:
            raise CorruptRecordError(
                f"{where}: count mismatch: records_count is {count} but the records end after {index}"
            )
        try:
            record, position = _parse_record(data, position, end)
        except CorruptRecordError as error:
            raise CorruptRecordError(f"{where}, record {index}: {error}") from None
        append(record)
    if position != end:
        raise CorruptRecordError(
            f"{where}: count mismatch: {end - position} bytes left after the {count} records "
            "the header counts"
        )
    return tuple(records)


def _parse_record(data: bytes, position: int, end: int) -> tuple[Record, int]:
    """One record starting at ``position``; the common one-byte varints are decoded inline."""
    byte = data[position]
    if byte < 0x80:
        length, position = (byte >> 1) ^ -(byte & 1), position + 1
    else:
        length, position = decode_varint(data, position, end)
    if length < 0:
        raise CorruptRecordError(f"negative record length {length}")
    record_end = position + length
    if record_end > end:
        raise CorruptRecordError(f"record length {length} runs past the records section")
    if length < MIN_RECORD_SIZE - 1:
        raise CorruptRecordError(f"record length {length} is shorter than the smallest record")
    # data[position] is the attributes byte: unused since Kafka 0.11, ignored as Kafka does.
    position += 1
    byte = data[position]
    if byte < 0x80:
        timestamp_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
    else:
        timestamp_delta, position = decode_varlong(data, position, record_end)
    offset_delta, position = _varint(data, position, record_end)
    if offset_delta < 0:
        raise CorruptRecordError(f"negative offset delta {offset_delta}")
    key, position = _bytes(data, position, record_end, "key")
    value, position = _bytes(data, position, record_end, "value")
    header_count, position = _varint(data, position, record_end)
    if header_count < 0:
        raise CorruptRecordError(f"negative header count {header_count}")
    if header_count:
        if header_count * 2 > record_end - position:
            raise CorruptRecordError(f"header count {header_count} cannot fit in the record")
        headers = []
        for _ in range(header_count):
            name_length, position = _varint(data, position, record_end)
            if name_length < 0:
                raise CorruptRecordError(f"negative header key length {name_length}")
            if position + name_length > record_end:
                raise CorruptRecordError(f"header key of {name_length} bytes runs past the record")
            try:
                name = data[position : position + name_length].decode("utf-8")
            except UnicodeDecodeError as error:
                raise CorruptRecordError(f"header key is not UTF-8: {error}") from None
            position += name_length
            header_value, position = _bytes(data, position, record_end, "header value")
            headers.append((name, header_value))
        headers = tuple(headers)
    else:
        headers = ()
    if position != record_end:
        raise CorruptRecordError(f"record fields end at byte {position}, its length says {record_end}")
    return Record(offset_delta, timestamp_delta, key, value, headers), position


def _varint(data: bytes, position: int, end: int) -> tuple[int, int]:
    if position < end:
        byte = data[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
    return decode_varint(data, position, end)


def _bytes(data: bytes, position: int, end: int, what: str) -> tuple[bytes | None, int]:
    """A varint length (-1 for null) followed by that many bytes."""
    length, position = _varint(data, position, end)
    if length < 0:
        if length == -1:
            return None, position
        raise CorruptRecordError(f"{what} length {length} (only -1 may be negative)")
    stop = position + length
    if stop > end:
        raise CorruptRecordError(f"{what} of {length} bytes runs past the record")
    return data[position:stop], stop
