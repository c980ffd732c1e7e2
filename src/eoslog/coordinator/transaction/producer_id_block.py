"""Producer ids handed out in blocks whose end is persisted before any id of the block is used.

A producer id must never be handed out twice, not even across a crash: partitions remember producer
state (sequences, epochs) by id, so a reused id would make a new producer look like an old one. Kafka
reserves blocks of 1000 ids in the controller; a single eoslog node keeps one number in a small file,
``producer_id_block`` in the data directory (format: docs/transactions.md, "The producer id block file"):
every id below ``block_end`` may have been handed out, none at or above it has.

:class:`ProducerIdBlockAllocator` is the pure core: it says which block end to persist, and hands out ids
only below a block end the caller has confirmed durable. After a crash the allocator starts from the
persisted block end, skipping the unused rest of the old block (at most ``block_size`` ids lost).

    allocator = ProducerIdBlockAllocator(decode_block_file(data) if data else 0)
    producer_id = allocator.allocate_with(persist)   # persist(block_end) writes + fsyncs the file
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from eoslog.records.checksum import crc32c

DEFAULT_BLOCK_SIZE = 1000  # Kafka's producer id block size
MAX_PRODUCER_ID = (1 << 63) - 1

BLOCK_FILE_NAME = "producer_id_block"
BLOCK_FILE_MAGIC = b"EPID"
BLOCK_FILE_VERSION = 0
_BLOCK_BODY = struct.Struct(">4shq")  # magic, version, block_end
_CRC = struct.Struct(">I")
BLOCK_FILE_SIZE = _BLOCK_BODY.size + _CRC.size  # 18


class ProducerIdBlockFileError(ValueError):
    """The block file is damaged: refuse to start rather than risk handing out a used producer id."""


class BlockNotPersisted(RuntimeError):
    """allocate() was called with no persisted id left: persist block_to_persist() first."""


def encode_block_file(block_end: int) -> bytes:
    if not 0 <= block_end <= MAX_PRODUCER_ID:
        raise ValueError(f"block end {block_end} out of range")
    body = _BLOCK_BODY.pack(BLOCK_FILE_MAGIC, BLOCK_FILE_VERSION, block_end)
    return body + _CRC.pack(crc32c(body))


def decode_block_file(data: bytes) -> int:
    """The persisted block end. Raises ProducerIdBlockFileError for anything but an intact file."""
    if len(data) != BLOCK_FILE_SIZE:
        raise ProducerIdBlockFileError(f"producer id block file is {len(data)} bytes, expected {BLOCK_FILE_SIZE}")
    body, (crc,) = data[:_BLOCK_BODY.size], _CRC.unpack_from(data, _BLOCK_BODY.size)
    if crc32c(body) != crc:
        raise ProducerIdBlockFileError("producer id block file fails its CRC-32C check")
    magic, version, block_end = _BLOCK_BODY.unpack(body)
    if magic != BLOCK_FILE_MAGIC:
        raise ProducerIdBlockFileError(f"bad magic {magic!r}")
    if version != BLOCK_FILE_VERSION:
        raise ProducerIdBlockFileError(f"unknown producer id block file version {version}")
    if block_end < 0:
        raise ProducerIdBlockFileError(f"negative block end {block_end}")
    return block_end


class ProducerIdBlockAllocator:
    """Hands out producer ids in [next_producer_id, persisted_block_end).

    Invariant: every id ever returned is below a block end that was reported durable through
    :meth:`block_persisted`, and ids are returned at most once, in increasing order.
    """

    def __init__(self, persisted_block_end: int = 0, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        if persisted_block_end < 0:
            raise ValueError("persisted_block_end must not be negative")
        self.block_size = block_size
        # Ids below the persisted end may have been handed out before a restart: start at the end.
        self.next_producer_id = persisted_block_end
        self.persisted_block_end = persisted_block_end

    def block_to_persist(self) -> int | None:
        """The block end to persist before the next allocate(), or None if ids are available."""
        if self.next_producer_id < self.persisted_block_end:
            return None
        end = self.next_producer_id + self.block_size
        if end > MAX_PRODUCER_ID:
            raise OverflowError("producer ids exhausted")
        return end

    def block_persisted(self, block_end: int) -> None:
        """``block_end`` is durable. Block ends only grow; a stale confirmation is ignored."""
        self.persisted_block_end = max(self.persisted_block_end, block_end)

    def allocate(self) -> int:
        if self.next_producer_id >= self.persisted_block_end:
            raise BlockNotPersisted(f"no persisted producer id left (block end {self.persisted_block_end})")
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        return producer_id

    def allocate_with(self, persist: Callable[[int], None]) -> int:
        """allocate(), first calling ``persist(block_end)`` (write + fsync) when a new block is needed.
        If ``persist`` raises, nothing is handed out."""
        block_end = self.block_to_persist()
        if block_end is not None:
            persist(block_end)
            self.block_persisted(block_end)
        return self.allocate()
