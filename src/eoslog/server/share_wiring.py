"""The broker's share-group pieces (KIP-932, docs/share-groups.md): the persister through which the group
coordinator and the share-partition manager reach the share coordinator (in-process where it is this
broker, Kafka's RPCs 83-87 otherwise), and the share-partition manager, each group's share.* group configs
over the broker's group.share.* settings. Built on first use, after the replica layer exists."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eoslog.coordinator.share.persister import RoutingPersister
    from eoslog.server.broker import Broker
    from eoslog.share.manager import SharePartitionManager


def share_persister(broker: Broker) -> RoutingPersister:
    from eoslog.coordinator.share.persister import broker_persister

    return broker_persister(broker.config.node_id, lambda: broker.coordinators, broker.replicas,
                            broker.broker_clients)


def share_partition_manager(broker: Broker) -> SharePartitionManager:
    """share/manager.py: the share partitions this broker leads; it drops those whose leadership moves away
    (the replica manager's resignations)."""
    from eoslog.coordinator.group.dynamic_configs import auto_offset_reset
    from eoslog.share.manager import ShareGroupSettings, ShareManagerConfig, SharePartitionManager

    config, registry = broker.config, broker.registry
    group_configs = broker.group_configs

    def settings(group_id: str) -> ShareGroupSettings:
        own = group_configs.get(group_id)
        return ShareGroupSettings(
            record_lock_duration_ms=int(own.get("share.record.lock.duration.ms",
                                                config.group_share_record_lock_duration_ms)),
            delivery_count_limit=int(own.get("share.delivery.count.limit", config.group_share_delivery_count_limit)),
            auto_offset_reset=auto_offset_reset(own.get("share.auto.offset.reset", "latest")),
            isolation_level=1 if own.get("share.isolation.level") == "read_committed" else 0)

    def topic_name(topic_id):
        info = registry.topics.by_id.get(topic_id) if registry.topics is not None else None
        return None if info is None else info.name

    return SharePartitionManager(broker.replicas, topic_name, share_persister(broker), settings,
                                 ShareManagerConfig(max_record_locks=config.group_share_partition_max_record_locks,
                                                    max_share_sessions=config.group_share_max_share_sessions,
                                                    persist_acquisitions=config.share_persist_acquisitions,
                                                    loaded_transaction_timeout_ms=config.transaction_max_timeout_ms,
                                                    producer_epoch_expiration_ms=(
                                                        config.transactional_id_expiration_ms)))
