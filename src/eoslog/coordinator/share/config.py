"""Broker settings the share coordinator reads, with Kafka's names and defaults (ShareCoordinatorConfig)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    # share.coordinator.snapshot.update.records.per.snapshot: how many ShareUpdate records a share
    # partition gets after a ShareSnapshot before a write is a snapshot again (Kafka allows 0 to 500; 0
    # writes only snapshots).
    snapshot_update_records_per_snapshot: int = 500
    # share.coordinator.state.topic.prune.interval.ms: how often the records every share partition has
    # a newer snapshot of are deleted from the __share_group_state partitions led here.
    state_topic_prune_interval_ms: int = 5 * 60 * 1000
    # share.coordinator.cold.partition.snapshot.interval.ms: a share partition whose last snapshot is this
    # old gets a new one, so that an idle share partition does not hold the pruning back.
    cold_partition_snapshot_interval_ms: int = 5 * 60 * 1000

    def __post_init__(self) -> None:
        if not 0 <= self.snapshot_update_records_per_snapshot <= 500:
            raise ValueError("share.coordinator.snapshot.update.records.per.snapshot must be between 0 and 500, "
                             f"got {self.snapshot_update_records_per_snapshot}")
