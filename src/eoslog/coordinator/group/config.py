"""Broker settings the group coordinator reads, with Kafka's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupConfig:
    # group.initial.rebalance.delay.ms: an Empty group waits this long (extended by the same amount
    # while new members keep arriving, up to the rebalance timeout) before its first generation, so a
    # fleet of consumers starting together costs one rebalance instead of one each. 0 disables it.
    initial_rebalance_delay_ms: int = 3000
    # group.min.session.timeout.ms / group.max.session.timeout.ms
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    # group.max.size; None = unbounded (Kafka's default is Integer.MAX_VALUE)
    max_size: int | None = None
    # A member that joined during a rebalance and whose JoinGroup is still pending is dropped after
    # this long (Kafka's fixed 5 minutes), so a client that vanished cannot hold the barrier forever.
    new_member_join_timeout_ms: int = 300_000
    # offset.metadata.max.bytes
    offset_metadata_max_bytes: int = 4096
    # offsets.retention.minutes (7 days) in ms
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    # offsets.topic.num.partitions
    offsets_topic_num_partitions: int = 50
    # offsets.retention.check.interval.ms: how often expired offsets are looked for
    offsets_retention_check_interval_ms: int = 600_000
    # ---- consumer groups (KIP-848, group.protocol=consumer) ----
    # group.consumer.session.timeout.ms: a member not heard from for this long is removed.
    consumer_session_timeout_ms: int = 45_000
    # group.consumer.heartbeat.interval.ms: told to every member in each heartbeat answer.
    consumer_heartbeat_interval_ms: int = 5_000
    # group.consumer.assignors: the server-side assignors a member may ask for; the first is the default.
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
