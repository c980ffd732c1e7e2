"""Primitive wire helpers shared by the generated codec and the hand-specialised hot paths.

Kafka's primitive encodings (all big-endian): intN / uint16 / uint32 / float64 fixed width; bool one
byte (non-zero is true); ``string`` = int16 length + UTF-8 (-1 = null); ``bytes`` / ``records`` = int32
length + bytes (-1 = null); array = int32 count + elements (-1 = null); uuid = 16 bytes. In flexible
versions ("compact" forms) lengths and counts are unsigned varints holding ``length + 1`` (0 = null), and
every struct ends with a tagged-field section: uvarint count, then per field uvarint tag, uvarint size,
value. We never write a tagged field (old librdkafka mis-skips them), so our sections are one 0 byte.
"""

from __future__ import annotations

import struct

from eoslog.log.region import FileRegion

# Records buffers at least this long are handed to the transport as their own piece instead of being
# copied into the response buffer; shorter ones are cheaper to copy than to write separately.
INLINE_RECORDS_MAX = 4096


class Malformed(ValueError):
    """Bytes that do not follow the wire format. The codec turns this (and struct.error, IndexError,
    UnicodeDecodeError raised while reading) into ``errors.InvalidRequest`` for requests."""


class RecordsList(list):
    """The value of a ``records`` field made of several pieces: bytes-like buffers and ``FileRegion``s.

    The encoder emits each piece (except small buffers) as its own item of the output list, so a file
    region reaches the network layer as a region and is never read into memory by the codec.
    """

    __slots__ = ()

    @property
    def size(self) -> int:
        return sum(p.length if isinstance(p, FileRegion) else len(p) for p in self)


class FrozenArray(list):
    """A struct array its owner promises never to change again, such as one topic's partitions in a
    Metadata response: the encoder keeps its bytes per (message, version) in ``encoded`` and writes them
    again instead of encoding every element on every response (1,000 partitions cost milliseconds).
    Change the contents and you must build a new FrozenArray."""

    __slots__ = ("encoded",)

    def __init__(self, items=()) -> None:
        super().__init__(items)
        self.encoded: dict[str, bytes] = {}


Piece = bytes | bytearray | memoryview | FileRegion

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UUID_PAIR = struct.Struct(">QQ")

# Single-byte unsigned varints 0..127, the common case for compact lengths and counts.
UVARINT_BYTES = tuple(bytes((i,)) for i in range(128))


def uvarint(value: int) -> bytes:
    """Unsigned LEB128-style varint, as Kafka's ``ByteUtils.writeUnsignedVarint`` (values < 2**32)."""
    if value < 128:
        if value < 0:
            raise ValueError(f"unsigned varint cannot hold {value}")
        return UVARINT_BYTES[value]
    if value < 0x4000:  # two bytes: compact lengths of records up to 16 KiB
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (a Java int); returns (value, next position)."""
    value = 0
    shift = 0
    while True:
        byte = buf[pos]  # IndexError past the end: the caller reports truncation
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise Malformed(f"unsigned varint longer than 5 bytes ending at offset {pos}")


def skip_tagged_fields(buf: memoryview, pos: int, end: int) -> int:
    """Skip a whole tagged-field section; returns the position after it."""
    count = buf[pos]
    if count < 128:
        pos += 1
    else:
        count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > end:
            raise Malformed(f"tagged field of {size} bytes runs past the end ({end})")
    return pos


def truncated(what: str, pos: int, length: int, end: int) -> Malformed:
    return Malformed(f"{what}: length {length} at offset {pos} runs past the end of the frame ({end})")


def bad_null(what: str, pos: int) -> Malformed:
    return Malformed(f"{what}: null (or negative length) at offset {pos} where the version allows none")


def too_many(what: str, count: int, pos: int, end: int) -> Malformed:
    return Malformed(f"{what}: {count} elements at offset {pos} cannot fit in the {end - pos} bytes left")


def read_uuid(buf: memoryview, pos: int, make) -> object:
    high, low = UUID_PAIR.unpack_from(buf, pos)
    return make(int=(high << 64) | low)


def write_records(out: bytearray, parts: list, value, compact: bool) -> None:
    """Write a records field: length prefix into ``out``; big buffers and file regions as own pieces."""
    if value is None:
        out += b"\x00" if compact else b"\xff\xff\xff\xff"
        return
    if type(value) is RecordsList:
        size = value.size
        out += uvarint(size + 1) if compact else INT32.pack(size)
        for piece in value:
            if isinstance(piece, FileRegion) or len(piece) >= INLINE_RECORDS_MAX:
                if out:
                    parts.append(out[:])
                    out.clear()
                parts.append(piece)
            else:
                out += piece
        return
    size = len(value)
    out += uvarint(size + 1) if compact else INT32.pack(size)
    if size >= INLINE_RECORDS_MAX:
        parts.append(out[:])
        out.clear()
        parts.append(value)
    else:
        out += value


def finish_frame(out: bytearray, parts: list) -> list:
    """Close a frame whose first 4 bytes (in ``out`` or ``parts[0]``) were reserved for the size."""
    if not parts:
        INT32.pack_into(out, 0, len(out) - 4)
        return [out]
    if out:
        parts.append(out)
    total = 0
    for piece in parts:
        total += piece.length if isinstance(piece, FileRegion) else len(piece)
    INT32.pack_into(parts[0], 0, total - 4)
    return parts
