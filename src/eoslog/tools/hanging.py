"""Which open transactions hang, judged from what the partitions and the coordinators say (no I/O): the
rule `eoslog transactions find-hanging` and the console's transactions page share.

A partition's open transaction hangs when its coordinator does not have that producer Ongoing over
that partition (only an ABORT marker written to the partition ends it then), or when it has been open
longer than ``max_age_ms`` (transaction.max.timeout.ms: no legitimate transaction is older).
"""

from __future__ import annotations

TopicPartition = tuple[str, int]


def hanging_transactions(active: dict[TopicPartition, list], ongoing: set[tuple[int, str, int]],
                         max_age_ms: int, now_ms: int, checking: frozenset[tuple[int, str, int]] = frozenset()
                         ) -> list[dict]:
    """``active``: partition -> its DescribeProducers producer states; ``ongoing``: (producer id, topic,
    partition) for every transaction a coordinator describes as open; ``checking``: those of them that are
    eoslog check-back transactions being checked, open past any timeout on purpose (their producer group
    decides; docs/transactions.md), so never hanging by age. Entries sorted by partition and producer id."""
    hanging = []
    for (topic, partition), producers in active.items():
        for producer in producers:
            if producer.current_txn_start_offset < 0:
                continue
            covered = (producer.producer_id, topic, partition) in ongoing
            too_old = (producer.last_timestamp >= 0 and now_ms - producer.last_timestamp > max_age_ms
                       and (producer.producer_id, topic, partition) not in checking)
            if not covered or too_old:
                hanging.append({"topic": topic, "partition": partition, "producer_id": producer.producer_id,
                                "producer_epoch": producer.producer_epoch,
                                "start_offset": producer.current_txn_start_offset,
                                "coordinator_epoch": producer.coordinator_epoch,
                                "last_timestamp": producer.last_timestamp})
    return sorted(hanging, key=lambda h: (h["topic"], h["partition"], h["producer_id"]))
