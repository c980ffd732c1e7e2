"""Typed values: Kafka record values in the schema registry's wire format, as Spark struct columns and back.

The wire format is Confluent's (docs/schema-registry.md): magic byte 0, the writer's schema id as a 4-byte
big-endian int, then the Avro binary body. The source decodes each value with its **writer's** schema (by
the id it carries) resolved against one **reader** schema, the subject's version that the query declared
as its column type, so a record written under an older compatible version reads under the newer one (a
field added with a default gets the default) and one written under a newer version loses only the fields
the reader does not have. The sink encodes under one version of its subject.

Where things run: :func:`registered` on the driver, when Spark asks the source for its schema or builds
the sink; everything else in executors, on the :class:`ValueSchema` pickled into each task. The schemas an
executor needs are asked from the registry by id once per Python worker (Spark reuses its workers, so
once per executor in practice), with confluent-kafka's ``SchemaRegistryClient`` (basic auth, TLS and its
own cache, from the ``schema.registry.*`` options).

A value that is not in the wire format, whose id the registry does not know, or that does not decode is
*malformed*: FAILFAST (the default) fails the task with :class:`MalformedValueError` naming topic,
partition and offset; PERMISSIVE gives a null ``value`` for it, as Spark's ``from_avro`` does with
``mode``. A registry that cannot be reached fails the task in both modes: nulls there would drop good
records for an outage.
"""

from __future__ import annotations

import functools
import io
import json
import struct
import threading
from dataclasses import dataclass

from eoslog.spark.errors import MalformedValueError

MAGIC = 0
HEADER = struct.Struct(">bI")  # magic byte, schema id
FAILFAST = "FAILFAST"
PERMISSIVE = "PERMISSIVE"
SCHEMA_ID_METADATA = "eoslog.schema.id"  # on the declared ``value`` field: the reader schema's id
SUBJECT_METADATA = "eoslog.subject"


class RegistryError(RuntimeError):
    """The registry could not be asked (down, refused, or the subject has no Avro version)."""


@dataclass(frozen=True)
class ValueSchema:
    """What a task needs to decode or encode values; picklable on purpose."""

    registry: tuple[tuple[str, str], ...]  # SchemaRegistryClient configuration, as sorted pairs
    subject: str
    schema_id: int  # the reader schema (source) or the writer schema (sink)
    mode: str = FAILFAST

    @property
    def registry_config(self) -> dict[str, str]:
        return dict(self.registry)


# ---- the registry, once per process ----------------------------------------------------------------------

_lock = threading.Lock()
_clients: dict[tuple, object] = {}
_schemas: dict[tuple, dict | list | str] = {}  # (registry, id) -> the parsed, expanded Avro schema


def _client(registry: tuple):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    with _lock:
        if registry not in _clients:
            _clients[registry] = SchemaRegistryClient(dict(registry))
        return _clients[registry]


class UnknownSchemaId(LookupError):
    pass


def _named_schemas(client, schema) -> dict:
    """The named types of ``schema``'s references (recursively), parsed in dependency order."""
    import fastavro

    named: dict = {}
    for ref in schema.references or []:
        registered = client.get_version(ref.subject, ref.version, True)
        named.update(_named_schemas(client, registered.schema))
        fastavro.parse_schema(json.loads(registered.schema.schema_str), named_schemas=named)
    return named


