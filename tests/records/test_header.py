import struct

import pytest
from crc32c import crc32c

from eoslog.records import (
    CompressionType,
    CorruptRecordError,
    build_simple,
    decode_batch,
    iter_headers,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from eoslog.records.header import CRC_OFFSET, CRC_START, HEADER_SIZE


def _batch(n=3, **kw):
    kw.setdefault("base_timestamp", 1_000)
    return bytearray(build_simple([b"v%d" % i for i in range(n)], **kw))


def test_header_reports_counts_and_offsets_without_decoding_records():
    batch = _batch(
        5,
        base_offset=40,
        producer_id=9,
        producer_epoch=2,
        base_sequence=100,
        compression=CompressionType.ZSTD,
    )
    # Scramble the (compressed) records and fix the CRC: the header view must not notice.
    for i in range(HEADER_SIZE, len(batch)):
        batch[i] = 0xAB
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[CRC_START:]))
    header = read_header(batch)
    assert (header.base_offset, header.last_offset, header.next_offset) == (40, 44, 45)
    assert header.records_count == 5
    assert header.size == len(batch)
    assert header.compression == CompressionType.ZSTD
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence) == (
        9,
        2,
        100,
        104,
    )
    assert header.has_producer_id and not header.is_transactional and not header.is_control
    with pytest.raises(CorruptRecordError):
        decode_batch(batch)


def test_last_sequence_wraps_like_kafka():
    header = read_header(_batch(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert header.last_sequence == 0


def test_iter_headers_positions():
    batches = [_batch(1), _batch(4, base_offset=1), _batch(2, base_offset=5)]
    buf = b"".join(batches)
    headers = list(iter_headers(buf))
    assert [h.position for h in headers] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [h.records_count for h in headers] == [1, 4, 2]
    assert sum(h.size for h in headers) == len(buf)


def test_set_base_offset_keeps_the_crc_valid():
    buf = bytearray(b"\x00" * 7) + _batch(3)
    set_base_offset(buf, 7, 1234)
    assert read_header(buf, 7).base_offset == 1234
    assert [r.offset for r in decode_batch(buf, 7).absolute_records()] == [1234, 1235, 1236]


def test_set_partition_leader_epoch_keeps_the_crc_valid():
    buf = _batch(1)
    set_partition_leader_epoch(buf, 0, 17)
    assert read_header(buf).partition_leader_epoch == 17


def test_set_log_append_time_rewrites_the_crc():
    buf = bytearray(b"\x00") + _batch(2, base_timestamp=50)
    set_log_append_time(buf, 1, 99_000)
    header = read_header(buf, 1)
    assert header.timestamp_type == 1 and header.max_timestamp == 99_000 and header.base_timestamp == 50
    assert [r.timestamp for r in decode_batch(buf, 1).absolute_records()] == [99_000, 99_000]


@pytest.mark.parametrize("cut", [0, 1, 60])
def test_short_header(cut):
    with pytest.raises(CorruptRecordError, match="needs 61 bytes"):
        read_header(_batch()[:cut])


def test_batch_past_the_buffer():
    with pytest.raises(CorruptRecordError, match="runs past the buffer"):
        read_header(_batch()[:-1])


def test_bad_magic():
    buf = _batch()
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="bad magic 1"):
        read_header(buf)


def test_batch_length_shorter_than_header():
    buf = _batch()
    struct.pack_into(">i", buf, 8, 48)
    with pytest.raises(CorruptRecordError, match="shorter than the header"):
        read_header(buf)


def test_crc_mismatch_and_verify_crc_false():
    buf = _batch()
    buf[30] ^= 0xFF  # base_timestamp, under the CRC
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        read_header(buf)
    assert read_header(buf, verify_crc=False).records_count == 3


@pytest.mark.parametrize("offset,field", [(57, "records_count"), (23, "last_offset_delta")])
def test_negative_counts(offset, field):
    buf = _batch()
    struct.pack_into(">i", buf, offset, -5)
    with pytest.raises(CorruptRecordError, match=f"negative {field}"):
        read_header(buf, verify_crc=False)
