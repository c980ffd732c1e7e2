"""Per-log configuration, with Kafka's topic-level names in snake case.

``LogConfig.from_properties`` reads Kafka's property names (``segment.bytes``, ``retention.ms``, ...) as
they arrive in CreateTopics / AlterConfigs, so every validation error names the property the client sent.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eoslog.log.errors import InvalidConfigError

LONG_MAX = (1 << 63) - 1  # Kafka's Long.MAX_VALUE: "never" for the flush settings
INT_MAX = (1 << 31) - 1
OFFSET_INDEX_ENTRY_SIZE = 8  # docs/storage-format.md, ".index"
TIME_INDEX_ENTRY_SIZE = 12  # docs/storage-format.md, ".timeindex"


class TimestampType(enum.Enum):
    """message.timestamp.type; the values are Kafka's property spellings."""

    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


CLEANUP_POLICIES = frozenset({"delete", "compact"})


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log. Immutable; a changed topic config makes a new LogConfig."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1 = keep forever
    retention_bytes: int = -1  # -1 = no size limit
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    # eoslog.fsync.on.ack (broker default log.eoslog.fsync.on.ack): an acks=all produce answers only after
    # an fsync covers it (group commit). Kafka relies on replication instead; a single broker has nothing
    # else to rely on. Off, durability follows flush.messages / flush.ms. docs/durability.md.
    fsync_on_ack: bool = True
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    # How far a CreateTime record's timestamp may lie behind / ahead of the broker's clock (Kafka 4.x's
    # defaults: any time in the past, at most an hour ahead); log/record_validation.py.
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    max_message_bytes: int = 1024 * 1024 + 12
    file_delete_delay_ms: int = 60_000
    cleanup_policy: frozenset[str] = frozenset({"delete"})
    # The log cleaner's settings (compacted topics; docs/compaction.md), Kafka's defaults.
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 24 * 3600 * 1000

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            name = _PROPERTY_BY_FIELD[field.name]
            value = getattr(self, field.name)
            rule = _RULES.get(field.name)
            if rule is not None:
                minimum, maximum = rule
                if not isinstance(value, int) or isinstance(value, bool):
                    raise InvalidConfigError(name, value, "must be an integer")
                if value < minimum or value > maximum:
                    raise InvalidConfigError(name, value, f"must be between {minimum} and {maximum}")
        if not isinstance(self.message_timestamp_type, TimestampType):
            raise InvalidConfigError(
                "message.timestamp.type", self.message_timestamp_type, "not a TimestampType"
            )
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 <= ratio <= 1.0:
            raise InvalidConfigError("min.cleanable.dirty.ratio", ratio, "must be between 0 and 1")
        policy = self.cleanup_policy
        if not isinstance(policy, frozenset) or not policy <= CLEANUP_POLICIES:
            raise InvalidConfigError("cleanup.policy", policy, "must be a set of 'delete' and 'compact'")

    @property
    def max_index_entries(self) -> int:
        """Offset-index entries a segment may hold before it must roll."""
        return self.segment_index_bytes // OFFSET_INDEX_ENTRY_SIZE

    @property
    def max_time_index_entries(self) -> int:
        return self.segment_index_bytes // TIME_INDEX_ENTRY_SIZE

    @property
    def deletes(self) -> bool:
        """Whether time/size retention applies (cleanup.policy contains delete)."""
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        """Whether the log cleaner compacts this log (cleanup.policy contains compact)."""
        return "compact" in self.cleanup_policy

    @classmethod
    def from_properties(
        cls, properties: Mapping[str, str], *, base: LogConfig | None = None, strict: bool = True
    ) -> LogConfig:
        """Builds a config from Kafka property names over ``base`` (defaults when None).

        Known Kafka topic configs that other layers own (``min.insync.replicas``, ``compression.type``...)
        are accepted and ignored here. Unknown names raise when ``strict``, as Kafka's CreateTopics does.
        """
        changes: dict[str, object] = {}
        for name, raw in properties.items():
            field = _FIELD_BY_PROPERTY.get(name)
            if field is None:
                if name in OTHER_TOPIC_PROPERTIES or not strict:
                    continue
                raise InvalidConfigError(name, raw, "unknown topic configuration")
            changes[field] = _PARSERS[field](name, raw)
        return dataclasses.replace(base or cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """The settings under Kafka's names, as DescribeConfigs reports them."""
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, TimestampType):
                text = value.value
            elif isinstance(value, frozenset):
                text = ",".join(sorted(value))
            elif isinstance(value, bool):
                text = "true" if value else "false"
            else:
                text = str(value)
            out[_PROPERTY_BY_FIELD[field.name]] = text
        return out


