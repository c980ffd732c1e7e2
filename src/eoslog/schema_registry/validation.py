"""Schema id validation on the broker, as Confluent Server does it (``confluent.value.schema.validation``,
``confluent.key.schema.validation``): a record's value (key) must be in the registry's wire format and
carry the id of a schema registered under the subject its topic's strategy names. Pure: values in, a
reason out; the registry's state is read, never changed.

The payload is decoded only where eoslog's own ``eoslog.value.schema.validation.level`` (``.key.``) is
``payload`` (payload_validation.py); otherwise, as Confluent's "schema id validation", the id alone is
checked. A null value or key passes, as Confluent's does, so tombstones still delete on compacted topics.
The ids that count are those of a subject's live versions: a soft-deleted version's id is refused, since the subject no longer
offers it (a serializer that registers the schema again revives it, with the same id).

The check runs on the broker's event loop, for every record of a validated topic's batches, so it reads
``RegistryState.live_ids`` and ``contents`` with single dict lookups and takes no lock (state.py says
why that is safe).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from eoslog.cluster.topic_configs import (
    KEY_SCHEMA_VALIDATION,
    KEY_SCHEMA_VALIDATION_LEVEL,
    RECORD_NAME_STRATEGY,
    TOPIC_NAME_STRATEGY,
    VALUE_SCHEMA_VALIDATION,
    VALUE_SCHEMA_VALIDATION_LEVEL,
    schema_validation_level,
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
    """What a topic's configs ask: the strategy for values and for keys, None where validation is off, and
    whether their payloads are decoded too (``payload`` level; meaningful only where the strategy is set)."""

    topic: str
    value_strategy: str | None
    key_strategy: str | None
    value_payload: bool = False
    key_payload: bool = False

    @classmethod
    def from_configs(cls, topic: str, configs: Mapping[str, str]) -> TopicValidation | None:
        """None when neither values nor keys are validated (the topic's partitions get no check at all)."""
        value = _on(configs.get(VALUE_SCHEMA_VALIDATION))
        key = _on(configs.get(KEY_SCHEMA_VALIDATION))
        if not (value or key):
            return None
        return cls(topic,
                   subject_name_strategy(VALUE_STRATEGY, configs.get(VALUE_STRATEGY, TOPIC_NAME_STRATEGY)) if value else None,
                   subject_name_strategy(KEY_STRATEGY, configs.get(KEY_STRATEGY, TOPIC_NAME_STRATEGY)) if key else None,
                   value and _payload(configs, VALUE_SCHEMA_VALIDATION_LEVEL),
                   key and _payload(configs, KEY_SCHEMA_VALIDATION_LEVEL))


def _payload(configs: Mapping[str, str], name: str) -> bool:
    return schema_validation_level(name, configs.get(name)) == "payload"


def _on(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


class RegistryView:
    """The registry's state as validation reads it: the state itself (a broker serving its registry reads
    its registry's; one that does not reads its own copy of ``_schemas``), and whether it has been read
    to the topic's end yet. Record names (for the record name strategies) are kept per id: an id's schema
    never changes."""

    def __init__(self, state: RegistryState, loaded: Callable[[], bool],
                 catch_up: Callable[[], Awaitable[None]] | None = None) -> None:
        self.state = state
        self.loaded = loaded
        # An awaitable done once the state holds everything committed to _schemas before the call (or
        # the attempt gave up): what a refusal of an unknown id waits for, then asks again.
        self.catch_up = catch_up
        self._record_names: dict[int, str | None] = {}
        self._payloads = None  # PayloadDecoders, made when a topic first asks for payload validation

    @property
    def payloads(self):
        if self._payloads is None:
            from eoslog.schema_registry.payload_validation import PayloadDecoders

            self._payloads = PayloadDecoders(self.state)
        return self._payloads

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


def check_data(data: bytes | None, part: str, topic: str, strategy: str, view: RegistryView,
               payload: bool = False) -> str | None:
    """Why a record's value (``part`` "value") or key ("key") is refused, or None. ``payload``: decode the
    bytes after the id with its schema too, once the id passed."""
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
        return check_payload(data, schema_id, part, topic, view) if payload else None
    return _unknown(schema_id, part, topic, strategy, view, f"it is not registered under subject {subject}")


UNKNOWN_ID = "Schema id "  # how a refusal of an id (not of the wire format) begins


def check_payload(data: bytes, schema_id: int, part: str, topic: str, view: RegistryView) -> str | None:
    """Why the payload of a record's value (key), whose registered id passed, does not match its schema."""
    reason = view.payloads.check(schema_id, memoryview(data)[WIRE_HEADER_BYTES:])
    if reason is None:
        return None
    schema_type = getattr(view.state.contents.get(schema_id), "schema_type", "?")
    return (f"The {part} of the record does not match its schema (id {schema_id}, {schema_type}): {reason}. "
            f"Topic {topic} has {part} payload validation on")


def _unknown(schema_id: int, part: str, topic: str, strategy: str, view: RegistryView, why: str) -> str:
    loaded = "" if view.loaded() else " (the schema registry's state is still being read)"
    return (f"{UNKNOWN_ID}{schema_id} of the record's {part} is not valid for topic {topic}: {why} "
            f"({strategy.rsplit('.', 1)[1]}){loaded}")


def _first_bytes(data: bytes) -> str:
    shown = data[:WIRE_HEADER_BYTES].hex(" ")
    return f"{len(data)} byte(s) starting {shown}" if data else "0 bytes"


def record_check(validation: TopicValidation, view: RegistryView) -> RecordCheck:
    """The RecordCheck for one topic's partitions (log/record_validation.py): a whole batch at once where it
    can (:meth:`SchemaIdCheck.whole_batch`), record by record otherwise."""
    return SchemaIdCheck(validation, view)


class SchemaIdCheck:
    """One topic's schema id check. Called with a decoded record, it answers for that record (a record
    that passes under TopicNameStrategy, the default, costs a slice, a comparison and a set lookup;
    anything else, and every refusal, goes through :func:`check_data`). Its :meth:`whole_batch` answers
    for every record of a batch from their prefixes alone (wire_scan.py), without decoding them. With payload
    validation on, every payload is decoded too once its id passed: in :meth:`whole_batch` from where the
    scan places it, record by record (check_payload) when the batch goes that way."""

    def __init__(self, validation: TopicValidation, view: RegistryView) -> None:
        self.topic = validation.topic
        self.value_strategy = validation.value_strategy
        self.key_strategy = validation.key_strategy
        self.value_payload = validation.value_payload
        self.key_payload = validation.key_payload
        self.view = view
        self._live_ids = view.state.live_ids
        self._value_subject = f"{self.topic}-value" if self.value_strategy == TOPIC_NAME_STRATEGY else None
        self._key_subject = f"{self.topic}-key" if self.key_strategy == TOPIC_NAME_STRATEGY else None
        try:
            from eoslog.schema_registry.wire_scan import scan
        except ModuleNotFoundError:  # numpy: without it every batch takes the record-by-record path
            scan = None
        self._scan = scan

    def __call__(self, _header: BatchHeader, record: Record, _index: int) -> str | None:
        if self.value_strategy is not None:
            reason = self._part(record.value, "value", self.value_strategy, self._value_subject, self.value_payload)
            if reason is not None:
                return reason
        if self.key_strategy is not None:
            return self._part(record.key, "key", self.key_strategy, self._key_subject, self.key_payload)
        return None

    def _part(self, data: bytes | None, part: str, strategy: str, subject: str | None, payload: bool) -> str | None:
        if not self._passes(data, subject):
            return check_data(data, part, self.topic, strategy, self.view, payload)
        if payload and data is not None:
            return check_payload(data, int.from_bytes(data[1:WIRE_HEADER_BYTES], "big"), part, self.topic, self.view)
        return None

    def _passes(self, data: bytes | None, subject: str | None) -> bool:
        return data is None or (subject is not None and data[:1] == b"\x00" and len(data) >= WIRE_HEADER_BYTES
                                and int.from_bytes(data[1:WIRE_HEADER_BYTES], "big") in self._live_ids.get(subject, _EMPTY))

    def whole_batch(self, header: BatchHeader, records) -> bool:
        """True when every record of the batch passes, read from the uncompressed records section
        ``records`` without decoding a record. False means "decode them and ask each": a record that
        fails (to name it), a batch the scan cannot vouch for, or no numpy. With payload validation, every
        payload is decoded too, from where the scan's runs place it (:meth:`_payloads_pass`)."""
        if self._scan is None:
            return False
        prefixes = self._scan(records, header.records_count, self.key_strategy is not None)
        if prefixes is None:
            return False
        if not ((self.value_strategy is None or self._all_pass(prefixes.values, "value", self.value_strategy))
                and (self.key_strategy is None or self._all_pass(prefixes.keys, "key", self.key_strategy))):
            return False
        return not (self.value_payload or self.key_payload) or self._payloads_pass(records, prefixes)

    def _payloads_pass(self, records, prefixes) -> bool:
        """Whether every payload of the batch decodes, its ids having passed: each record's key and value
        are where the scan found them (its runs' layouts, or the general scan's places), so the records
        are not decoded into objects (about 3 µs a record). False when one does not: the records path
        then names it."""
        data = memoryview(records)
        payloads = self.view.payloads
        if prefixes.runs is None:
            return all(self._places_pass(data, part) for on, part in ((self.value_payload, prefixes.values),
                                                                       (self.key_payload, prefixes.keys)) if on)
        for position, count, layout in prefixes.runs:
            size = layout.size
            for on, (schema_id, null, _wire), (at, length) in ((self.value_payload, layout.value, layout.value_bytes),
                                                                (self.key_payload, layout.key, layout.key_bytes)):
                if not on or null:
                    continue
                decode = payloads.decoder(schema_id)
                start = position + at + WIRE_HEADER_BYTES
                stop = position + at + length
                for offset in range(0, count * size, size):
                    if decode(data[start + offset:stop + offset]) is not None:
                        return False
        return True

    def _places_pass(self, data: memoryview, part) -> bool:
        if part is None or part.null is True:
            return True
        if part.places is None:
            return False
        decoder = self.view.payloads.decoder
        null = part.null
        starts, lengths = part.places
        for index, (start, length, schema_id) in enumerate(zip(starts.tolist(), lengths.tolist(), part.ids.tolist(),
                                                               strict=True)):
            if null is not False and null[index]:
                continue
            if decoder(schema_id)(data[start + WIRE_HEADER_BYTES:start + length]) is not None:
                return False
        return True

    def _all_pass(self, prefixes, part: str, strategy: str) -> bool:
        """Every id is asked once per batch, through the same :func:`check_data` the records path uses: a
        batch's records nearly always carry one id, or a few."""
        ids, null, wire = prefixes.ids, prefixes.null, prefixes.wire
        if null is True:
            return True
        if wire is False:
            return False
        if prefixes.distinct is not None and (wire is True or null is not False):
            # every record that is not null is in the wire format, and the scan knows their ids
            if wire is not True and not (wire | null).all():
                return False
            return all(self._known(schema_id, part, strategy) for schema_id in prefixes.distinct)
        if wire is not True and not wire.all():
            if null is False or not (wire | null).all():
                return False
            ids = ids[wire]
            if ids.size == 0:
                return True
        first = ids[0]
        distinct = (int(first),) if (ids == first).all() else set(ids.tolist())
        return all(self._known(schema_id, part, strategy) for schema_id in distinct)

    def catch_up(self, refusal: Exception) -> Awaitable[None] | None:
        """When ``refusal`` (the batch's RecordValidationError) refused an id this copy of the registry
        may just not have read yet: an awaitable done once it has read ``_schemas`` to its end, after
        which the batch is worth checking again (api/produce.py). None for a refusal of the wire format,
        which no registration can change, or when the view cannot catch up."""
        if self.view.catch_up is None:
            return None
        if not any(error.message.startswith(UNKNOWN_ID) for error in getattr(refusal, "record_errors", ())):
            return None
        return self.view.catch_up()

    def _known(self, schema_id: int, part: str, strategy: str) -> bool:
        if strategy == TOPIC_NAME_STRATEGY:
            return schema_id in self._live_ids.get(f"{self.topic}-{part}", _EMPTY)
        return check_data(b"\x00" + schema_id.to_bytes(4, "big"), part, self.topic, strategy, self.view) is None


_EMPTY: frozenset[int] = frozenset()
