"""Schema id validation on the broker, as Confluent Server does it (``confluent.value.schema.validation``,
``confluent.key.schema.validation``): a record's value (key) must be in the registry's wire format and
carry the id of a schema registered under the subject its topic's strategy names. Pure: values in, a
reason out; the registry's state is read, never changed.

The payload is not decoded (Confluent's "schema id validation" checks the id only). A null value or key
passes, as Confluent's does, so tombstones still delete on compacted topics. The ids that count are
those of a subject's live versions: a soft-deleted version's id is refused, since the subject no longer
offers it (a serializer that registers the schema again revives it, with the same id).

The check runs on the broker's event loop, for every record of a validated topic's batches, so it reads
``RegistryState.live_ids`` and ``contents`` with single dict lookups and takes no lock (state.py says
why that is safe).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eoslog.cluster.topic_configs import (
    KEY_SCHEMA_VALIDATION,
    RECORD_NAME_STRATEGY,
    TOPIC_NAME_STRATEGY,
    VALUE_SCHEMA_VALIDATION,
    subject_name_strategy,
)
from eoslog.log.record_validation import RecordCheck
from eoslog.records.batch import Record
from eoslog.records.header import BatchHeader
from eoslog.schema_registry.state import RegistryState

MAGIC_BYTE = 0
WIRE_HEADER_BYTES = 5  # the magic byte, then the schema id as a 4-byte big-endian integer
VALUE_STRATEGY = "confluent.value.subject.name.strategy"
KEY_STRATEGY = "confluent.key.subject.name.strategy"


@dataclass(frozen=True)
class TopicValidation:
    """What a topic's configs ask: the strategy for values and for keys, None where validation is off."""

    topic: str
    value_strategy: str | None
    key_strategy: str | None

    @classmethod
    def from_configs(cls, topic: str, configs: Mapping[str, str]) -> TopicValidation | None:
        """None when neither values nor keys are validated (the topic's partitions get no check at all)."""
        value = _on(configs.get(VALUE_SCHEMA_VALIDATION))
        key = _on(configs.get(KEY_SCHEMA_VALIDATION))
        if not (value or key):
            return None
        return cls(topic,
                   subject_name_strategy(VALUE_STRATEGY, configs.get(VALUE_STRATEGY, TOPIC_NAME_STRATEGY)) if value else None,
                   subject_name_strategy(KEY_STRATEGY, configs.get(KEY_STRATEGY, TOPIC_NAME_STRATEGY)) if key else None)


def _on(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


class RegistryView:
    """The registry's state as validation reads it: the state itself (a broker serving its registry reads
    its registry's; one that does not reads its own copy of ``_schemas``), and whether it has been read
    to the topic's end yet. Record names (for the record name strategies) are kept per id: an id's schema
    never changes."""

    def __init__(self, state: RegistryState, loaded: Callable[[], bool]) -> None:
        self.state = state
        self.loaded = loaded
        self._record_names: dict[int, str | None] = {}

    def ids(self, subject: str) -> frozenset[int]:
        return self.state.live_ids.get(subject, frozenset())

    def record_name(self, schema_id: int) -> str | None:
        """The full name of the record an id's schema describes: an Avro record's namespace and name, a
        JSON Schema's ``title``; None for a schema without one (or a Protobuf schema, whose message is
        named by the indexes after the id, which this check does not read)."""
        if schema_id in self._record_names:
            return self._record_names[schema_id]
        record = self.state.contents.get(schema_id)
        if record is None:
            return None  # not cached: it may be registered later
        name = _record_name(record.schema, record.schema_type)
        self._record_names[schema_id] = name
        return name


def _record_name(schema: str, schema_type: str) -> str | None:
    try:
        parsed = json.loads(schema)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    if schema_type == "JSON":
        title = parsed.get("title")
        return title if isinstance(title, str) else None
    if schema_type != "AVRO":
        return None
    name, namespace = parsed.get("name"), parsed.get("namespace")
    if not isinstance(name, str):
        return None
    return name if "." in name or not namespace else f"{namespace}.{name}"


def check_data(data: bytes | None, part: str, topic: str, strategy: str, view: RegistryView) -> str | None:
    """Why a record's value (``part`` "value") or key ("key") is refused, or None."""
    if data is None:
        return None
    if len(data) < WIRE_HEADER_BYTES or data[0] != MAGIC_BYTE:
        return (f"The {part} of the record is not in the schema registry's wire format (magic byte 0, then a "
                f"4-byte schema id): {_first_bytes(data)}. Topic {topic} has {part} schema validation on")
    schema_id = int.from_bytes(data[1:WIRE_HEADER_BYTES], "big")
    if strategy == TOPIC_NAME_STRATEGY:
        subject = f"{topic}-{part}"
    else:
        record_name = view.record_name(schema_id)
        if record_name is None:
            return _unknown(schema_id, part, topic, strategy, view, "no schema with a record name has that id")
        subject = record_name if strategy == RECORD_NAME_STRATEGY else f"{topic}-{record_name}"
    if schema_id in view.ids(subject):
        return None
    return _unknown(schema_id, part, topic, strategy, view, f"it is not registered under subject {subject}")


def _unknown(schema_id: int, part: str, topic: str, strategy: str, view: RegistryView, why: str) -> str:
    loaded = "" if view.loaded() else " (the schema registry's state is still being read)"
    return (f"Schema id {schema_id} of the record's {part} is not valid for topic {topic}: {why} "
            f"({strategy.rsplit('.', 1)[1]}){loaded}")


def _first_bytes(data: bytes) -> str:
    shown = data[:WIRE_HEADER_BYTES].hex(" ")
    return f"{len(data)} byte(s) starting {shown}" if data else "0 bytes"


def record_check(validation: TopicValidation, view: RegistryView) -> RecordCheck:
    """The RecordCheck for one topic's partitions (log/record_validation.py). Under TopicNameStrategy (the
    default) a record that passes costs a slice, a comparison and a set lookup; anything else, and every
    refusal, goes through :func:`check_data`."""
    topic, value_strategy, key_strategy = validation.topic, validation.value_strategy, validation.key_strategy
    live_ids = view.state.live_ids
    value_subject = f"{topic}-value" if value_strategy == TOPIC_NAME_STRATEGY else None
    key_subject = f"{topic}-key" if key_strategy == TOPIC_NAME_STRATEGY else None
    empty: frozenset[int] = frozenset()

    def passes(data: bytes | None, subject: str | None) -> bool:
        return data is None or (subject is not None and data[:1] == b"\x00" and len(data) >= WIRE_HEADER_BYTES
                                and int.from_bytes(data[1:WIRE_HEADER_BYTES], "big") in live_ids.get(subject, empty))

    def check(_header: BatchHeader, record: Record, _index: int) -> str | None:
        if value_strategy is not None and not passes(record.value, value_subject):
            reason = check_data(record.value, "value", topic, value_strategy, view)
            if reason is not None:
                return reason
        if key_strategy is not None and not passes(record.key, key_subject):
            return check_data(record.key, "key", topic, key_strategy, view)
        return None

    return check
