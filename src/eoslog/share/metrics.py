"""Share-partition metrics (telemetry.Family values), computed on the event loop at scrape time from the
share partitions this broker leads (share/manager.py): per (group, topic, partition) the records acquired
now, the records in flight (from the share-partition start offset to its end offset: Kafka's
SharePartitionMetrics InFlightMessageCount), the records archived since the partition was loaded here, the
start offset, and the lag as DescribeShareGroupOffsets computes it (high watermark - start offset -
records done above it); and of acknowledgements inside transactions (docs/share-groups.md "Step 6"), the
records transactions hold (counted in acquired too) and the transactions past their timeout still holding
records (only the transaction coordinator's abort or commit ends those). server/metrics.py serves them; docs/share-groups.md "Operating share groups"
lists them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from eoslog.log.telemetry import COUNTER, GAUGE, Family

if TYPE_CHECKING:
    from eoslog.share.manager import SharePartitionManager

_GTP = ("group", "topic", "partition")


def share_families(manager: SharePartitionManager, high_watermark: Callable[[str, int], int | None]) -> list[Family]:
    """``high_watermark(topic, partition)``: the local replica's, or None (no lag sample then)."""
    acquired = Family("eoslog_share_partition_acquired_records", GAUGE,
                      "Records of the share partition acquired by a member now (under an acquisition lock)", _GTP)
    in_flight = Family("eoslog_share_partition_in_flight_records", GAUGE,
                       "Records between the share-partition start and end offsets (Kafka's InFlightMessageCount)",
                       _GTP)
    archived = Family("eoslog_share_partition_archived_records", COUNTER,
                      "Records archived (rejected, delivered too often, aborted, not records) since the share "
                      "partition was loaded on this broker or its offsets were altered", _GTP)
    start = Family("eoslog_share_partition_start_offset", GAUGE, "The share-partition start offset", _GTP)
    lag = Family("eoslog_share_partition_lag", GAUGE,
                 "High watermark minus the start offset minus the records done above it: records the group "
                 "has yet to finish", _GTP)
    held = Family("eoslog_share_partition_transaction_held_records", GAUGE,
                  "Records of the share partition acknowledged inside open transactions, held until their marker",
                  _GTP)
    overdue = Family("eoslog_share_partition_overdue_transactions", GAUGE,
                     "Transactions past their timeout still holding records of the share partition (their "
                     "coordinator aborts them)", _GTP)
    for key, topic, value in sorted(manager.loaded(), key=lambda item: (item[0].group_id, item[1], item[0].partition)):
        labels = (key.group_id, topic, key.partition)
        acquired.add(value.acquired_count(), *labels)
        in_flight.add(value.end_offset - value.start_offset, *labels)
        archived.add(value.archived_total, *labels)
        start.add(value.start_offset, *labels)
        held_records, overdue_transactions = manager.transactions(key)
        held.add(held_records, *labels)
        overdue.add(overdue_transactions, *labels)
        found = high_watermark(topic, key.partition)
        if found is not None:
            lag.add(max(found - value.start_offset - value.delivery_complete_count, 0), *labels)
    return [acquired, in_flight, archived, start, lag, held, overdue]
