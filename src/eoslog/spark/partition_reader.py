"""Executor side of the source: read one partition's offset range into Arrow record batches.

Runs inside a Spark task on a pickled :class:`OffsetRange`; everything it needs travels in that object.
The consumer is assigned explicit offsets (``assign()``, no subscription, no group commits: Spark's
checkpoint owns the positions).

Two read paths give the same rows. For plain-text connections :mod:`fetch_reader` sends Fetch requests
itself and decodes record batches straight into Arrow columns (:mod:`record_columns`); otherwise (TLS,
SASL and other librdkafka settings), or with ``eoslog.reader=librdkafka``, a confluent-kafka Consumer
reads. The rest of this docstring is about the latter.

When to stop: with read_committed, control records and aborted records occupy offsets that are never
returned, so counting records would wait forever for offsets that do not come. The range is done when
the consumer's *position* reaches ``until`` — seen as a message at or beyond ``until``, as the
partition-EOF event at or beyond it, or as ``position()`` itself — whichever comes first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from pyspark.sql.datasource import InputPartition

from eoslog.spark.errors import DataLossError
from eoslog.spark.schema import NO_TIMESTAMP_TYPE, arrow_schema

# Rows per Arrow batch handed to Spark, and per consume() call.
BATCH_ROWS = 20_000


@dataclass
class OffsetRange(InputPartition):
    """One task's work: [from_offset, until_offset) of one partition. Picklable on purpose."""

    client: dict[str, str]
    topic: str
    partition: int
    from_offset: int
    until_offset: int
    isolation_level: str
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int = 120_000
    reader: str = "auto"  # "auto": direct Fetch when the client settings allow it; "librdkafka"
    typed_value: object = None  # avro_values.ValueSchema: decode the value column into a struct
    schema_json: str | None = None  # the declared schema, when its value column is typed
    value: object = field(default=None, repr=False)  # InputPartition's own attribute, unused


def consumer_config(r: OffsetRange) -> dict:
    return {
        **r.client,
        # librdkafka's consumer insists on a group id; nothing is ever committed under it.
        "group.id": "eoslog-spark-source",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "isolation.level": r.isolation_level,
        # "error" makes a missing start offset visible instead of silently jumping (failOnDataLoss).
        "auto.offset.reset": "error" if r.fail_on_data_loss else "earliest",
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 8_388_608,
        "queued.min.messages": 200_000,
    }


def _to_batch(messages: list, include_headers: bool):
    import pyarrow as pa

    n = len(messages)
    keys = [m.key() for m in messages]
    values = [m.value() for m in messages]
    offsets = [m.offset() for m in messages]
    stamps = [m.timestamp() for m in messages]
    topic = messages[0].topic()
    partition = messages[0].partition()
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array([ts * 1000 if kind else None for kind, ts in stamps], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")),
        pa.array([kind - 1 if kind else NO_TIMESTAMP_TYPE for kind, _ in stamps], pa.int32()),
    ]
    schema = arrow_schema(include_headers)
    if include_headers:
        headers = []
        for m in messages:
            h = m.headers()
            # Spark's Kafka source gives null, not an empty array, for a record without headers.
            headers.append([{"key": k, "value": v} for k, v in h] if h else None)
        columns.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _columns_to_batch(r: OffsetRange, c):
    import pyarrow as pa

    n = len(c)
    schema = arrow_schema(r.include_headers)
    columns = [
        c.keys,
        c.values,
        pa.repeat(pa.scalar(r.topic, pa.string()), n),
        pa.array(np.full(n, r.partition, np.int32)),
        pa.array(c.offsets),
        pa.array(c.timestamps * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(c.timestamp_types),
    ]
    if r.include_headers:
        headers_type = schema.field("headers").type
        if c.headers is None:
            columns.append(pa.nulls(n, headers_type))
        else:
            # Spark's Kafka source gives null, not an empty array, for a record without headers.
            columns.append(pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in c.headers],
                                    headers_type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(r: OffsetRange):
    """Yields Arrow record batches with every record of ``r`` the isolation level lets through."""
    if r.typed_value is None:
        yield from _read_range(r)
        return
    import pyarrow as pa

    from eoslog.spark.avro_values import decode
    from eoslog.spark.schema import typed_arrow_schema

    schema = typed_arrow_schema(r.schema_json)
    value_type = schema.field("value").type
    for batch in _read_range(r):
        values = decode(r.typed_value, batch.column(1).to_pylist(), batch.column(4), r.topic,
                        r.partition, value_type)
        columns = batch.columns
        columns[1] = values
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _read_range(r: OffsetRange):
    from eoslog.spark import fetch_reader

    if r.until_offset <= r.from_offset:
        return
    if r.reader != "librdkafka" and fetch_reader.can_read_directly(r.client):
        fetcher = fetch_reader.PartitionFetcher(
            r.client["bootstrap.servers"], r.topic, r.partition, r.from_offset, r.until_offset,
            r.isolation_level == "read_committed", r.fail_on_data_loss, r.poll_timeout_ms,
            client_id=r.client.get("client.id", fetch_reader.CLIENT_ID))
        for columns in fetcher.columns():
            yield _columns_to_batch(r, columns)
        return
    yield from read_range_librdkafka(r)


def read_range_librdkafka(r: OffsetRange):
    """The confluent-kafka path of :func:`read_range`."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    if r.until_offset <= r.from_offset:
        return
    consumer = Consumer(consumer_config(r))
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.from_offset)])
        tp = [TopicPartition(r.topic, r.partition)]
        deadline = time.monotonic() + r.poll_timeout_ms / 1000
        done = False
        while not done:
            messages = consumer.consume(BATCH_ROWS, 0.5)
            rows = []
            for m in messages:
                error = m.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= r.until_offset:
                            done = True
                            break
                        continue
                    if error.code() == KafkaError._AUTO_OFFSET_RESET or error.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                        raise DataLossError(
                            f"{r.topic}-{r.partition}: offsets from {r.from_offset} are no longer in the log "
                            f"({error.str()}); set failOnDataLoss=false to skip them")
                    if error.retriable() or not error.fatal():
                        continue  # librdkafka reconnects and refetches by itself
                    raise RuntimeError(f"reading {r.topic}-{r.partition}: {error.str()}")
                if m.offset() >= r.until_offset:
                    done = True
                    break
                rows.append(m)
            if rows:
                yield _to_batch(rows, r.include_headers)
                deadline = time.monotonic() + r.poll_timeout_ms / 1000
            if not done:
                position = consumer.position(tp)[0].offset
                if position >= r.until_offset:
                    done = True
                elif time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{r.topic}-{r.partition}: no progress towards offset {r.until_offset} for "
                        f"{r.poll_timeout_ms} ms (position {position})")
    finally:
        consumer.close()
