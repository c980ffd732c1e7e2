"""The Spark sink's native writer: a task's transaction fed whole Arrow batches (docs/spark.md, "The
native writer"). Each batch of sink rows is encoded straight into RecordBatch v2 bytes
(spark/record_encoder.py) and sent by eoslog's own producer (eoslog/client/producer.py), which does the
protocol: coordinator, InitProducerId, AddPartitionsToTxn, in-flight bound, retries with the same bytes.
"""

from __future__ import annotations

import numpy as np

from eoslog.client.producer import Batch, Producer, ProducerError
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import now_ms
from eoslog.spark import record_encoder

__all__ = ["NativeProducer", "ProducerError"]


class NativeProducer(Producer):
    """One task's producer: :class:`Producer` plus sending Arrow batches of sink rows."""

    _rng: np.random.Generator | None = None  # for rows without key or partition, made on the first send

    def send(self, batch, topic_option: str | None) -> int:
        """Encodes one Arrow record batch of sink rows and sends it; returns its row count. Answers are
        collected as the in-flight bound requires, and all of them by :meth:`flush`."""
        if self._rng is None:
            self._rng = np.random.default_rng()
        columns = record_encoder.sink_columns(batch, topic_option)
        if len(columns) == 0:
            return 0
        for topic in ([topic_option] if columns.topics is None else set(columns.topics)):
            self._partition_count(topic)
        partitions = record_encoder.choose_partitions(columns, self._partition_count, self._rng)
        groups = record_encoder.group_by_partition(columns, partitions)
        for group in groups:
            if group.partition >= self._partition_counts[group.topic]:
                raise ProducerError(f"partition {group.partition} of {group.topic}",
                                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self._add_partitions([(g.topic, g.partition) for g in groups])
        timestamp = now_ms()
        rounds: list[list[Batch]] = []  # round k: the k-th batch of every partition
        for group in groups:
            tp = (group.topic, group.partition)
            for k, (start, end) in enumerate(record_encoder.row_ranges(group)):
                count = end - start
                headers = None if group.headers is None else group.headers[start:end]
                records = record_encoder.encode_records(group.keys.slice(start, count),
                                                        group.values.slice(start, count), headers)
                sequence = self._sequences.get(tp, 0)
                self._sequences[tp] = (sequence + count) & 0x7FFFFFFF  # Kafka's sequences wrap at int32
                batch_bytes = record_encoder.encode_batch(
                    records, count, timestamp_ms=timestamp, producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch, base_sequence=sequence,
                    transactional=self.transactional_id is not None)
                if k == len(rounds):
                    rounds.append([])
                rounds[k].append(Batch(group.topic, group.partition, sequence, count, batch_bytes))
        for batches in rounds:
            by_leader: dict[int, list[Batch]] = {}
            for b in batches:
                by_leader.setdefault(self._leaders[(b.topic, b.partition)], []).append(b)
            for node, leader_batches in by_leader.items():
                self._send(node, leader_batches)
        return len(columns)
