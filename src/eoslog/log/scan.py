"""Walking the batches of a segment file by their headers, without decoding records.

Two walks: ``scan_batches`` reads only the 61-byte headers (reads and lookups: cheap, no CRC) and
``recover_batches`` reads whole batches and checks each CRC with ``records.read_header`` (recovery). Both
raise :class:`eoslog.records.CorruptRecordError` where the bytes stop making sense, after yielding every
good batch before that point.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

from eoslog.records import CorruptRecordError, read_header
from eoslog.records.checksum import crc32c
from eoslog.records.header import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, BatchHeader

SCAN_CHUNK = 16 * 1024  # header walks touch little data: a few batches per index interval
RECOVERY_CHUNK = 4 * 1024 * 1024


class BatchInfo(NamedTuple):
    """Where one batch sits in a segment file and what the log needs to know about it."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


def scan_batches(fd: int, start: int, end: int) -> Iterator[BatchInfo]:
    """Batches from byte ``start`` (a batch boundary) up to byte ``end`` of the file, header only."""
    position = start
    buf = b""
    buf_start = start
    while position < end:
        at = position - buf_start
        if at + HEADER_SIZE > len(buf):
            buf = os.pread(fd, max(SCAN_CHUNK, HEADER_SIZE), position)
            buf_start, at = position, 0
            if len(buf) < HEADER_SIZE or position + HEADER_SIZE > end:
                raise CorruptRecordError(
                    f"batch header at byte {position} is cut short by the end of the file"
                )
        fields = HEADER.unpack_from(buf, at)
        batch_length, magic, last_offset_delta = fields[1], fields[3], fields[6]
        if magic != MAGIC_V2 or batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch at byte {position}: not a RecordBatch v2 header")
        # Negative only by damage to the CRC-covered bytes of a recovered segment: its framing above is
        # sound, so the walk goes on, and the fetch path's CRC check refuses the batch itself.
        last_offset_delta = max(last_offset_delta, 0)
        size = batch_length + LOG_OVERHEAD
        if position + size > end:
            raise CorruptRecordError(f"batch at byte {position} ({size} bytes) runs past byte {end}")
        base_offset = fields[0]
        yield BatchInfo(position, size, base_offset, base_offset + last_offset_delta, fields[8])
        position += size


def recover_batches(
    fd: int, start: int, end: int, *, keep_damaged_below: int | None = None, damaged: list[int] | None = None
) -> Iterator[BatchHeader]:
    """Whole batches from ``start`` to ``end``, CRC-checked; ``position`` in each header is absolute.

    A batch whose framing is sound but whose CRC fails and whose last offset is below
    ``keep_damaged_below`` (the recovery point: it was fsync'ed, so it cannot be a torn write) is rot of
    acknowledged data, not a tail to cut: it is yielded anyway and its base offset added to ``damaged``.
    Fetches refuse it (log/checked_read.py); cutting it would silently drop it and every batch after it."""
    position = start
    buf = b""
    buf_start = start
    while position < end:
        at = position - buf_start
        if at + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(RECOVERY_CHUNK, end - position), position)
            buf_start, at = position, 0
            if len(buf) < HEADER_SIZE:
                raise CorruptRecordError(
                    f"batch header at byte {position} is cut short by the end of the file"
                )
        batch_length = HEADER.unpack_from(buf, at)[1]
        size = batch_length + LOG_OVERHEAD
        if batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch at byte {position}: batch_length {batch_length} is too small")
        if position + size > end:
            raise CorruptRecordError(f"batch at byte {position} ({size} bytes) runs past byte {end}")
        if at + size > len(buf):
            buf = os.pread(fd, max(size, min(RECOVERY_CHUNK, end - position)), position)
            buf_start, at = position, 0
            if len(buf) < size:
                raise CorruptRecordError(f"batch at byte {position} is cut short by the end of the file")
        try:
            header = read_header(buf, at)
        except CorruptRecordError:
            header = _damaged_header(fd, buf, at, position, size, end, keep_damaged_below)
            if header is None:
                raise  # a torn or malformed batch, or damage past the recovery point: the walk ends here
            if damaged is not None:
                damaged.append(header.base_offset)
        yield header._replace(position=position)  # absolute file position
        position += size


def _damaged_header(fd: int, buf: bytes, at: int, position: int, size: int, end: int,
                    keep_damaged_below: int | None) -> BatchHeader | None:
    """The header to index a batch that failed ``read_header`` by, when it is rot to keep; else None.

    Rot to keep: magic 2 and a sound length (bytes 0-20, outside the CRC, checked by the caller), a CRC
    that does not match, and a base offset below ``keep_damaged_below``. Every other field lies inside
    the damaged CRC-covered bytes and may be the flipped one: a last_offset_delta or records_count turned
    negative or huge must not decide the batch's fate nor the offsets recovery indexes. So the base
    offset decides (a recovery point falls on a batch boundary), and the last offset comes from the next
    batch's base offset when one follows in this walk, else from the batch's own claim kept inside
    ``[base, keep_damaged_below)``. Its timestamp is dropped from the time index (-1)."""
    fields = HEADER.unpack_from(buf, at)
    base_offset, magic, stored_crc, claimed_delta = fields[0], fields[3], fields[4], fields[6]
    if keep_damaged_below is None or magic != MAGIC_V2 or base_offset >= keep_damaged_below:
        return None
    if crc32c(memoryview(buf)[at + CRC_START : at + size]) == stored_crc:
        return None  # the bytes are as written: malformed by the writer, not rot
    following = position + size
    next_base = -1
    if following + 8 <= end:
        next_base = int.from_bytes(os.pread(fd, 8, following), "big", signed=True)
    if base_offset < next_base <= keep_damaged_below:
        last_offset = next_base - 1
    elif 0 <= claimed_delta and base_offset + claimed_delta < keep_damaged_below:
        last_offset = base_offset + claimed_delta
    else:
        last_offset = keep_damaged_below - 1
    delta = last_offset - base_offset
    return BatchHeader(*fields[:6], delta, -1, -1, *fields[9:12], delta + 1, position)

