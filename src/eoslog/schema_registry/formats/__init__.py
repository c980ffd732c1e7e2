"""The three schema formats, each parsed by its own well-kept library (docs/dependencies.md): Avro by the
Apache ``avro`` package (and its reader/writer compatibility checker), JSON Schema by ``jsonschema``,
Protobuf compiled to descriptors by ``grpcio-tools``' protoc.

:func:`parse` is the one entry: a schema's text, its type and its references already parsed, to a
:class:`ParsedSchema` or :class:`SchemaInvalid`. A parsed schema knows its identity (``canonical``: two
registrations of the same schema get the same id), its normalized text, and which of a writer's data it
cannot read (:meth:`ParsedSchema.read_errors`), from which ``compatibility.py`` builds every level.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


class SchemaInvalid(ValueError):
    """The schema does not parse, or its references do not resolve (the client's fault)."""


@dataclass(frozen=True)
class Incompatibility:
    """One thing that breaks: Confluent's error type name, where in the schema, and a sentence."""

    kind: str
    path: str
    description: str

    def __str__(self) -> str:
        return f"{{errorType:'{self.kind}', path:'{self.path}', description:'{self.description}'}}"


class ParsedSchema:
    schema_type: str
    canonical: str   # identity: equal for the same schema written differently (spacing, key order)
    normalized: str  # the text kept when a registration asks normalize=true

    def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
        """What of the data written with ``writer`` this schema, as the reader, cannot read."""
        raise NotImplementedError


@dataclass(frozen=True)
class Dependency:
    """A reference resolved: the name the referring schema uses, and the referenced schema parsed."""

    name: str
    schema: ParsedSchema


def parse(schema_type: str, text: str, dependencies: tuple[Dependency, ...] = ()) -> ParsedSchema:
    try:
        return _parse(schema_type, text, dependencies)
    except RecursionError:  # a hostile or broken schema nested thousands deep: the client's fault, not ours
        raise SchemaInvalid("the schema is nested too deeply to be read") from None


def _parse(schema_type: str, text: str, dependencies: tuple[Dependency, ...]) -> ParsedSchema:
    if schema_type == "AVRO":
        from eoslog.schema_registry.formats.avro import parse_avro

        return parse_avro(text, dependencies)
    if schema_type == "JSON":
        from eoslog.schema_registry.formats.json_schema import parse_json_schema

        return parse_json_schema(text, dependencies)
    if schema_type == "PROTOBUF":
        from eoslog.schema_registry.formats.protobuf import parse_protobuf

        return parse_protobuf(text, dependencies)
    raise SchemaInvalid(f"unknown schema type {schema_type!r}; one of {', '.join(SCHEMA_TYPES)}")
