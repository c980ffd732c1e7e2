"""The record compression codecs (docs/record-format.md, "Compression").

A compressed batch keeps its 61-byte header in the clear and compresses only the records that follow it,
so the broker validates and serves compressed batches without touching this module. Consumers of our own
data (coordinators loading internal topics, tools, tests) call :func:`decompress`.

Framings, as clients really write them:

* gzip: an RFC 1952 gzip member (several concatenated members are accepted).
* snappy: Java clients write xerial's block framing (``\\x82SNAPPY\\x00``, version and compatible-version
  int32s, then int32-length-prefixed raw snappy blocks); librdkafka writes one raw snappy block. We read
  both, plus the official snappy framing format, and write xerial framing because Java consumers cannot
  read raw snappy.
* lz4: the LZ4 frame format with independent blocks. Kafka's Java reader decompresses every block on its
  own, so a frame with linked blocks would fail there; we never write one.
* zstd: standard zstd frames (several concatenated frames are accepted).

Every decompression failure becomes :class:`CorruptRecordError`.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from eoslog.records.errors import CorruptRecordError


class CompressionType(IntEnum):
    """Attribute bits 0-2 of a batch. Persisted values: never renumber."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Levels we write with. Kafka's defaults for gzip (6) and zstd (3); lz4 at level 1 because cramjam's
# default frame level is a slow high-compression level (4-5x slower on this machine, barely smaller).
DEFAULT_LEVELS = {CompressionType.GZIP: 6, CompressionType.LZ4: 1, CompressionType.ZSTD: 3}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # magic, version 1, minimum compatible version 1
XERIAL_HEADER_SIZE = len(XERIAL_HEADER)  # 16
XERIAL_BLOCK_SIZE = 32 * 1024  # uncompressed bytes per block, xerial's default
SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"  # the official snappy framing format's stream identifier
_INT32 = struct.Struct(">i")

# A snappy block states its uncompressed length up front and cramjam allocates that much before checking
# anything; a Rust allocation failure aborts the whole process. No valid snappy block expands more than
# about 22x (a 3-byte copy op emits at most 64 bytes), so a larger claim is corruption, caught before
# the allocation.
_SNAPPY_MAX_EXPANSION = 24
_SNAPPY_SLACK = 64


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """The records section compressed with ``codec``; NONE returns the bytes unchanged."""
    # cramjam (a Rust extension, ~1 ms to load) comes with the first batch compressed or decompressed here:
    # the broker validates and serves compressed batches without it.
    import cramjam

    codec = CompressionType(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(codec)
    if codec is CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec is CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec is CompressionType.LZ4:
        # Content checksum off: the batch CRC already covers these bytes.
        compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        compressor.compress(data if type(data) is bytes else bytes(data))  # it takes bytes only
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data, level=level))


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """The records section of a batch compressed with ``codec``."""
    import cramjam

    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.SNAPPY:
        return _snappy_decompress(data)
    if codec == CompressionType.GZIP:
        function, name = cramjam.gzip.decompress, "gzip"
    elif codec == CompressionType.LZ4:
        function, name = cramjam.lz4.decompress, "lz4"
    elif codec == CompressionType.ZSTD:
        function, name = cramjam.zstd.decompress, "zstd"
    else:
        raise CorruptRecordError(f"unknown compression codec {codec} in batch attributes")
    if not len(data):
        raise CorruptRecordError(f"{name}: the compressed records section is empty")
    return bytes(_call(function, data, name))


def _call(function, data, name: str):
    try:
        return function(data)
    except Exception as error:
        raise CorruptRecordError(f"{name} decompression failed: {error}") from error
    except BaseException as error:
        # pyo3 turns a Rust panic into PanicException, a BaseException: still bad input, not a shutdown.
        if isinstance(error, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        raise CorruptRecordError(f"{name} decompression failed: {error!r}") from error


def _xerial_compress(data) -> bytes:
    import cramjam

    view = memoryview(data)
    pieces = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        pieces.append(_INT32.pack(len(block)))
        pieces.append(bytes(block))
    return b"".join(pieces)


def _snappy_decompress(data) -> bytes:
    import cramjam

    view = memoryview(data)
    if view[:8] == XERIAL_MAGIC:
        return _xerial_decompress(view)
    if view[: len(SNAPPY_FRAMED_MAGIC)] == SNAPPY_FRAMED_MAGIC:
        # Chunks of the framing format are at most 64 KiB each, so no length claim to guard here.
        return bytes(_call(cramjam.snappy.decompress, view, "snappy (framed)"))
    return _snappy_raw(view, "snappy")


def _snappy_raw(block: memoryview, name: str) -> bytes:
    import cramjam

    if not len(block):
        raise CorruptRecordError(f"{name}: empty snappy block")
    claimed = _call(cramjam.snappy.decompress_raw_len, block, name)
    if claimed > len(block) * _SNAPPY_MAX_EXPANSION + _SNAPPY_SLACK:
        raise CorruptRecordError(
            f"{name}: block of {len(block)} bytes claims {claimed} uncompressed bytes, "
            "more than snappy can expand"
        )
    return bytes(_call(cramjam.snappy.decompress_raw, block, name))


def _xerial_decompress(view: memoryview) -> bytes:
    # The version fields are not checked: some producers write them little-endian, and only one
    # block layout has ever existed.
    if len(view) < XERIAL_HEADER_SIZE:
        raise CorruptRecordError(f"snappy (xerial): header truncated at {len(view)} bytes")
    pieces = []
    position = XERIAL_HEADER_SIZE
    size = len(view)
    while position < size:
        if position + 4 > size:
            raise CorruptRecordError(f"snappy (xerial): block length at byte {position} is truncated")
        (length,) = _INT32.unpack_from(view, position)
        position += 4
        if length < 0 or position + length > size:
            raise CorruptRecordError(
                f"snappy (xerial): block at byte {position} of length {length} "
                f"runs past the data ({size} bytes)"
            )
        pieces.append(_snappy_raw(view[position : position + length], "snappy (xerial)"))
        position += length
    return b"".join(pieces)
