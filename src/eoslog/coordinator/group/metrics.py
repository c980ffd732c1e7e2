"""Consumer-group metrics (telemetry.Family values), computed on the event loop at scrape time: groups
per state (Kafka's GroupMetadataManager NumGroups* gauges) and each group's committed offsets and lag per
partition, to the high watermark (what kafka_exporter calls ``kafka_consumergroup_lag``) and to the last
stable offset (what a read_committed consumer can still read)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from eoslog.coordinator.group.state import GroupState
from eoslog.log.telemetry import GAUGE, Family

if TYPE_CHECKING:
    from eoslog.coordinator.group.coordinator import GroupCoordinator

# (topic, partition) -> (high watermark, last stable offset), or None when no replica is on this broker.
PartitionEnds = Callable[[str, int], "tuple[int, int] | None"]

_GTP = ("group", "topic", "partition")


def group_families(coordinator: GroupCoordinator, ends: PartitionEnds) -> list[Family]:
    states = Family("kafka_coordinator_group_groupmetadatamanager_numgroups", GAUGE,
                    "Consumer groups coordinated here, by state (NumGroupsStable, NumGroupsEmpty, ...)", ("state",))
    offsets_count = Family("kafka_coordinator_group_groupmetadatamanager_numoffsets", GAUGE,
                           "Committed offsets held by this coordinator")
    current = Family("kafka_consumergroup_current_offset", GAUGE, "The group's committed offset", _GTP)
    lag = Family("kafka_consumergroup_lag", GAUGE,
                 "High watermark minus the committed offset (never below 0)", _GTP)
    lag_stable = Family("kafka_consumergroup_lag_stable", GAUGE,
                        "Last stable offset minus the committed offset (never below 0): what a read_committed "
                        "consumer has left to read", _GTP)
    members = Family("kafka_consumergroup_members", GAUGE, "Members of the group", ("group",))
    by_state = dict.fromkeys((s.kafka_name for s in GroupState if s is not GroupState.DEAD), 0)
    for group_id, group in coordinator.groups.items():
        if group.state is GroupState.DEAD:
            continue
        by_state[group.state.kafka_name] += 1
        members.add(len(group.members), group_id)
    for name, count in by_state.items():
        states.add(count, name)
    total = 0
    for group_id in sorted(coordinator.offsets.groups()):
        for tp, committed in coordinator.offsets.committed(group_id).items():
            total += 1
            current.add(committed.offset, group_id, tp.topic, tp.partition)
            found = ends(tp.topic, tp.partition)
            if found is None:
                continue
            high_watermark, last_stable = found
            lag.add(max(high_watermark - committed.offset, 0), group_id, tp.topic, tp.partition)
            lag_stable.add(max(last_stable - committed.offset, 0), group_id, tp.topic, tp.partition)
    offsets_count.add(total)
    return [states, offsets_count, members, current, lag, lag_stable]
