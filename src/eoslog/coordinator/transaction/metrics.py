"""Transaction-coordinator metrics (telemetry.Family values), computed on the event loop at scrape time:
transactional ids per state and the oldest ongoing transaction; and the question the partition metrics
ask to call an open transaction hanging (cluster/partition_metrics.py). The check-back counters are the
check-back extension's (coordinator/check_back/metrics.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.coordinator.transaction.state import TransactionState
from eoslog.log.telemetry import GAUGE, Family

if TYPE_CHECKING:
    from eoslog.coordinator.transaction.shard import TransactionShard

# States in which the coordinator has the transaction open over its partitions (markers not all written).
# Checking is open too: a check-back transaction waiting for its group is not hanging.
_OPEN = (TransactionState.ONGOING, TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT,
         TransactionState.PREPARE_EPOCH_FENCE, TransactionState.CHECKING)


def transaction_families(coordinator: TransactionShard, now_ms: int) -> list[Family]:
    states = Family("eoslog_transaction_coordinator_transactional_ids", GAUGE,
                    "Transactional ids coordinated here, by state (Ongoing is an open transaction)", ("state",))
    oldest = Family("eoslog_transaction_coordinator_oldest_ongoing_seconds", GAUGE,
                    "Age of the oldest transaction in Ongoing or Prepare* (0: none)")
    counts = dict.fromkeys((s.kafka_name for s in TransactionState), 0)
    age = 0
    for metadata in coordinator.all_metadata():
        counts[metadata.state.kafka_name] += 1
        if metadata.state in _OPEN and metadata.txn_start_timestamp >= 0:
            age = max(age, now_ms - metadata.txn_start_timestamp)
    for name, count in counts.items():
        states.add(count, name)
    oldest.add(age / 1000)
    return [states, oldest]


def being_checked(coordinator: TransactionShard) -> frozenset[int]:
    """Producer ids whose check-back transaction is Checking here (its group decides, not a timeout)."""
    return frozenset(m.producer_id for m in coordinator.all_metadata() if m.state is TransactionState.CHECKING)


def open_over(coordinator: TransactionShard) -> dict[int, frozenset[tuple[str, int]]]:
    """producer id -> the partitions its coordinator (this broker) has its transaction open over."""
    return {metadata.producer_id: frozenset((tp[0], tp[1]) for tp in metadata.topic_partitions)
            for metadata in coordinator.all_metadata() if metadata.state in _OPEN}
