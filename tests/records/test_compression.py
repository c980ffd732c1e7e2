import gzip
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.records import CompressionType, CorruptRecordError, compress, decompress
from eoslog.records.compression import XERIAL_BLOCK_SIZE, XERIAL_MAGIC

JSONISH = b'{"user": 12345, "event": "click", "page": "/home/index", "ok": true}\n' * 2000  # ~140 KB


@settings(max_examples=60)
@given(st.sampled_from(list(CompressionType)), st.binary(max_size=3000))
def test_round_trip(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", list(CompressionType))
def test_round_trip_large(codec):
    compressed = compress(codec, JSONISH)
    assert decompress(codec, memoryview(compressed)) == JSONISH
    if codec != CompressionType.NONE:
        assert len(compressed) < len(JSONISH) // 4


def test_snappy_writes_xerial_framing_in_32k_blocks():
    data = JSONISH[: 3 * XERIAL_BLOCK_SIZE + 5]
    framed = compress(CompressionType.SNAPPY, data)
    assert framed[:8] == XERIAL_MAGIC
    assert struct.unpack_from(">ii", framed, 8) == (1, 1)
    position, blocks = 16, []
    while position < len(framed):
        (length,) = struct.unpack_from(">i", framed, position)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[position + 4 : position + 4 + length])))
        position += 4 + length
    assert [len(b) for b in blocks] == [XERIAL_BLOCK_SIZE] * 3 + [5]
    assert b"".join(blocks) == data


def test_snappy_reads_raw_as_librdkafka_writes_it():
    raw = bytes(cramjam.snappy.compress_raw(JSONISH))
    assert decompress(CompressionType.SNAPPY, raw) == JSONISH


def test_snappy_reads_the_official_framing_format():
    framed = bytes(cramjam.snappy.compress(JSONISH))
    assert decompress(CompressionType.SNAPPY, framed) == JSONISH


def test_snappy_xerial_ignores_version_fields():
    framed = bytearray(compress(CompressionType.SNAPPY, b"hello" * 10))
    framed[8:16] = struct.pack("<ii", 1, 1)  # some producers write them little-endian
    assert decompress(CompressionType.SNAPPY, framed) == b"hello" * 10


def test_lz4_writes_independent_blocks_without_content_size():
    frame = compress(CompressionType.LZ4, JSONISH)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flags = frame[4]
    assert flags >> 6 == 0b01  # frame version 1
    assert flags & 0x20, "blocks must be independent: Kafka's Java reader decompresses each block alone"
    assert not flags & 0x08  # no content size
    assert decompress(CompressionType.LZ4, frame) == JSONISH


def test_gzip_and_zstd_framings_are_standard():
    assert gzip.decompress(compress(CompressionType.GZIP, JSONISH)) == JSONISH
    assert compress(CompressionType.ZSTD, JSONISH)[:4] == b"\x28\xb5\x2f\xfd"
    # Readers accept concatenated members/frames, as multi-member output from other writers has.
    assert decompress(CompressionType.GZIP, gzip.compress(b"a") + gzip.compress(b"b")) == b"ab"


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
@pytest.mark.parametrize("garbage", [b"", b"\x07", b"not compressed at all, just text", bytes(range(256))])
def test_garbage_is_corrupt(codec, garbage):
    with pytest.raises(CorruptRecordError):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
def test_truncation_is_corrupt(codec):
    compressed = compress(codec, JSONISH)
    with pytest.raises(CorruptRecordError):
        decompress(codec, compressed[: len(compressed) // 2])


def test_snappy_length_claims_beyond_what_snappy_can_expand_are_rejected_before_allocating():
    # 5-byte preamble claiming 4 GiB: cramjam would try to allocate it and abort the process.
    bogus = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    with pytest.raises(CorruptRecordError, match="claims 4294967295"):
        decompress(CompressionType.SNAPPY, bogus)
    xerial = XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(bogus)) + bogus
    with pytest.raises(CorruptRecordError, match="claims"):
        decompress(CompressionType.SNAPPY, xerial)


def test_xerial_block_length_past_the_end_is_corrupt():
    xerial = XERIAL_MAGIC + struct.pack(">iii", 1, 1, 1000) + b"\x00" * 10
    with pytest.raises(CorruptRecordError, match="runs past"):
        decompress(CompressionType.SNAPPY, xerial)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decompress(CompressionType.SNAPPY, XERIAL_MAGIC + b"\x00\x00\x00\x01\x00")


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_is_corrupt(codec):
    with pytest.raises(CorruptRecordError, match=f"unknown compression codec {codec}"):
        decompress(codec, b"abc")
