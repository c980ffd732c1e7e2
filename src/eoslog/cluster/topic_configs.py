"""Topic-level configuration: Kafka's names, defaults and where each effective value comes from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import InvalidConfigError

if TYPE_CHECKING:
    from eoslog.cluster.registry import PartitionRegistry
    from eoslog.cluster.topics import TopicInfo

LONG_MAX = str(2**63 - 1)
# Kafka's defaults for its internal topics: compacted, and never deleted by time.
INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "-1", "segment.bytes": str(100 * 1024 * 1024)}

# name -> (Kafka's default, DescribeConfigs config type: 1 boolean, 2 string, 3 int, 5 long, 6 double, 7 list)
TOPIC_CONFIGS: dict[str, tuple[str, int]] = {
    "cleanup.policy": ("delete", 7),
    "compression.type": ("producer", 2),
    "delete.retention.ms": ("86400000", 5),
    "file.delete.delay.ms": ("60000", 5),
    "flush.messages": (LONG_MAX, 5),
    "flush.ms": (LONG_MAX, 5),
    "index.interval.bytes": ("4096", 3),
    "max.compaction.lag.ms": (LONG_MAX, 5),
    "max.message.bytes": ("1048588", 3),
    "message.timestamp.type": ("CreateTime", 2),
    "message.timestamp.before.max.ms": (LONG_MAX, 5),
    "message.timestamp.after.max.ms": ("3600000", 5),  # Kafka 4.x: an hour ahead at most
    "min.cleanable.dirty.ratio": ("0.5", 6),
    "min.compaction.lag.ms": ("0", 5),
    "min.insync.replicas": ("1", 3),
    "retention.bytes": ("-1", 5),
    "retention.ms": ("604800000", 5),
    "segment.bytes": ("1073741824", 3),
    "segment.index.bytes": ("10485760", 3),
    "segment.ms": ("604800000", 5),
    "unclean.leader.election.enable": ("false", 1),
    # eoslog's own: acks=all answers only after an fsync covers the batch (group commit). A single node
    # has no replicas to make data safe, so this is on by default; off trades durability for speed.
    # Broker default: log.eoslog.fsync.on.ack; docs/durability.md (and what a cluster should use).
    "eoslog.fsync.on.ack": ("true", 1),
}

SOURCE_TOPIC = 1  # DYNAMIC_TOPIC_CONFIG
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


def check_names(configs: dict[str, str]) -> None:
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfigError(f"unknown topic config {name!r}")


def describe_topic_configs(registry: PartitionRegistry, info: TopicInfo) -> list[tuple[str, str, int]]:
    """(name, effective value, source) for every topic config, in name order."""
    entries = []
    for name, (default, _) in sorted(TOPIC_CONFIGS.items()):
        if name in info.configs:
            entries.append((name, info.configs[name], SOURCE_TOPIC))
        elif info.is_internal and name in INTERNAL_TOPIC_CONFIGS:
            entries.append((name, INTERNAL_TOPIC_CONFIGS[name], SOURCE_STATIC_BROKER))
        elif name in registry.default_log_properties:  # a broker default: static, or dynamic (2 or 3)
            entries.append((name, registry.default_log_properties[name],
                            registry.default_log_sources.get(name, SOURCE_STATIC_BROKER)))
        else:
            entries.append((name, default, SOURCE_DEFAULT))
    return entries
