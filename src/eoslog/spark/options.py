"""The options of ``format("eoslog")``, named as in Spark's Kafka connector, parsed once.

Spark hands options over case-insensitively (the sink even sees ``checkpointlocation`` in lower case), so
every lookup here is by lower-cased name. ``kafka.*`` options go to the confluent-kafka client with the
prefix removed, except the Java client's own settings (deserializers and the like) that librdkafka does
not know; the connector sets those itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from eoslog.spark import offsets

# Java-client settings a Spark Kafka job may carry that mean nothing to librdkafka (or that the
# connector must own: offsets are tracked by Spark, never by a consumer group).
_JAVA_ONLY = frozenset({
    "key.deserializer", "value.deserializer", "key.serializer", "value.serializer",
    "auto.offset.reset", "enable.auto.commit", "interceptor.classes", "group.id",
    "isolation.level", "transactional.id", "enable.idempotence",
})

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


class OptionError(ValueError):
    """An option the user gave that cannot work; the message names it."""


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    text = opts.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() in ("true", "1", "yes"):
        return True
    if text.strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, not {text!r}")


def client_config(opts: dict[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options as a confluent-kafka configuration (bootstrap included)."""
    config = {}
    for name, value in opts.items():
        if name.startswith("kafka.") and name[6:] not in _JAVA_ONLY:
            config[name[6:]] = value
    if "bootstrap.servers" not in config:
        raise OptionError("option kafka.bootstrap.servers is required")
    return config


SCHEMA_REGISTRY_PREFIX = "schema.registry."
AVRO_MODES = ("FAILFAST", "PERMISSIVE")


@dataclass(frozen=True)
class TypedValueOptions:
    """``schema.registry.url`` (and other ``schema.registry.*`` settings of confluent-kafka's
    SchemaRegistryClient, e.g. ``basic.auth.user.info``, ``ssl.ca.location``), ``value.subject`` and
    ``avro.mode``: the value column decoded (source) or encoded (sink) with the subject's Avro schema."""

    registry: dict[str, str]
    subject: str
    mode: str = "FAILFAST"


def typed_value_options(opts: dict[str, str], topics: tuple[str, ...]) -> TypedValueOptions | None:
    """None without ``schema.registry.url``; ``topics`` names the default subject, ``<topic>-value``
    (TopicNameStrategy, what Confluent's serializers register under by default)."""
    registry = {k[len(SCHEMA_REGISTRY_PREFIX):]: v for k, v in opts.items() if k.startswith(SCHEMA_REGISTRY_PREFIX)}
    if "url" not in registry:
        for name in ("value.subject", "avro.mode"):
            if name in opts:
                raise OptionError(f"option {name} needs schema.registry.url")
        return None
    subject = opts.get("value.subject")
    if subject is None:
        if len(topics) != 1:
            raise OptionError("option value.subject is required when typed values come from several topics "
                              f"({', '.join(topics) or 'a topic column'}): one subject gives the column's type")
        subject = f"{topics[0]}-value"
    mode = opts.get("avro.mode", "FAILFAST").strip().upper()
    if mode not in AVRO_MODES:
        raise OptionError(f"avro.mode must be FAILFAST or PERMISSIVE, not {mode!r}")
    return TypedValueOptions(registry, subject, mode)


def _reader(opts: dict[str, str]) -> str:
    """``eoslog.reader``: ``auto`` (direct Fetch decoding where the connection allows it) or ``librdkafka``."""
    reader = opts.get("eoslog.reader", "auto").strip().lower()
    if reader not in ("auto", "librdkafka"):
        raise OptionError(f"eoslog.reader must be auto or librdkafka, not {reader!r}")
    return reader


