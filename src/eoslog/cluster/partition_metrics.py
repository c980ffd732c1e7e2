"""Metrics of the partitions on this broker (telemetry.Family values), read on the event loop at scrape
time: per-topic traffic, per-partition log size, offsets, open and hanging transactions, producer ids.

Kafka keeps most of these as per-partition gauges (kafka.log:type=Log,...) and per-topic meters
(kafka.server:type=BrokerTopicMetrics,...). Here the meters are the counters Partition bumps; the rest is
computed from state the partition already holds, so the produce and fetch paths pay nothing extra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from eoslog.log.telemetry import COUNTER, GAUGE, Family

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition

# (producer_id, topic, partition) -> True when the transaction coordinator has that producer's
# transaction open over the partition, False when it knows it does not, None when it cannot tell (the
# producer's coordinator is another broker).
CoordinatorKnows = Callable[[int, str, int], "bool | None"]

_TP = ("topic", "partition")


def partition_families(partitions: Iterable[Partition], now_ms: int, late_after_ms: int,
                       coordinator_knows: CoordinatorKnows,
                       being_checked: Callable[[int], bool] = lambda producer_id: False) -> list[Family]:
    """``late_after_ms``: transaction.max.timeout.ms; an open transaction older than that is late, as in
    Kafka's PartitionsWithLateTransactionsCount (KIP-664). ``being_checked``: whether a producer's
    transaction is an eoslog check-back transaction its coordinator (this broker) is checking: open past
    any timeout on purpose, so not hanging by age (docs/transactions.md)."""
    bytes_in = Family("kafka_server_brokertopicmetrics_bytesin", COUNTER,
                      "Bytes of record batches appended by producers (BytesInPerSec)", ("topic",))
    messages_in = Family("kafka_server_brokertopicmetrics_messagesin", COUNTER,
                         "Records appended by producers (MessagesInPerSec)", ("topic",))
    bytes_out = Family("kafka_server_brokertopicmetrics_bytesout", COUNTER,
                       "Bytes of record batches sent to consumers (BytesOutPerSec)", ("topic",))
    replication_in = Family("kafka_server_brokertopicmetrics_replicationbytesin", COUNTER,
                            "Bytes appended from the leader as a follower (ReplicationBytesInPerSec)", ("topic",))
    replication_out = Family("kafka_server_brokertopicmetrics_replicationbytesout", COUNTER,
                             "Bytes sent to followers (ReplicationBytesOutPerSec)", ("topic",))
    size = Family("kafka_log_log_size", GAUGE, "Bytes of the partition's log segments (Log Size)", _TP)
    segments = Family("kafka_log_log_numlogsegments", GAUGE, "Segments of the partition's log", _TP)
    start = Family("kafka_log_log_logstartoffset", GAUGE, "Log start offset", _TP)
    end = Family("kafka_log_log_logendoffset", GAUGE, "Log end offset", _TP)
    high_watermark = Family("eoslog_partition_high_watermark", GAUGE, "High watermark", _TP)
    last_stable = Family("eoslog_partition_last_stable_offset", GAUGE, "Last stable offset", _TP)
    lso_lag = Family("eoslog_partition_last_stable_offset_lag", GAUGE,
                     "High watermark minus last stable offset: what read_committed consumers cannot read yet", _TP)
    open_txns = Family("eoslog_partition_open_transactions", GAUGE,
                       "Transactions open on the partition (no marker yet)", _TP)
    oldest_txn = Family("eoslog_partition_oldest_open_transaction_age_seconds", GAUGE,
                        "Age of the oldest open transaction by its producer's last batch timestamp (0: none)", _TP)
    hanging = Family("eoslog_partition_hanging_transactions", GAUGE,
                     "Open transactions the coordinator does not have open over this partition, or older than "
                     "transaction.max.timeout.ms: only an ABORT marker ends them (eoslog transactions find-hanging)",
                     _TP)
    producers = Family("eoslog_partition_producer_ids", GAUGE, "Producer ids with state on the partition", _TP)
    late_partitions = Family("kafka_server_replicamanager_partitionswithlatetransactionscount", GAUGE,
                             "Partitions with a transaction open longer than transaction.max.timeout.ms")
    producer_total = Family("kafka_server_replicamanager_produceridcount", GAUGE,
                            "Producer ids with state, over every partition on this broker")
    per_topic: dict[str, list[int]] = {}
    late = producer_count = 0
    for partition in partitions:
        topic, index = partition.topic, partition.index
        totals = per_topic.setdefault(topic, [0, 0, 0, 0, 0])
        totals[0] += partition.bytes_in
        totals[1] += partition.messages_in
        totals[2] += partition.bytes_out
        totals[3] += partition.replication_bytes_in
        totals[4] += partition.replication_bytes_out
        log = partition.log
        size.add(log.size, topic, index)
        segments.add(len(log.segments), topic, index)
        start.add(partition.log_start_offset, topic, index)
        end.add(partition.log_end_offset, topic, index)
        hw, lso = partition.high_watermark, partition.last_stable_offset
        high_watermark.add(hw, topic, index)
        last_stable.add(lso, topic, index)
        lso_lag.add(hw - lso, topic, index)
        ongoing = partition.producer_state.ongoing_transactions()
        open_txns.add(len(ongoing), topic, index)
        oldest = max((now_ms - txn.last_timestamp for txn in ongoing if txn.last_timestamp >= 0), default=0)
        oldest_txn.add(max(oldest, 0) / 1000, topic, index)
        stuck = sum(1 for txn in ongoing
                    if coordinator_knows(txn.producer_id, topic, index) is False
                    or (txn.last_timestamp >= 0 and now_ms - txn.last_timestamp > late_after_ms
                        and not being_checked(txn.producer_id)))
        hanging.add(stuck, topic, index)
        late += oldest > late_after_ms
        count = len(partition.producer_state)
        producer_count += count
        producers.add(count, topic, index)
    for topic, (b_in, m_in, b_out, r_in, r_out) in sorted(per_topic.items()):
        bytes_in.add(b_in, topic)
        messages_in.add(m_in, topic)
        bytes_out.add(b_out, topic)
        replication_in.add(r_in, topic)
        replication_out.add(r_out, topic)
    late_partitions.add(late)
    producer_total.add(producer_count)
    return [bytes_in, messages_in, bytes_out, replication_in, replication_out, size, segments, start, end,
            high_watermark, last_stable, lso_lag, open_txns, oldest_txn, hanging, producers, late_partitions,
            producer_total]
