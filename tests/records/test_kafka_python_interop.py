"""Cross-checks against a real client's codec: kafka-python 3.0.12's DefaultRecordBatch(Builder).

kafka-python here has only gzip built in. For snappy we give it a snappy module backed by cramjam's raw
block codec, so kafka-python's own xerial framing code writes and reads the frames. For lz4 and zstd we
swap its one-shot codec functions for cramjam's (their defaults, not ours: lz4 with linked blocks), which
checks the batch layout and that we read frames written with other settings than ours.
"""

import types

import cramjam
import kafka.codec
import kafka.record.default_records as kafka_records
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.records import (
    CompressionType,
    ControlType,
    SimpleRecord,
    build_batch,
    build_control_batch,
    decode_batch,
    read_header,
)

from .strategies import headers, optional_bytes, timestamps


@pytest.fixture(autouse=True)
def kafka_python_codecs(monkeypatch):
    snappy = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", snappy)
    monkeypatch.setattr(kafka.codec, "lz4", types.SimpleNamespace())  # makes has_lz4() true
    monkeypatch.setattr(kafka.codec, "zstd", types.SimpleNamespace())
    monkeypatch.setattr(kafka_records, "lz4_encode", lambda data: bytes(cramjam.lz4.compress(bytes(data))))
    monkeypatch.setattr(kafka_records, "lz4_decode", lambda data: bytes(cramjam.lz4.decompress(bytes(data))))
    monkeypatch.setattr(kafka_records, "zstd_encode", lambda data: bytes(cramjam.zstd.compress(bytes(data))))
    monkeypatch.setattr(
        kafka_records, "zstd_decode", lambda data: bytes(cramjam.zstd.decompress(bytes(data)))
    )


def _kafka_python_batch(
    records, codec, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False
):
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for offset, (key, value, record_headers, timestamp) in enumerate(records):
        assert builder.append(offset, timestamp, key, value, list(record_headers)) is not None
    return bytes(builder.build())


COMPRESSIBLE = [
    (None, b"value " * 20, [], 1_700_000_000_000),
    (b"key", None, [("trace", b"abc"), ("null", None), ("", b"")], 1_700_000_000_005),
    (b"", b"", [("\u00fcmlaut", b"\x00\xff")], 1_699_999_999_990),
    (b"k" * 30, b"value " * 30, [], 1_700_000_000_001),
]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_kafka_python_writes_we_read(codec):
    batch = _kafka_python_batch(
        COMPRESSIBLE, codec, producer_id=42, producer_epoch=3, base_sequence=10, transactional=True
    )
    decoded = decode_batch(batch)
    header = decoded.header
    assert header.compression == codec  # the values are compressible, so kafka-python kept the codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 10)
    assert header.is_transactional and not header.is_control
    assert header.records_count == 4 and header.last_offset_delta == 3
    assert header.max_timestamp == 1_700_000_000_005
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded.absolute_records()] == [
        (i, ts, key, value, tuple(h)) for i, (key, value, h, ts) in enumerate(COMPRESSIBLE)
    ]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_we_write_kafka_python_reads(codec):
    records = [SimpleRecord(key, value, tuple(h), ts) for key, value, h, ts in COMPRESSIBLE]
    batch = build_batch(
        records,
        base_offset=1000,
        compression=codec,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
        is_transactional=True,
        partition_leader_epoch=5,
    )
    theirs = kafka_records.DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.base_offset, theirs.last_offset, theirs.leader_epoch) == (1000, 1003, 5)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (42, 3, 10)
    assert theirs.is_transactional and not theirs.is_control_batch
    assert theirs.max_timestamp == 1_700_000_000_005
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs] == [
        (1000 + i, ts, key, value, h) for i, (key, value, h, ts) in enumerate(COMPRESSIBLE)
    ]


@pytest.mark.parametrize("marker", list(ControlType))
def test_kafka_python_reads_our_transaction_markers(marker):
    batch = build_control_batch(
        marker, producer_id=8, producer_epoch=1, coordinator_epoch=4, base_offset=77, timestamp=5
    )
    theirs = kafka_records.DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert theirs.is_control_batch and theirs.is_transactional
    (record,) = list(theirs)
    assert isinstance(record, kafka_records.ControlRecord)
    assert (record.offset, record.version, record.commit, record.abort) == (
        77,
        0,
        marker is ControlType.COMMIT,
        marker is ControlType.ABORT,
    )


record_tuples = st.lists(st.tuples(optional_bytes, optional_bytes, headers, timestamps), max_size=10)


# The fixture only installs codecs; nothing in it changes between examples.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record_tuples, st.sampled_from(list(CompressionType)))
def test_round_trips_through_both_codecs(kafka_python_codecs, records, codec):
    if not records:
        return  # kafka-python cannot build an empty batch
    theirs = _kafka_python_batch(records, codec)
    ours = decode_batch(theirs)
    assert read_header(theirs).records_count == len(records)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in ours.absolute_records()] == [
        (k, v, tuple(h), ts) for k, v, h, ts in records
    ]
    rebuilt = build_batch(
        [SimpleRecord(r.key, r.value, r.headers, r.timestamp) for r in ours.absolute_records()],
        compression=ours.header.compression,
    )
    assert [
        (r.key, r.value, list(r.headers), r.timestamp) for r in kafka_records.DefaultRecordBatch(rebuilt)
    ] == [(k, v, list(h), ts) for k, v, h, ts in records]
    if ours.header.compression == CompressionType.NONE:
        # Same records, same layout: identical bytes from the magic on (leader epoch: theirs 0, ours -1).
        assert rebuilt[16:] == theirs[16:]
