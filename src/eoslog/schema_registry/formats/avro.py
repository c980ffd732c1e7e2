"""Avro schemas, parsed and checked by the Apache ``avro`` package: its parser (named types, defaults,
namespaces) and its ``ReaderWriterCompatibilityChecker``, the port of Avro's Java SchemaCompatibility that
Confluent's registry runs. Nothing of Avro's rules is written here.

References: a referenced schema defines named types that the referring one uses by name, so the
dependencies are parsed into one ``Names`` table before the schema itself.
"""

from __future__ import annotations

import copy
import json

import avro.compatibility
import avro.errors
import avro.name
import avro.schema

from eoslog.schema_registry.formats import Dependency, Incompatibility, ParsedSchema, SchemaInvalid

_KINDS = {  # avro's incompatibility names as Confluent's registry reports them
    "name_mismatch": "NAME_MISMATCH",
    "fixed_size_mismatch": "FIXED_SIZE_MISMATCH",
    "missing_enum_symbols": "MISSING_ENUM_SYMBOLS",
    "reader_field_missing_default_value": "READER_FIELD_MISSING_DEFAULT_VALUE",
    "type_mismatch": "TYPE_MISMATCH",
    "missing_union_branch": "MISSING_UNION_BRANCH",
}


class AvroSchema(ParsedSchema):
    schema_type = "AVRO"

    def __init__(self, text: str, schema: avro.schema.Schema, names: avro.name.Names) -> None:
        self.schema = schema
        self.names = names  # the named types this schema and its dependencies define
        document = json.loads(text)
        self.canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
        self.normalized = json.dumps(_normalize(document, None), sort_keys=True, separators=(",", ":"))

    def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, AvroSchema):
            return [Incompatibility("TYPE_MISMATCH", "/", f"the other schema is {writer.schema_type}, not AVRO")]
        result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(self.schema, writer.schema)
        if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
            return []
        kinds = {_KINDS.get(k.value, k.value.upper()) for k in result.incompatibilities}
        # avro merges several findings into sets, so a kind pairs with its message only when it is alone
        kind = kinds.pop() if len(kinds) == 1 else "INCOMPATIBLE"
        found = []
        for message, location in zip(sorted(result.messages), sorted(result.locations)):
            if kind == "READER_FIELD_MISSING_DEFAULT_VALUE":
                message = f"the field '{message}' has no default value and is missing in the other schema"
            found.append(Incompatibility(kind, location, message))
        return found or [Incompatibility("TYPE_MISMATCH", "/", "incompatible")]


def _normalize(node, namespace):
    """Full names everywhere and no empty namespaces, so writing a name short or long is the same schema."""
    if isinstance(node, list):
        return [_normalize(n, namespace) for n in node]
    if isinstance(node, str):
        if node in _PRIMITIVES or "." in node or not namespace:
            return node
        return f"{namespace}.{node}"
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if node.get("type") in ("record", "error", "enum", "fixed") and "name" in node:
        name = node["name"]
        if "." not in name:
            ns = node.get("namespace", namespace)
            name = f"{ns}.{name}" if ns else name
        node["name"] = name
        node.pop("namespace", None)
        namespace = name.rpartition(".")[0] or None
    for key in ("type", "items", "values", "fields"):
        if key in node:
            node[key] = _normalize(node[key], namespace)
    return node


_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string", "record", "enum", "array",
               "map", "fixed", "error"}


def parse_avro(text: str, dependencies: tuple[Dependency, ...] = ()) -> AvroSchema:
    names = avro.name.Names(validate_names=True)
    for dependency in dependencies:
        if not isinstance(dependency.schema, AvroSchema):
            raise SchemaInvalid(f"reference {dependency.name!r} is a {dependency.schema.schema_type} schema, "
                                "an Avro schema can only reference Avro schemas")
        for full_name, named in dependency.schema.names.names.items():
            names.names.setdefault(full_name, named)
    names = copy.copy(names)
    names.names = dict(names.names)
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise SchemaInvalid(f"not JSON: {exc}") from None
    try:
        schema = avro.schema.make_avsc_object(document, names, validate_enum_symbols=True, validate_names=True)
    except (avro.errors.AvroException, TypeError, KeyError, AttributeError, ValueError) as exc:
        raise SchemaInvalid(str(exc) or type(exc).__name__) from None
    return AvroSchema(text, schema, names)