@dataclass(frozen=True)
class SourceOptions:
    client: dict[str, str]
    topics: tuple[str, ...]
    starting: str | offsets.PartitionOffsets
    ending: str | offsets.PartitionOffsets
    max_offsets_per_trigger: int | None
    isolation_level: str
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int = 120_000
    reader: str = "auto"
    extra: dict[str, str] = field(default_factory=dict)
    typed_value: TypedValueOptions | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = _lower(options)
        for unsupported in ("assign", "subscribepattern"):
            if unsupported in opts:
                raise OptionError(f"option {unsupported} is not supported by format('eoslog'); use subscribe")
        topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe (a comma-separated list of topics) is required")
        isolation = opts.get("kafka.isolation.level", READ_COMMITTED).strip().lower()
        if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
            raise OptionError(f"kafka.isolation.level must be read_committed or read_uncommitted, not {isolation!r}")
        limit = opts.get("maxoffsetspertrigger")
        max_rows = None
        if limit is not None:
            max_rows = int(limit)
            if max_rows <= 0:
                raise OptionError(f"maxOffsetsPerTrigger must be positive, not {limit}")
        ending = offsets.parse_offset_option(opts.get("endingoffsets"), "endingOffsets", "latest")
        if ending == "earliest":
            raise OptionError("endingOffsets cannot be 'earliest'")
        return cls(
            client=client_config(opts),
            topics=topics,
            starting=offsets.parse_offset_option(opts.get("startingoffsets"), "startingOffsets", "latest"),
            ending=ending,
            max_offsets_per_trigger=max_rows,
            isolation_level=isolation,
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            include_headers=_bool(opts, "includeHeaders", False),
            poll_timeout_ms=int(opts.get("kafkaconsumer.polltimeoutms", "120000")),
            reader=_reader(opts),
            typed_value=typed_value_options(opts, topics),
        )

    @classmethod
    def parse_batch(cls, options: Mapping[str, str]) -> SourceOptions:
        """Batch queries default to startingOffsets=earliest, as Spark's Kafka source does."""
        opts = _lower(options)
        opts.setdefault("startingoffsets", "earliest")
        parsed = cls.parse(opts)
        if parsed.starting == "latest":
            raise OptionError("startingOffsets cannot be 'latest' for a batch query")
        return parsed


# The native writer is the default: every test in tests/spark passes with both, and it is the faster one
# (docs/benchmarks.md, "Spark sink: the native writer").
DEFAULT_WRITER = "native"


def _writer(opts: dict[str, str]) -> str:
    """``eoslog.writer``: ``native`` (record batches encoded from Arrow, Produce sent by the sink's own
    producer, spark/native_producer.py) or ``librdkafka`` (a confluent-kafka producer, one produce() a row)."""
    writer = opts.get("eoslog.writer", DEFAULT_WRITER).strip().lower()
    if writer not in ("native", "librdkafka"):
        raise OptionError(f"eoslog.writer must be native or librdkafka, not {writer!r}")
    return writer


@dataclass(frozen=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None
    sink_id: str
    transaction_timeout_ms: int
    require_exactly_once: bool
    writer: str = DEFAULT_WRITER
    typed_value: TypedValueOptions | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        opts = _lower(options)
        client = client_config(opts)
        timeout = int(client.pop("transaction.timeout.ms", "300000"))
        sink_id = opts.get("sinkid", "0")
        if not sink_id.replace("_", "").replace(".", "").isalnum():
            raise OptionError(f"sinkId must be letters, digits, '_' or '.', not {sink_id!r}")
        sink = cls(client=client, topic=opts.get("topic"), sink_id=sink_id,
                   transaction_timeout_ms=timeout,
                   require_exactly_once=_bool(opts, "requireExactlyOnce", True), writer=_writer(opts),
                   typed_value=typed_value_options(opts, (opts["topic"],) if "topic" in opts else ()))
        sink.security()  # a bad security setting fails the query at once, not its first commit
        return sink

    def security(self):
        """TLS and SASL for the driver's own transaction-group connections, from the same ``kafka.*``
        settings the producers use (security/client.py); None on PLAINTEXT."""
        from eoslog.security.client import ClientSecurity, ClientSecurityError

        if self.client.get("security.protocol", "plaintext").strip().upper() == "PLAINTEXT":
            return None
        try:
            return ClientSecurity.from_properties(self.client)
        except (ClientSecurityError, OSError, ValueError) as exc:
            raise OptionError(f"kafka.security.protocol and friends: {exc}") from exc
