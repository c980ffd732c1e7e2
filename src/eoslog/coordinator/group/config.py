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
    # ---- share groups (KIP-932), Kafka 4.2's GroupCoordinatorConfig names, defaults and bounds ----
    # group.share.session.timeout.ms: a member not heard from for this long is removed.
    share_session_timeout_ms: int = 45_000
    # group.share.min.session.timeout.ms / group.share.max.session.timeout.ms: the range the broker's
    # (and, later, a group's own share.session.timeout.ms) value must fall in.
    share_min_session_timeout_ms: int = 45_000
    share_max_session_timeout_ms: int = 60_000
    # group.share.heartbeat.interval.ms: told to every member in each heartbeat answer.
    share_heartbeat_interval_ms: int = 5_000
    # group.share.min.heartbeat.interval.ms / group.share.max.heartbeat.interval.ms
    share_min_heartbeat_interval_ms: int = 5_000
    share_max_heartbeat_interval_ms: int = 15_000
    # group.share.max.size: members of one share group (Kafka: between 1 and 1000).
    share_max_size: int = 200
    # group.share.initialize.retry.interval.ms: a share partition still initializing after this long (its
    # InitializeShareGroupState lost, say to a coordinator failover) is initialized again.
    share_initialize_retry_interval_ms: int = 30_000

    def __post_init__(self) -> None:
        # Kafka refuses such a broker config at startup (GroupCoordinatorConfig's require checks).
        for name in ("share_session_timeout_ms", "share_min_session_timeout_ms", "share_max_session_timeout_ms",
                     "share_heartbeat_interval_ms", "share_min_heartbeat_interval_ms",
                     "share_max_heartbeat_interval_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not 1 <= self.share_max_size <= 1000:
            raise ValueError("share_max_size (group.share.max.size) must be between 1 and 1000")
        if not (self.share_min_heartbeat_interval_ms <= self.share_heartbeat_interval_ms
                <= self.share_max_heartbeat_interval_ms):
            raise ValueError("share_heartbeat_interval_ms must lie between share_min_heartbeat_interval_ms and "
                             "share_max_heartbeat_interval_ms")
        if not (self.share_min_session_timeout_ms <= self.share_session_timeout_ms
                <= self.share_max_session_timeout_ms):
            raise ValueError("share_session_timeout_ms must lie between share_min_session_timeout_ms and "
                             "share_max_session_timeout_ms")
        if self.share_heartbeat_interval_ms >= self.share_session_timeout_ms:
            raise ValueError("share_heartbeat_interval_ms must be less than share_session_timeout_ms")
