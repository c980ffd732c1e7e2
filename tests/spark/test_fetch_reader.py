"""The source's direct Fetch reader against its librdkafka reader, on a real (embedded) broker, no Spark.

Both paths of :func:`partition_reader.read_range` must give equal Arrow batches for the same range:
every column, null keys, headers, every compression codec, aborted and committed transactions with
their markers, an open transaction bounding read_committed at the LSO, and ranges cut inside batches.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from eoslog.spark import fetch_reader
from eoslog.spark.errors import DataLossError
from eoslog.spark.partition_reader import OffsetRange, read_range


def _read(bootstrap, topic, start, until, isolation, reader, headers=True, fail_on_data_loss=True):
    r = OffsetRange(client={"bootstrap.servers": bootstrap}, topic=topic, partition=0, from_offset=start,
                    until_offset=until, isolation_level=isolation, fail_on_data_loss=fail_on_data_loss,
                    include_headers=headers, poll_timeout_ms=20_000, reader=reader)
    batches = list(read_range(r))
    return pa.Table.from_batches(batches, schema=batches[0].schema) if batches else None


def _end(kafka, topic, isolation):
    level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    futures = kafka.admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()}, isolation_level=level)
    return next(iter(futures.values())).result(30).offset


def _produce(bootstrap, topic, count, compression="none", tag=b"", headers=False):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": compression})
    for i in range(count):
        p.produce(topic, b"v" * (i % 300) + tag, None if i % 7 == 0 else str(i).encode(), partition=0,
                  headers=[("h", str(i).encode()), ("n", None)] if headers and i % 3 else None)
    assert p.flush(30) == 0


@pytest.fixture(scope="module")
def mixed_topic(broker):
    """One partition holding plain, compressed and transactional data, and an open transaction at the end."""
    from .kafka_helpers import Kafka

    kafka = Kafka(broker.bootstrap)
    topic = kafka.create("fetch-mixed")
    b = broker.bootstrap
    _produce(b, topic, 500, headers=True)
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        _produce(b, topic, 300, compression=codec, tag=codec.encode())
    kafka.produce(topic, [(b"t", b"committed-%d" % i, None, 0) for i in range(50)], transactional_id="tx-a")
    kafka.produce(topic, [(b"t", b"aborted-%d" % i, None, 0) for i in range(50)], transactional_id="tx-b",
                  commit=False)
    _produce(b, topic, 100)
    kafka.produce(topic, [(b"t", b"again-%d" % i, None, 0) for i in range(20)], transactional_id="tx-b")
    open_txn = kafka.produce(topic, [(b"t", b"open", None, 0)], transactional_id="tx-open", commit=None)
    _produce(b, topic, 10)  # after the open transaction: beyond the LSO
    yield kafka, topic
    open_txn.abort_transaction(30)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_direct_reader_equals_librdkafka_on_mixed_data(broker, mixed_topic, isolation):
    kafka, topic = mixed_topic
    end = _end(kafka, topic, isolation)
    direct = _read(broker.bootstrap, topic, 0, end, isolation, "auto")
    reference = _read(broker.bootstrap, topic, 0, end, isolation, "librdkafka")
    assert direct.num_rows == reference.num_rows > 1_700
    assert direct.equals(reference)
    values = direct.column("value").to_pylist()
    assert (b"aborted-0" in values) == (isolation == "read_uncommitted")
    assert (b"open" in values) == (isolation == "read_uncommitted")
    assert b"again-19" in values


def test_direct_reader_equals_librdkafka_on_ranges_cut_inside_batches(broker, mixed_topic):
    kafka, topic = mixed_topic
    end = _end(kafka, topic, "read_committed")
    for start, until in [(1, 2), (123, 777), (499, end - 3), (end - 25, end)]:
        direct = _read(broker.bootstrap, topic, start, until, "read_committed", "auto", headers=False)
        reference = _read(broker.bootstrap, topic, start, until, "read_committed", "librdkafka", headers=False)
        assert (direct is None) == (reference is None)
        if direct is not None:
            assert direct.equals(reference), (start, until)
            offsets = direct.column("offset").to_pylist()
            assert offsets[0] >= start and offsets[-1] < until


def test_direct_reader_is_used_only_for_plain_connections():
    assert fetch_reader.can_read_directly({"bootstrap.servers": "h:1", "client.id": "x"})
    assert not fetch_reader.can_read_directly({"bootstrap.servers": "h:1", "security.protocol": "ssl"})


def test_direct_reader_reports_data_loss_or_skips_it(broker, kafka, topic_name):
    kafka.create(topic_name)
    _produce(broker.bootstrap, topic_name, 30)
    futures = kafka.admin.delete_records([TopicPartition(topic_name, 0, 10)])
    for f in futures.values():
        f.result(30)
    with pytest.raises(DataLossError):
        _read(broker.bootstrap, topic_name, 0, 30, "read_committed", "auto")
    skipped = _read(broker.bootstrap, topic_name, 0, 30, "read_committed", "auto", fail_on_data_loss=False)
    assert skipped.column("offset").to_pylist() == list(range(10, 30))
    assert skipped.equals(_read(broker.bootstrap, topic_name, 0, 30, "read_committed", "librdkafka",
                                fail_on_data_loss=False))