def _parse_int(name: str, raw: str) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(name, raw, "must be an integer") from None


def _parse_bool(name: str, raw: str) -> bool:
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidConfigError(name, raw, "must be true or false")


def _parse_ratio(name: str, raw: str) -> float:
    try:
        return float(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(name, raw, "must be a number between 0 and 1") from None


def _parse_timestamp_type(name: str, raw: str) -> TimestampType:
    for member in TimestampType:
        if member.value == str(raw).strip():
            return member
    raise InvalidConfigError(name, raw, "must be CreateTime or LogAppendTime")


def _parse_cleanup_policy(name: str, raw: str) -> frozenset[str]:
    # An empty list is valid, as in Kafka (its ValidList): neither retention nor compaction, the log keeps
    # everything. IncrementalAlterConfigs SUBTRACT of the only policy leaves it so.
    items = frozenset(part.strip() for part in str(raw).split(",") if part.strip())
    if not items <= CLEANUP_POLICIES:
        raise InvalidConfigError(name, raw, "must be delete, compact or compact,delete")
    return items


_PROPERTY_BY_FIELD = {
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "retention_ms": "retention.ms",
    "retention_bytes": "retention.bytes",
    "index_interval_bytes": "index.interval.bytes",
    "segment_index_bytes": "segment.index.bytes",
    "flush_messages": "flush.messages",
    "flush_ms": "flush.ms",
    "fsync_on_ack": "eoslog.fsync.on.ack",
    "message_timestamp_type": "message.timestamp.type",
    "message_timestamp_before_max_ms": "message.timestamp.before.max.ms",
    "message_timestamp_after_max_ms": "message.timestamp.after.max.ms",
    "max_message_bytes": "max.message.bytes",
    "file_delete_delay_ms": "file.delete.delay.ms",
    "cleanup_policy": "cleanup.policy",
    "min_cleanable_dirty_ratio": "min.cleanable.dirty.ratio",
    "min_compaction_lag_ms": "min.compaction.lag.ms",
    "max_compaction_lag_ms": "max.compaction.lag.ms",
    "delete_retention_ms": "delete.retention.ms",
}
_FIELD_BY_PROPERTY = {prop: field for field, prop in _PROPERTY_BY_FIELD.items()}

# (minimum, maximum) per integer field; Kafka's validators, except that positions and relative offsets
# are int32 in the index files, so a segment can never pass 2 GiB.
_RULES: dict[str, tuple[int, int]] = {
    "segment_bytes": (14, INT_MAX),
    "segment_ms": (1, LONG_MAX),
    "retention_ms": (-1, LONG_MAX),
    "retention_bytes": (-1, LONG_MAX),
    "index_interval_bytes": (0, INT_MAX),
    "segment_index_bytes": (TIME_INDEX_ENTRY_SIZE, INT_MAX),
    "flush_messages": (1, LONG_MAX),
    "flush_ms": (0, LONG_MAX),
    "max_message_bytes": (0, INT_MAX),
    "message_timestamp_before_max_ms": (0, LONG_MAX),
    "message_timestamp_after_max_ms": (0, LONG_MAX),
    "file_delete_delay_ms": (0, LONG_MAX),
    "min_compaction_lag_ms": (0, LONG_MAX),
    "max_compaction_lag_ms": (1, LONG_MAX),
    "delete_retention_ms": (0, LONG_MAX),
}

_PARSERS: dict[str, Callable[[str, str], object]] = {field: _parse_int for field in _RULES}
_PARSERS["fsync_on_ack"] = _parse_bool
_PARSERS["message_timestamp_type"] = _parse_timestamp_type
_PARSERS["cleanup_policy"] = _parse_cleanup_policy
_PARSERS["min_cleanable_dirty_ratio"] = _parse_ratio

# Kafka topic configs that are valid but not the log's business (or not implemented); accepted, ignored.
OTHER_TOPIC_PROPERTIES = frozenset(
    {
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "confluent.key.schema.validation",  # schema id validation: the broker's RecordCheck, not the log's
        "confluent.key.subject.name.strategy",
        "confluent.value.schema.validation",
        "confluent.value.subject.name.strategy",
        "eoslog.key.schema.validation.level",  # payload validation: the same RecordCheck's
        "eoslog.value.schema.validation.level",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.difference.max.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.storage.enable",
        "segment.jitter.ms",
        "unclean.leader.election.enable",
    }
)