def parsed_schema(registry: tuple, schema_id: int):
    """The Avro schema with id ``schema_id``, parsed with its references and expanded; cached."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    from eoslog.spark import avro_types

    key = (registry, schema_id)
    found = _schemas.get(key)
    if found is not None:
        return found
    client = _client(registry)
    try:
        schema = client.get_schema(schema_id)
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            raise UnknownSchemaId(f"schema id {schema_id} is not registered ({exc.error_message})") from exc
        raise RegistryError(f"the schema registry failed to give schema id {schema_id}: {exc}") from exc
    except Exception as exc:  # connection refused, TLS, timeout: never a reason to null a record
        raise RegistryError(f"the schema registry at {dict(registry).get('url')} could not be asked for schema "
                            f"id {schema_id}: {exc}") from exc
    if (schema.schema_type or "AVRO") != "AVRO":
        raise UnknownSchemaId(f"schema id {schema_id} is {schema.schema_type}, not Avro")
    parsed = avro_types.parse(schema.schema_str, _named_schemas(client, schema))
    with _lock:
        _schemas[key] = parsed
    return parsed


TYPED_EXTRA_HINT = ("typed values (schema.registry.url) need fastavro and confluent-kafka's registry client: "
                    "pip install 'eoslog[spark,schema-registry]'")


def registered(registry: dict[str, str], subject: str, mode: str = FAILFAST):
    """Driver side: (ValueSchema, Spark field) for the latest version of ``subject``."""
    try:
        import fastavro  # noqa: F401
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.error import SchemaRegistryError
    except ImportError as exc:
        raise ImportError(TYPED_EXTRA_HINT) from exc

    from eoslog.spark import avro_types

    frozen = tuple(sorted(registry.items()))
    try:
        # a client of its own: SchemaRegistryClient keeps a subject's latest version for its lifetime, and
        # Spark plans every query (and a restarted one) in Python workers it reuses
        latest = SchemaRegistryClient(dict(registry)).get_latest_version(subject)
    except SchemaRegistryError as exc:
        raise RegistryError(f"subject {subject!r}: {exc.error_message} (error code {exc.error_code})") from exc
    except Exception as exc:
        raise RegistryError(f"the schema registry at {registry.get('url')} could not be asked for subject "
                            f"{subject!r}: {exc}") from exc
    if (latest.schema.schema_type or "AVRO") != "AVRO":
        raise RegistryError(f"subject {subject!r} holds {latest.schema.schema_type} schemas; typed columns "
                            "are Avro only")
    value = ValueSchema(frozen, subject, latest.schema_id, mode)
    parsed = parsed_schema(frozen, latest.schema_id)
    field = avro_types.spark_type(parsed)
    metadata = {SCHEMA_ID_METADATA: latest.schema_id, SUBJECT_METADATA: subject}
    from pyspark.sql.types import StructField

    return value, StructField("value", field.dataType, True, metadata)


# ---- decode (source) ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _decoded_converter(registry: tuple, schema_id: int):
    from eoslog.spark import avro_types

    return avro_types.decoded_to_arrow(parsed_schema(registry, schema_id))


def decode(value_schema: ValueSchema, values: list, offsets, topic: str, partition: int, arrow_type):
    """The ``value`` column as an Arrow struct array of ``arrow_type``: ``values`` (bytes or None, one per
    record, ``offsets`` beside them) decoded with their writers' schemas into the reader schema."""
    import fastavro
    import pyarrow as pa

    registry, permissive = value_schema.registry, value_schema.mode == PERMISSIVE
    reader = parsed_schema(registry, value_schema.schema_id)
    convert = _decoded_converter(registry, value_schema.schema_id)
    writers: dict[int, object] = {}
    out: list = []
    append = out.append
    for i, raw in enumerate(values):
        if raw is None:
            append(None)
            continue
        try:
            if len(raw) < HEADER.size or raw[0] != MAGIC:
                raise MalformedValueError("it is not in the schema registry's wire format (magic byte 0, then a "
                                          f"4-byte schema id): {len(raw)} byte(s) starting {bytes(raw[:5]).hex(' ')}")
            schema_id = HEADER.unpack_from(raw)[1]
            writer = writers.get(schema_id)
            if writer is None:
                writer = writers[schema_id] = parsed_schema(registry, schema_id)
            body = io.BytesIO(raw)
            body.seek(HEADER.size)
            record = fastavro.schemaless_reader(body, writer, None if schema_id == value_schema.schema_id else reader)
        except RegistryError:
            raise
        except Exception as exc:
            if permissive:
                append(None)
                continue
            raise MalformedValueError(
                f"{topic}-{partition} offset {offsets[i]}: the value cannot be read as subject "
                f"{value_schema.subject!r} (schema id {value_schema.schema_id}): {exc}; option avro.mode=PERMISSIVE "
                "reads such values as null") from exc
        append(record if convert is None else convert(record))
    return pa.array(out, arrow_type)


# ---- encode (sink) -----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _encodable_converter(registry: tuple, schema_id: int):
    from eoslog.spark import avro_types

    return avro_types.arrow_to_encodable(parsed_schema(registry, schema_id))


def encode(value_schema: ValueSchema, column) -> list:
    """An Arrow struct column as wire-format values (bytes; None stays None: a tombstone)."""
    import fastavro

    registry = value_schema.registry
    writer = parsed_schema(registry, value_schema.schema_id)
    convert = _encodable_converter(registry, value_schema.schema_id)
    header = HEADER.pack(MAGIC, value_schema.schema_id)
    out: list = []
    for i, row in enumerate(column.to_pylist()):
        if row is None:
            out.append(None)
            continue
        body = io.BytesIO()
        body.write(header)
        try:
            fastavro.schemaless_writer(body, writer, row if convert is None else convert(row))
        except Exception as exc:
            raise MalformedValueError(f"row {i} of the batch does not fit subject {value_schema.subject!r} "
                                      f"(schema id {value_schema.schema_id}): {exc}") from exc
        out.append(body.getvalue())
    return out
