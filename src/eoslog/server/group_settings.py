"""The group coordinator's settings from the broker's properties: Kafka's start-up checks of the
group.share.* settings, and the GroupConfig / share limits the coordinator is built with. Apart from
broker.py so the wiring stays one screen per concern."""

from __future__ import annotations

from eoslog.server.config import BrokerConfig, ConfigError


def check_share_settings(config: BrokerConfig) -> None:
    """Kafka's startup checks of the group.share.* settings (GroupCoordinatorConfig, ShareGroupConfig)."""
    for name in ("session.timeout.ms", "heartbeat.interval.ms", "record.lock.duration.ms"):
        attribute = name.replace(".", "_")
        low = getattr(config, f"group_share_min_{attribute}")
        high = getattr(config, f"group_share_max_{attribute}")
        if not low <= getattr(config, f"group_share_{attribute}") <= high:
            raise ConfigError(f"group.share.{name} must lie between group.share.min.{name} and group.share.max.{name}")
    if config.group_share_heartbeat_interval_ms >= config.group_share_session_timeout_ms:
        raise ConfigError("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")


def group_settings(config: BrokerConfig):
    """The group coordinator's GroupConfig and the share-group limits, from the broker's properties (built
    with the group coordinator: importing coordinator/ waits for its first use)."""
    from eoslog.coordinator.group.config import GroupConfig
    from eoslog.coordinator.group.dynamic_configs import ShareLimits

    try:
        group_config = GroupConfig(
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            offsets_retention_ms=config.offsets_retention_minutes * 60_000,
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            consumer_assignors=config.group_consumer_assignors,
            share_session_timeout_ms=config.group_share_session_timeout_ms,
            share_min_session_timeout_ms=config.group_share_min_session_timeout_ms,
            share_max_session_timeout_ms=config.group_share_max_session_timeout_ms,
            share_heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
            share_min_heartbeat_interval_ms=config.group_share_min_heartbeat_interval_ms,
            share_max_heartbeat_interval_ms=config.group_share_max_heartbeat_interval_ms,
            share_max_size=config.group_share_max_size,
            share_initialize_retry_interval_ms=config.group_share_initialize_retry_interval_ms)
    except ValueError as exc:  # check_share_settings refused these at start
        raise ConfigError(str(exc)) from exc
    limits = ShareLimits(config.group_share_record_lock_duration_ms, config.group_share_min_record_lock_duration_ms,
                         config.group_share_max_record_lock_duration_ms, config.group_share_delivery_count_limit)
    return group_config, limits
