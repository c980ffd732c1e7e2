"""Executor side of the sink: write one task's rows inside one Kafka transaction, and leave it open.

The transaction is *prepared*, not committed: the task flushes every record to the broker (so nothing
is lost if the task's process dies after reporting success) and returns the transaction's identity —
(transactional_id, producer_id, producer_epoch) — to the driver, whose commit makes the whole
micro-batch visible at once (docs/spark.md).

The producer is never closed or committed here: ``close()`` aborts an open transaction in recent
confluent-kafka releases, and that would throw the prepared work away. The handle is dropped without
ending the transaction; the coordinator keeps it Ongoing until the driver's commit, an abort by name,
or ``transaction.timeout.ms``.

librdkafka does not expose the producer id and epoch through an API, but its statistics JSON carries
them (``eos.producer_id``, ``eos.producer_epoch``), so the task enables statistics at a short interval
and reads the first report emitted after the flush. That report comes from this very producer, so the
identity cannot be a later attempt's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from eoslog.spark import faults

FLUSH_TIMEOUT_S = 120.0
# librdkafka's errors that no retry can fix: a wrong password, certificate or ACL.
_REFUSALS = ("_AUTHENTICATION", "_SSL", "TOPIC_AUTHORIZATION_FAILED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
             "CLUSTER_AUTHORIZATION_FAILED")
STATS_INTERVAL_MS = 20
PRODUCER_DEFAULTS = {
    # Java's default partitioner (murmur2 of the key; null keys spread at random), so rows land on
    # the same partitions as with Spark's Kafka sink.
    "partitioner": "murmur2_random",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task tells the driver. ``transactional_id`` is None when the task wrote nothing."""

    group_name: str
    transactional_id: str | None
    producer_id: int
    producer_epoch: int
    rows: int
    partition_id: int
    attempt: int


def transactional_id(sink_id: str, query_id: str, batch_id: int, partition_id: int) -> str:
    """Deterministic, so a retried attempt of a task re-uses it and fences the failed one."""
    return f"{group_name(sink_id, query_id)}-{batch_id}-{partition_id}"


def colocated_transactional_id(base: str, group: str, partitions: int | None) -> str:
    """``base``, or ``base~k`` for the smallest k that makes it hash to the ``__transaction_state``
    partition of ``group`` (Kafka's partition_for over ``partitions``). On a cluster a transaction group
    is committed by one coordinator, the leader of its partition, so every member must be coordinated
    there too (docs/cluster.md, "Transaction groups on a cluster"); on one node it changes nothing
    that matters. Deterministic, so a retried task finds the same id."""
    if not partitions:
        return base
    from eoslog.protocol.coordinator_partition import partition_for

    target = partition_for(group, partitions)
    candidate, k = base, 0
    while partition_for(candidate, partitions) != target:
        k += 1
        candidate = f"{base}~{k}"
    return candidate


def group_name(sink_id: str, query_id: str) -> str:
    return f"eoslog-sink-{sink_id}-{query_id}"


class _Rows:
    """Turns Arrow record batches into (topic, key, value, partition, headers) columns."""

    def __init__(self, topic_option: str | None) -> None:
        self.topic_option = topic_option

    @staticmethod
    def _bytes_column(batch, name: str) -> list | None:
        import pyarrow as pa

        if name not in batch.schema.names:
            return None
        column = batch.column(batch.schema.get_field_index(name))
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            return [None if v is None else v.encode("utf-8") for v in column.to_pylist()]
        return column.to_pylist()

    def columns(self, batch):
        n = batch.num_rows
        values = self._bytes_column(batch, "value")
        if values is None:
            raise ValueError("the sink needs a 'value' column (binary or string)")
        keys = self._bytes_column(batch, "key") or [None] * n
        names = batch.schema.names
        if self.topic_option is not None:
            topics = [self.topic_option] * n
        elif "topic" in names:
            topics = batch.column(names.index("topic")).to_pylist()
        else:
            raise ValueError("no 'topic' option and no 'topic' column")
        partitions = batch.column(names.index("partition")).to_pylist() if "partition" in names else None
        headers = None
        if "headers" in names:
            headers = [None if h is None else [(e["key"], e["value"]) for e in h]
                       for h in batch.column(names.index("headers")).to_pylist()]
        return topics, keys, values, partitions, headers


def _produce_all(producer, topics, keys, values, partitions, headers) -> None:
    """One produce() per row. The common shape (no partition column, no headers) takes a loop with no
    per-row branching; a full local queue (BufferError) is drained and the row retried."""
    produce = producer.produce
    start, n = 0, len(values)
    while start < n:
        i = start
        try:
            if partitions is None and headers is None:
                for i in range(start, n):
                    produce(topics[i], values[i], keys[i])
            else:
                for i in range(start, n):
                    partition = -1 if partitions is None or partitions[i] is None else partitions[i]
                    if headers is not None and headers[i]:
                        produce(topics[i], values[i], keys[i], partition, headers=headers[i])
                    else:
                        produce(topics[i], values[i], keys[i], partition)
            start = n
        except BufferError:
            start = i  # row i was not queued: drain the full local queue, then retry from it
            producer.poll(0.05)


