"""Kafka's variable-length integers (docs/record-format.md, "Varints").

Kafka borrows protobuf's base-128 encoding: seven bits per byte, least significant group first, the high
bit set on every byte but the last. Signed fields are zigzag-mapped first so small negative numbers stay
short (-1 -> 1, 1 -> 2). Record fields use the signed forms: ``varint`` for int32 values (at most 5 bytes)
and ``varlong`` for int64 values (at most 10 bytes). ``unsigned_varint`` (uint32, at most 5 bytes) is the
flexible-versions protocol's length form and lives here so there is only one implementation.

Decoders take ``(buf, position, end)`` and return ``(value, next_position)``; ``end`` bounds the read so a
record's fields cannot run into the next record. They raise :class:`CorruptRecordError` for truncation
and for encodings longer than the type allows or carrying bits beyond its width. Like Kafka they accept a
non-minimal encoding (``0x80 0x00`` for zero), which no client writes but which is not ambiguous.
"""

from __future__ import annotations

from eoslog.records.errors import CorruptRecordError

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

# Single-byte encodings are by far the most common (lengths, deltas, counts): build them once.
_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def _read_raw(buf, position: int, end: int, max_bytes: int, bits: int, what: str) -> tuple[int, int]:
    """Base-128 decode of at most ``max_bytes`` bytes whose value must fit in ``bits`` bits."""
    result = 0
    shift = 0
    start = position
    while True:
        if position >= end:
            raise CorruptRecordError(f"{what} at byte {start} is truncated after {position - start} bytes")
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if position - start >= max_bytes:
            raise CorruptRecordError(f"{what} at byte {start} is longer than {max_bytes} bytes")
    if result >> bits:
        raise CorruptRecordError(f"{what} at byte {start} does not fit in {bits} bits")
    return result, position


def decode_unsigned_varint(buf, position: int = 0, end: int | None = None) -> tuple[int, int]:
    """An unsigned 32-bit varint."""
    if end is None:
        end = len(buf)
    if position < end:
        byte = buf[position]
        if byte < 0x80:
            return byte, position + 1
    return _read_raw(buf, position, end, MAX_VARINT_BYTES, 32, "unsigned varint")


def decode_varint(buf, position: int = 0, end: int | None = None) -> tuple[int, int]:
    """A zigzag-encoded signed 32-bit varint."""
    if end is None:
        end = len(buf)
    if position < end:
        byte = buf[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
    raw, position = _read_raw(buf, position, end, MAX_VARINT_BYTES, 32, "varint")
    return (raw >> 1) ^ -(raw & 1), position


def decode_varlong(buf, position: int = 0, end: int | None = None) -> tuple[int, int]:
    """A zigzag-encoded signed 64-bit varint."""
    if end is None:
        end = len(buf)
    if position < end:
        byte = buf[position]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), position + 1
    raw, position = _read_raw(buf, position, end, MAX_VARLONG_BYTES, 64, "varlong")
    return (raw >> 1) ^ -(raw & 1), position


def _encode_raw(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_unsigned_varint(value: int) -> bytes:
    if not 0 <= value <= UINT32_MAX:
        raise ValueError(f"unsigned varint out of range: {value}")
    return _encode_raw(value)


def encode_varint(value: int) -> bytes:
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode_raw(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode_raw(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def write_varint(out: bytearray, value: int) -> None:
    """Appends ``encode_varint(value)`` to ``out`` (the builder's inner loop; range checked by the caller)."""
    raw = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def write_varlong(out: bytearray, value: int) -> None:
    """Appends ``encode_varlong(value)`` to ``out``."""
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def size_of_unsigned_varint(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def size_of_varint(value: int) -> int:
    return size_of_unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def size_of_varlong(value: int) -> int:
    return size_of_unsigned_varint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
