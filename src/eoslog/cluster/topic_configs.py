"""Topic-level configuration: Kafka's names, defaults and where each effective value comes from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import InvalidConfigError

if TYPE_CHECKING:
    from eoslog.cluster.registry import PartitionRegistry
    from eoslog.cluster.topics import TopicInfo

LONG_MAX = str(2**63 - 1)
# The subject name strategies of Confluent's serializers, by their Java class names (a bare class name is
# taken too); TopicNameStrategy is their default.
_STRATEGIES = "io.confluent.kafka.serializers.subject."
TOPIC_NAME_STRATEGY = _STRATEGIES + "TopicNameStrategy"
RECORD_NAME_STRATEGY = _STRATEGIES + "RecordNameStrategy"
TOPIC_RECORD_NAME_STRATEGY = _STRATEGIES + "TopicRecordNameStrategy"
SUBJECT_NAME_STRATEGIES = (TOPIC_NAME_STRATEGY, RECORD_NAME_STRATEGY, TOPIC_RECORD_NAME_STRATEGY)
VALUE_SCHEMA_VALIDATION = "confluent.value.schema.validation"
KEY_SCHEMA_VALIDATION = "confluent.key.schema.validation"
# eoslog's own, beside Confluent's: how far the check goes where it is on. "id": the schema id only (Confluent
# Server's check); "payload": the id, and the bytes after it decoded with that schema (Avro, JSON Schema).
VALUE_SCHEMA_VALIDATION_LEVEL = "eoslog.value.schema.validation.level"
KEY_SCHEMA_VALIDATION_LEVEL = "eoslog.key.schema.validation.level"
SCHEMA_VALIDATION_LEVELS = ("id", "payload")
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
    # Confluent Server's schema id validation (docs/schema-registry.md): each record's value (key) must carry
    # the id of a schema registered under the subject the strategy names. Not the log's business: the broker
    # gives such a topic's partitions a RecordCheck (schema_registry/validation.py).
    VALUE_SCHEMA_VALIDATION: ("false", 1),
    KEY_SCHEMA_VALIDATION: ("false", 1),
    "confluent.value.subject.name.strategy": (TOPIC_NAME_STRATEGY, 2),
    "confluent.key.subject.name.strategy": (TOPIC_NAME_STRATEGY, 2),
    VALUE_SCHEMA_VALIDATION_LEVEL: ("id", 2),
    KEY_SCHEMA_VALIDATION_LEVEL: ("id", 2),
}

SOURCE_TOPIC = 1  # DYNAMIC_TOPIC_CONFIG
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


def check_names(configs: dict[str, str]) -> None:
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfigError(f"unknown topic config {name!r}")


def check_values(configs: dict[str, str]) -> None:
    """The values of the topic configs the log does not read (log/config.py checks its own)."""
    for name, value in configs.items():
        if name.startswith("confluent.") and name.endswith(".schema.validation"):
            if str(value).strip().lower() not in ("true", "false"):
                raise InvalidConfigError(f"Invalid value {value} for configuration {name}: must be true or false")
        elif name.startswith("confluent.") and name.endswith(".subject.name.strategy"):
            subject_name_strategy(name, value)
        elif name in (VALUE_SCHEMA_VALIDATION_LEVEL, KEY_SCHEMA_VALIDATION_LEVEL):
            schema_validation_level(name, value)


def schema_validation_on(configs: dict[str, str]) -> bool:
    """Whether a topic's configs turn schema id validation on, for values or keys: cheap enough for every
    topic on every config change, so nothing of the registry is imported for a topic without it."""
    return any(str(configs.get(name, "")).strip().lower() == "true"
               for name in (VALUE_SCHEMA_VALIDATION, KEY_SCHEMA_VALIDATION))


def schema_validation_level(name: str, value: str | None) -> str:
    """``id`` or ``payload``, from a topic config's value (absent: ``id``)."""
    if value is None:
        return "id"
    text = str(value).strip().lower()
    if text not in SCHEMA_VALIDATION_LEVELS:
        raise InvalidConfigError(f"Invalid value {value} for configuration {name}: must be one of "
                                 f"{', '.join(SCHEMA_VALIDATION_LEVELS)}")
    return text


def subject_name_strategy(name: str, value: str) -> str:
    """A strategy's full class name, from it or its bare class name."""
    text = str(value).strip()
    for strategy in SUBJECT_NAME_STRATEGIES:
        if text in (strategy, strategy.rsplit(".", 1)[1]):
            return strategy
    raise InvalidConfigError(f"Invalid value {value} for configuration {name}: must be one of "
                             f"{', '.join(SUBJECT_NAME_STRATEGIES)}")


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
