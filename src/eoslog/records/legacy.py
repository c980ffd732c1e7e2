"""Kafka's message formats before v2 (magic 0 and 1), for the Produce and Fetch versions Kafka 4.0 dropped
(KIP-896) that eoslog still serves as Kafka 3.9 did (docs/clients.md): a client of that age writes and
reads message sets, never batches. eoslog stores v2 batches only, so, as Kafka 3.9 did:

- Produce v0-v2 message sets are converted up on arrival (``up_convert``): one v2 batch of their
  messages, compressed wrappers unpacked, timestamps kept (magic 0 has none: -1), keys and values as they
  were; the batch then takes Produce's usual path (offsets, validation, the log);
- Fetch v0-v3 answers are converted down (``down_convert``): each data record becomes one uncompressed
  message of the client's magic (0 for Fetch v0-v1, 1 for v2-v3) at its own offset; control batches are
  left out and headers dropped, which older formats cannot carry. A LogAppendTime batch keeps its
  timestamp type in magic 1.

Decoding old message sets (and their compression codecs and quirks) is kafka-python's, already a
dependency for the protocol specs; the down-converted messages are written here (a dozen bytes of
framing and a CRC-32).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable

from eoslog.records.batch import iter_batches
from eoslog.records.builder import SimpleRecord, build_batch

MAGIC_POSITION = 16  # the same byte in a v2 batch (after offset, length, leader epoch) and a message (offset, size, crc)
NO_TIMESTAMP = -1
_LOG_APPEND_TIME = 0x08
_INT32 = struct.Struct(">i")
_MESSAGE_HEAD = struct.Struct(">qiI")


def magic_of(data: bytes | bytearray | memoryview) -> int | None:
    """The format of a records field: 0, 1 or 2; None when it is too short to say."""
    return data[MAGIC_POSITION] if len(data) > MAGIC_POSITION else None


def up_convert(data: bytes | bytearray | memoryview) -> bytes:
    """A message set of magic 0 or 1 as one v2 batch (relative offsets; the log assigns the real ones).
    Raises ValueError (or kafka-python's CorruptRecordError) for a set that does not parse."""
    from kafka.errors import CorruptRecordError
    from kafka.record.memory_records import MemoryRecords

    records = []
    try:
        for batch in _batches(MemoryRecords(bytes(data))):
            if batch.magic > 1:
                raise ValueError("a message set mixes message formats")
            for message in batch:
                if not message.validate_crc():
                    raise ValueError(f"message at offset {message.offset} fails its CRC")
                timestamp = message.timestamp if message.timestamp is not None else NO_TIMESTAMP
                records.append(SimpleRecord(message.key, message.value, (), timestamp))
    except CorruptRecordError as exc:
        raise ValueError(f"corrupt message set: {exc}") from None
    if not records:
        raise ValueError("an empty message set")
    return build_batch(records)


def _batches(memory_records) -> Iterable:
    while True:
        batch = memory_records.next_batch()
        if batch is None:
            return
        yield batch


def down_convert(data: bytes | bytearray | memoryview, magic: int) -> bytes:
    """v2 batches (whole, as a fetch reads them) as uncompressed messages of ``magic`` (0 or 1)."""
    out = bytearray()
    for batch in iter_batches(data, verify_crc=False):
        if batch.header.is_control:
            continue
        attributes = _LOG_APPEND_TIME if magic == 1 and batch.header.timestamp_type == 1 else 0
        for record in batch.absolute_records():
            _write_message(out, record.offset, magic, attributes, record.timestamp, record.key, record.value)
    return bytes(out)


def _write_message(out: bytearray, offset: int, magic: int, attributes: int, timestamp: int,
                   key: bytes | None, value: bytes | None) -> None:
    body = bytearray((magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(field))
            body += field
    out += _MESSAGE_HEAD.pack(offset, 4 + len(body), zlib.crc32(body))
    out += body