def _init_transactions(producer, refusals: list, txn_id: str) -> None:
    """init_transactions, in slices so an authentication failure ends it at once instead of at the timeout."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    while True:
        try:
            producer.init_transactions(1.0)
            return
        except KafkaException as exc:
            if refusals:
                raise KafkaException(f"transaction {txn_id}: the broker refused the producer: {refusals[0]}") from exc
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise


def write_transaction(iterator, *, client: dict[str, str], topic_option: str | None, txn_id: str, group: str,
                      partition_id: int, attempt: int, transaction_timeout_ms: int,
                      batch_id: int = 0, writer: str = "librdkafka", security=None) -> SinkCommitMessage:
    """Writes every row of ``iterator`` (Arrow record batches) in the transaction ``txn_id``; never commits.
    ``writer`` native: record batches encoded from Arrow and sent by :mod:`native_producer` (``security``
    is then the job's ClientSecurity); librdkafka: one confluent-kafka produce() a row."""
    if writer == "native":
        return _write_native(iterator, client=client, topic_option=topic_option, txn_id=txn_id, group=group,
                             partition_id=partition_id, attempt=attempt,
                             transaction_timeout_ms=transaction_timeout_ms, batch_id=batch_id, security=security)
    from confluent_kafka import KafkaError, KafkaException, Producer

    refusal_codes = {getattr(KafkaError, name) for name in _REFUSALS}
    rows = _Rows(topic_option)
    producer = None
    errors: list = []
    refusals: list = []  # authentication failures librdkafka reports (it would otherwise retry to the timeout)
    stats: list[tuple[float, dict]] = []
    written = 0
    for batch in iterator:
        if batch.num_rows == 0:
            continue
        topics, keys, values, partitions, headers = rows.columns(batch)
        if producer is None:
            producer = Producer({
                **PRODUCER_DEFAULTS, **client,
                "transactional.id": txn_id,
                "transaction.timeout.ms": transaction_timeout_ms,
                "statistics.interval.ms": STATS_INTERVAL_MS,
                "stats_cb": lambda text: stats.append((time.monotonic(), json.loads(text).get("eos") or {})),
                "on_delivery": lambda err, msg: errors.append(err) if err is not None else None,
                "error_cb": lambda err: refusals.append(err) if err.code() in refusal_codes else None,
            })
            _init_transactions(producer, refusals, txn_id)
            producer.begin_transaction()
        _produce_all(producer, topics, keys, values, partitions, headers)
        written += len(values)
        producer.poll(0)
        if written == len(values) and faults.active():
            producer.flush(FLUSH_TIMEOUT_S)  # so the crash test finds this attempt's first rows in the log
            faults.reached("task-write", batch_id)
        if errors:
            raise RuntimeError(f"transaction {txn_id}: delivery failed: {errors[0]}")
    if producer is None:
        return SinkCommitMessage(group, None, -1, -1, 0, partition_id, attempt)
    left = producer.flush(FLUSH_TIMEOUT_S)
    if left or errors:
        raise RuntimeError(f"transaction {txn_id}: {left} records not delivered; errors: {errors[:3]}")
    flushed_at = time.monotonic()
    deadline = flushed_at + 30
    identity = None
    while identity is None:
        producer.poll(STATS_INTERVAL_MS / 1000)
        for at, eos in stats:
            if at >= flushed_at and eos.get("producer_id", -1) >= 0:
                identity = (eos["producer_id"], eos["producer_epoch"])
        if identity is None and time.monotonic() > deadline:
            raise KafkaException(f"transaction {txn_id}: librdkafka reported no producer id")
    # Keep the handle alive until here, then let it go without ending the transaction (see above).
    return SinkCommitMessage(group, txn_id, identity[0], identity[1], written, partition_id, attempt)


def _write_native(iterator, *, client, topic_option, txn_id, group, partition_id, attempt, transaction_timeout_ms,
                  batch_id, security) -> SinkCommitMessage:
    """The native writer: the same transaction, prepared and left open, as the librdkafka path above."""
    from eoslog.spark.native_producer import NativeProducer

    producer = None
    written = 0
    try:
        for batch in iterator:
            if batch.num_rows == 0:
                continue
            if producer is None:
                producer = NativeProducer(client["bootstrap.servers"], txn_id,
                                          transaction_timeout_ms=transaction_timeout_ms, security=security,
                                          timeout_s=FLUSH_TIMEOUT_S)
                producer.init()
            first = written == 0
            written += producer.send(batch, topic_option)
            if first and faults.active():
                producer.flush()  # so the crash test finds this attempt's first rows in the log
                faults.reached("task-write", batch_id)
        if producer is None:
            return SinkCommitMessage(group, None, -1, -1, 0, partition_id, attempt)
        producer.flush()
        return SinkCommitMessage(group, txn_id, producer.producer_id, producer.producer_epoch, written,
                                 partition_id, attempt)
    finally:
        if producer is not None:
            producer.close()  # closes sockets only: the transaction stays open for the driver
