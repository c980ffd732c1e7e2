"""The native sink writer's encode core: Arrow rows -> RecordBatch v2, checked with the project's own
record decoder, and its partitioning checked against librdkafka's murmur2_random on a real broker."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.records.batch import decode_batch
from eoslog.records.header import TRANSACTIONAL_BIT
from eoslog.spark import record_encoder as enc


def _encode(keys, values, headers=None, **kwargs):
    records = enc.encode_records(keys, values, headers)
    args = {"timestamp_ms": 1_700_000_000_123, "producer_id": 42, "producer_epoch": 3, "base_sequence": 17,
            "transactional": True, **kwargs}
    return enc.encode_batch(records, len(values), **args)


def test_a_batch_decodes_field_by_field_with_nulls_and_headers():
    keys = pa.array([b"k0", None, b"", b"k" * 300, None], pa.binary())
    values = pa.array([b"v0", b"v1", None, b"x" * 70_000, b""], pa.binary())
    headers = [enc.encode_headers(h) for h in (
        [{"key": "a", "value": b"1"}, {"key": "\u00e9", "value": None}], None, [], [{"key": "b", "value": b""}],
        None)]
    batch = decode_batch(_encode(keys, values, headers))  # verifies the CRC
    h = batch.header
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (42, 3, 17, 5)
    assert h.attributes & TRANSACTIONAL_BIT and h.last_offset_delta == 4 and h.magic == 2
    assert h.base_timestamp == h.max_timestamp == 1_700_000_000_123
    assert [r.offset_delta for r in batch.records] == [0, 1, 2, 3, 4]
    assert [r.timestamp_delta for r in batch.records] == [0] * 5
    assert [r.key for r in batch.records] == keys.to_pylist()
    assert [r.value for r in batch.records] == values.to_pylist()
    assert [tuple(r.headers) for r in batch.records] == [
        (("a", b"1"), ("\u00e9", None)), (), (), (("b", b""),), ()]


def test_a_non_transactional_batch_has_no_transactional_bit():
    batch = decode_batch(_encode(pa.array([None], pa.binary()), pa.array([b"v"]), transactional=False,
                                 producer_id=5, producer_epoch=0, base_sequence=0))
    assert not batch.header.attributes & TRANSACTIONAL_BIT
    assert batch.records[0].value == b"v"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=300)),
                min_size=1, max_size=200))
def test_round_trip_any_rows(rows):
    keys = pa.array([k for k, _ in rows], pa.binary())
    values = pa.array([v for _, v in rows], pa.binary())
    batch = decode_batch(_encode(keys, values))
    assert [(r.key, r.value) for r in batch.records] == rows


def test_sliced_and_string_columns_encode_what_they_show():
    rb = pa.RecordBatch.from_pydict({"key": pa.array(["a", None, "c\u00e9", "d"]),
                                     "value": pa.array(["1", "2", "3", None])}).slice(1, 3)
    columns = enc.sink_columns(rb, "t")
    batch = decode_batch(_encode(columns.keys, columns.values))
    assert [(r.key, r.value) for r in batch.records] == [(None, b"2"), ("c\u00e9".encode(), b"3"), (b"d", None)]


@given(st.binary(max_size=64))
def test_vectorised_murmur2_equals_the_scalar_reference(key):
    keys = pa.array([key, key[:1], key[:2], key[:3], None], pa.binary())
    hashes = enc.murmur2(keys)
    assert hashes[:4].tolist() == [enc.murmur2_bytes(k) for k in (key, key[:1], key[:2], key[:3])]


def test_murmur2_matches_kafkas_known_values():
    # From Kafka's UtilsTest.testMurmur2 (the Java client's own expectations).
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829, b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             bytes([ord("a"), ord("b"), ord("c")]): 479470107}
    for key, expected in cases.items():
        assert enc.murmur2_bytes(key) == expected & 0xFFFFFFFF
        assert int(enc.murmur2(pa.array([key]))[0]) == expected & 0xFFFFFFFF


def test_partitions_column_wins_then_keys_then_random():
    rb = pa.RecordBatch.from_pydict({"key": pa.array([b"21", b"21", None, None], pa.binary()),
                                     "value": pa.array([b"v"] * 4), "partition": pa.array([None, 2, 1, None],
                                                                                        pa.int32())})
    columns = enc.sink_columns(rb, "t")
    chosen = enc.choose_partitions(columns, lambda topic: 5, np.random.default_rng(0))
    assert chosen[0] == ((-973932308 & 0x7FFFFFFF) % 5) and chosen[1] == 2 and chosen[2] == 1
    assert 0 <= chosen[3] < 5
    spread = enc.choose_partitions(enc.sink_columns(pa.RecordBatch.from_pydict(
        {"value": pa.array([b"v"] * 1000)}), "t"), lambda topic: 4, np.random.default_rng(1))
    assert set(spread.tolist()) == {0, 1, 2, 3}  # null keys are spread


def test_grouping_keeps_row_order_per_topic_and_partition():
    rb = pa.RecordBatch.from_pydict({"topic": ["a", "b", "a", "b", "a"], "value": [b"0", b"1", b"2", b"3", b"4"],
                                     "partition": pa.array([1, 0, 0, 0, 1], pa.int32())})
    columns = enc.sink_columns(rb, None)
    groups = enc.group_by_partition(columns, enc.choose_partitions(columns, lambda t: 2, np.random.default_rng()))
    assert {(g.topic, g.partition): g.values.to_pylist() for g in groups} == {
        ("a", 0): [b"2"], ("a", 1): [b"0", b"4"], ("b", 0): [b"1", b"3"]}


def test_large_partitions_split_into_batches_under_the_limit():
    n = 3000
    rows = enc.PartitionRows("t", 0, pa.array([str(i).encode() for i in range(n)]), pa.array([b"x" * 1000] * n),
                             None)
    ranges = enc.row_ranges(rows, max_batch_bytes=256 * 1024)
    assert ranges[0][0] == 0 and ranges[-1][1] == n and len(ranges) > 1
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    for start, end in ranges:
        data = _encode(rows.keys.slice(start, end - start), rows.values.slice(start, end - start))
        assert len(data) <= 256 * 1024


def test_keyed_rows_land_where_librdkafka_puts_them(broker, kafka, topic_name):
    """The same keys produced by confluent-kafka with murmur2_random land on the partitions we choose."""
    partitions = 7
    kafka.create(topic_name, partitions=partitions)
    keys = [f"key-{i}".encode() for i in range(200)] + [b"", b"21", bytes(range(256))]
    kafka.produce(topic_name, [(k, b"v", None, None) for k in keys])
    landed = {m.key(): m.partition() for m in kafka.read_all(topic_name, expect=len(keys))}
    columns = enc.sink_columns(pa.RecordBatch.from_pydict({"key": pa.array(keys, pa.binary()),
                                                           "value": pa.array([b"v"] * len(keys))}), topic_name)
    ours = enc.choose_partitions(columns, lambda topic: partitions, np.random.default_rng())
    assert {k: int(p) for k, p in zip(keys, ours)} == landed


@pytest.mark.parametrize("bad", [{"key": [b"k"]}, {"value": [b"v"]}])
def test_bad_schemas_are_refused(bad):
    with pytest.raises(ValueError):
        enc.sink_columns(pa.RecordBatch.from_pydict(bad), None if "value" in bad else "t")
