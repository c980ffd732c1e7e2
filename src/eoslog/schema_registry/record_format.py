"""The records of the ``_schemas`` topic: what Confluent Schema Registry writes and Karapace reads, so a
registry's state moves between them with the topic. Documented once, with a worked example, in
docs/schema-registry.md ("The _schemas topic"); these constants point back there.

Keys and values are compact UTF-8 JSON. A key's properties come in Confluent's order (``keytype``,
``subject``, ``version``, ``magic``), because compaction keeps one record per key *bytes*: a key written
with its properties in another order would not replace the older record. A value of None is a tombstone.

Keys: ``SCHEMA`` (subject, version), ``CONFIG`` and ``MODE`` (subject, or null for the global setting),
``DELETE_SUBJECT`` (subject), ``NOOP``. Values: see the ``*_value`` functions.

Reading is strict about what it uses and lenient about what it does not know: a record with an unknown
keytype or a property we do not use is skipped or ignored (Confluent adds keytypes, e.g. CONTEXT, and value
properties, e.g. metadata and ruleSet), and a record that cannot be decoded at all is reported to the caller,
which skips it and moves on, as both registries do, so one bad record never stops a registry from loading.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum

# The magic numbers Confluent writes in keys: 1 for SCHEMA keys, 0 for the others.
SCHEMA_KEY_MAGIC = 1
OTHER_KEY_MAGIC = 0

TOPIC = "_schemas"
# A schema's type is omitted from the value when it is AVRO, as Confluent does.
DEFAULT_SCHEMA_TYPE = "AVRO"


class KeyType(str, Enum):
    SCHEMA = "SCHEMA"
    CONFIG = "CONFIG"
    MODE = "MODE"
    DELETE_SUBJECT = "DELETE_SUBJECT"
    NOOP = "NOOP"


class RecordError(ValueError):
    """A ``_schemas`` record that cannot be read (the writer's fault, or a damaged topic)."""


@dataclass(frozen=True)
class Reference:
    """A schema reference: ``name`` as the referring schema names it (an Avro full name, a Protobuf import
    path, a JSON Schema ``$ref`` URL), and the version of a subject that holds the referenced schema."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaRecord:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = DEFAULT_SCHEMA_TYPE
    references: tuple[Reference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True)
class Key:
    keytype: KeyType
    subject: str | None = None
    version: int | None = None


def _dumps(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def encode_key(key: Key) -> bytes:
    if key.keytype is KeyType.SCHEMA:
        return _dumps({"keytype": "SCHEMA", "subject": key.subject, "version": key.version,
                       "magic": SCHEMA_KEY_MAGIC})
    if key.keytype is KeyType.NOOP:
        return _dumps({"keytype": "NOOP", "magic": OTHER_KEY_MAGIC})
    return _dumps({"keytype": key.keytype.value, "subject": key.subject, "magic": OTHER_KEY_MAGIC})


def schema_key(subject: str, version: int) -> Key:
    return Key(KeyType.SCHEMA, subject, version)


def schema_value(record: SchemaRecord) -> bytes:
    value: dict = {"subject": record.subject, "version": record.version, "id": record.id}
    if record.schema_type != DEFAULT_SCHEMA_TYPE:
        value["schemaType"] = record.schema_type
    if record.references:
        value["references"] = [r.to_json() for r in record.references]
    value["schema"] = record.schema
    value["deleted"] = record.deleted
    return _dumps(value)


def config_value(compatibility: str) -> bytes:
    return _dumps({"compatibilityLevel": compatibility})


def mode_value(mode: str) -> bytes:
    return _dumps({"mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    """Every version of ``subject`` up to ``version`` is soft-deleted."""
    return _dumps({"subject": subject, "version": version})


def decode_key(data: bytes) -> Key | None:
    """The key, or None for a keytype this registry does not use (skipped). RecordError if unreadable."""
    try:
        key = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"key is not JSON: {exc}") from None
    if not isinstance(key, dict) or "keytype" not in key:
        raise RecordError(f"key without a keytype: {data[:200]!r}")
    try:
        keytype = KeyType(key["keytype"])
    except ValueError:
        return None
    subject = key.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise RecordError(f"key's subject is not a string: {data[:200]!r}")
    version = key.get("version")
    if keytype is KeyType.SCHEMA and (not isinstance(subject, str) or not isinstance(version, int)):
        raise RecordError(f"SCHEMA key without a subject and a version: {data[:200]!r}")
    return Key(keytype, subject, version)


def decode_value(data: bytes | None) -> dict | None:
    if data is None or len(data) == 0:
        return None
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"value is not JSON: {exc}") from None
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordError(f"value is not a JSON object: {data[:200]!r}")
    return value


def schema_record(value: dict) -> SchemaRecord:
    try:
        references = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                           for r in value.get("references") or ())
        return SchemaRecord(subject=str(value["subject"]), version=int(value["version"]), id=int(value["id"]),
                            schema=str(value["schema"]),
                            schema_type=str(value.get("schemaType") or DEFAULT_SCHEMA_TYPE),
                            references=references, deleted=bool(value.get("deleted", False)))
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"SCHEMA value without {exc}: {json.dumps(value)[:200]}") from None
