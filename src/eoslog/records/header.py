"""A header-only view of a RecordBatch v2: the hot path reads these 61 bytes and never the records.

Layout (docs/storage-format.md, "RecordBatch v2"; all integers big-endian):

    offset  size  field
         0     8  base_offset
         8     4  batch_length            bytes after this field (so the batch is batch_length + 12 long)
        12     4  partition_leader_epoch
        16     1  magic                   always 2
        17     4  crc                     CRC-32C (Castagnoli) of bytes 21 .. end
        21     2  attributes              bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control
        23     4  last_offset_delta
        27     8  base_timestamp
        35     8  max_timestamp
        43     8  producer_id
        51     2  producer_epoch
        53     4  base_sequence
        57     4  records_count
        61     -  records

The CRC does not cover base_offset, batch_length or partition_leader_epoch, so the broker assigns offsets
by rewriting bytes 0..8 in place without recomputing it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

from crc32c import crc32c

from eoslog.records.errors import CorruptRecordError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes batch_length does not count
CRC_START = 21
MAGIC_OFFSET = 16
MAGIC_V2 = 2
BASE_OFFSET = struct.Struct(">q")
LENGTH_PREFIX = struct.Struct(">qi")  # base_offset, batch_length

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40  # KIP-534: base_timestamp holds the delete horizon

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed fields of one batch, plus where it sits in the buffer it was read from."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0  # where the batch starts in the buffer it was read from

    @property
    def size(self) -> int:
        """Bytes this batch takes on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap at 2**31 like Kafka's."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def read_header(buf: bytes | bytearray | memoryview, position: int = 0, *, verify_crc: bool = True) -> BatchHeader:
    """Reads and checks the batch starting at ``position``; the records stay untouched.

    Checks: the header fits, magic is 2, the whole batch fits in ``buf``, the CRC matches (unless
    ``verify_crc`` is false) and the record count agrees with last_offset_delta for non-compacted data
    is left to the caller (compaction legitimately leaves gaps).
    """
    available = len(buf) - position
    if available < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch header at byte {position} needs {HEADER_SIZE} bytes, only {available} left"
        )
    fields = HEADER.unpack_from(buf, position)
    batch_length = fields[1]
    magic = fields[3]
    if magic != MAGIC_V2:
        raise CorruptRecordError(f"batch at byte {position}: bad magic {magic} (only RecordBatch v2 is supported)")
    if batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch at byte {position}: batch_length {batch_length} is shorter than the header")
    end = position + LOG_OVERHEAD + batch_length
    if end > len(buf):
        raise CorruptRecordError(
            f"batch at byte {position}: batch_length {batch_length} runs past the buffer ({len(buf)} bytes)"
        )
    if fields[12] < 0:
        raise CorruptRecordError(f"batch at byte {position}: negative records_count {fields[12]}")
    if fields[6] < 0:
        raise CorruptRecordError(f"batch at byte {position}: negative last_offset_delta {fields[6]}")
    if verify_crc:
        actual = crc32c(memoryview(buf)[position + CRC_START : end])
        if actual != fields[4]:
            raise CorruptRecordError(
                f"batch at byte {position}: CRC mismatch (stored {fields[4]:#010x}, computed {actual:#010x})"
            )
    return BatchHeader(*fields, position=position)


def iter_headers(
    buf: bytes | bytearray | memoryview, *, verify_crc: bool = True
) -> Iterator[BatchHeader]:
    """Every batch header in a buffer that holds whole batches back to back (a Produce records field)."""
    position = 0
    size = len(buf)
    while position < size:
        header = read_header(buf, position, verify_crc=verify_crc)
        yield header
        position += header.size


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Assigns offsets to the batch at ``position`` by rewriting its base_offset (not covered by the CRC)."""
    BASE_OFFSET.pack_into(buf, position, base_offset)
