"""JSON Schema: parsed and checked against its metaschema by ``jsonschema`` (the draft named by
``$schema``, draft-07 by default as in Confluent's registry), and compared by the rules Confluent's
registry applies to JSON Schema, which no library implements: data valid under the writer must stay valid
under the reader.

The comparison walks both schemas together (``_Comparison``), resolving ``$ref`` inside each schema and
into its references, and reports Confluent's difference names (TYPE_NARROWED, REQUIRED_ATTRIBUTE_ADDED,
PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL, ...). What it does not compare (``not``, ``if``/``then``/``else``,
``patternProperties``, ``dependencies``) it treats as compatible; docs/schema-registry.md lists the rules.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import jsonschema.exceptions
import jsonschema.validators

from eoslog.schema_registry.formats import Dependency, Incompatibility, ParsedSchema, SchemaInvalid

# Upper bounds: a reader whose bound is lower (or new) than the writer's refuses data the writer allowed.
_UPPER = {"maximum": "MAXIMUM", "exclusiveMaximum": "EXCLUSIVE_MAXIMUM", "maxLength": "MAX_LENGTH",
          "maxItems": "MAX_ITEMS", "maxProperties": "MAX_PROPERTIES"}
_LOWER = {"minimum": "MINIMUM", "exclusiveMinimum": "EXCLUSIVE_MINIMUM", "minLength": "MIN_LENGTH",
          "minItems": "MIN_ITEMS", "minProperties": "MIN_PROPERTIES"}
_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})


class JsonSchema(ParsedSchema):
    schema_type = "JSON"

    def __init__(self, document, resources: dict[str, object]) -> None:
        self.document = document
        self.resources = resources  # reference name -> document, this schema's and its dependencies'
        self.canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
        self.normalized = self.canonical

    def read_errors(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, JsonSchema):
            return [Incompatibility("TYPE_CHANGED", "#/", f"the other schema is {writer.schema_type}, not JSON")]
        comparison = _Comparison(self, writer)
        comparison.compare(self.document, writer.document, "#")
        return comparison.found


def parse_json_schema(text: str, dependencies: tuple[Dependency, ...] = ()) -> JsonSchema:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise SchemaInvalid(f"not JSON: {exc}") from None
    if not isinstance(document, (dict, bool)):
        raise SchemaInvalid("a JSON Schema is an object or a boolean")
    validator = jsonschema.validators.validator_for(document, default=jsonschema.validators.Draft7Validator)
    try:
        validator.check_schema(document)
    except jsonschema.exceptions.SchemaError as exc:
        raise SchemaInvalid(f"{exc.message} at {'/'.join(str(p) for p in exc.path) or 'the root'}") from None
    resources: dict[str, object] = {}
    for dependency in dependencies:
        if not isinstance(dependency.schema, JsonSchema):
            raise SchemaInvalid(f"reference {dependency.name!r} is a {dependency.schema.schema_type} schema")
        resources.update(dependency.schema.resources)
        resources[dependency.name] = dependency.schema.document
    parsed = JsonSchema(document, resources)
    for ref in _refs(document):
        try:
            _resolve(parsed, ref)
        except SchemaInvalid as exc:
            raise SchemaInvalid(f"$ref {ref!r}: {exc}") from None
    return parsed


def _refs(node):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _resolve(schema: JsonSchema, ref: str):
    """``#/pointer`` inside the schema, ``name`` or ``name#/pointer`` into a referenced schema."""
    base, _, pointer = ref.partition("#")
    if base:
        if base not in schema.resources:
            raise SchemaInvalid(f"no reference named {base!r}")
        node = schema.resources[base]
    else:
        node = schema.document
    for part in (p for p in pointer.split("/") if p):
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise SchemaInvalid(f"nothing at {pointer!r}") from None
    return node


def _types(node: dict) -> frozenset[str]:
    declared = node.get("type")
    if declared is None:
        return _ALL_TYPES
    return frozenset([declared] if isinstance(declared, str) else declared)


def _accepts(reader_types: frozenset[str], writer_type: str) -> bool:
    return writer_type in reader_types or (writer_type == "integer" and "number" in reader_types)


def _open(node: dict) -> bool:
    return node.get("additionalProperties", True) is not False


class _Comparison:
    def __init__(self, reader: JsonSchema, writer: JsonSchema) -> None:
        self.reader, self.writer = reader, writer
        self.found: list[Incompatibility] = []
        self._seen: set[tuple[int, int]] = set()

    def _add(self, kind: str, path: str, description: str) -> None:
        self.found.append(Incompatibility(kind, path, description))

    def _deref(self, schema: JsonSchema, node):
        hops = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str) and hops < 64:
            node, hops = _resolve(schema, node["$ref"]), hops + 1
        return node

    def reads(self, reader, writer) -> bool:
        """Whether ``reader`` reads everything ``writer`` allows, without reporting."""
        probe = _Comparison(self.reader, self.writer)
        probe._seen = set(self._seen)
        probe.compare(reader, writer, "#")
        return not probe.found

    def compare(self, reader, writer, path: str) -> None:
        reader, writer = self._deref(self.reader, reader), self._deref(self.writer, writer)
        if reader is True or reader == {} or writer is False:
            return
        if reader is False:
            self._add("SCHEMA_REMOVED", path, "the reader accepts nothing")
            return
        if writer is True:
            writer = {}
        pair = (id(reader), id(writer))
        if pair in self._seen:
            return  # a recursive schema: this pair is being compared further up
        self._seen.add(pair)
        if self._combined(reader, writer, path):
            return
        reader_types, writer_types = _types(reader), _types(writer)
        lost = sorted(t for t in writer_types if not _accepts(reader_types, t))
        if lost:
            overlap = any(_accepts(reader_types, t) or (t == "number" and "integer" in reader_types)
                          for t in writer_types)
            kind = "TYPE_NARROWED" if overlap else "TYPE_CHANGED"
            self._add(kind, path, f"the writer's type(s) {', '.join(lost)} are not accepted any more")
            return
        self._values(reader, writer, path)
        self._bounds(reader, writer, path)
        if "object" in writer_types:
            self._object(reader, writer, path)
        if "array" in writer_types and "items" in reader:
            items = reader["items"]
            writer_items = writer.get("items", True)
            if isinstance(items, (dict, bool)):
                if isinstance(writer_items, list):
                    for i, item in enumerate(writer_items):
                        self.compare(items, item, f"{path}/items/{i}")
                else:
                    self.compare(items, writer_items, f"{path}/items")

    def _combined(self, reader: dict, writer: dict, path: str) -> bool:
        """oneOf/anyOf/allOf; True when they decided the comparison."""
        for key in ("oneOf", "anyOf"):
            if key in writer:
                for i, branch in enumerate(writer[key]):
                    self.compare({k: v for k, v in reader.items()}, branch, f"{path}/{key}/{i}")
                return True
        for key in ("oneOf", "anyOf"):
            if key in reader:
                if not any(self.reads(branch, writer) for branch in reader[key]):
                    self._add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", f"{path}/{key}",
                              f"no branch of the reader's {key} reads the writer's schema")
                return True
        if "allOf" in reader:
            for i, branch in enumerate(reader["allOf"]):
                self.compare(branch, writer, f"{path}/allOf/{i}")
            return True
        if "allOf" in writer:
            if not any(self.reads(reader, branch) for branch in writer["allOf"]):
                self._add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", f"{path}/allOf",
                          "the reader reads no branch of the writer's allOf")
            return True
        return False

    def _values(self, reader: dict, writer: dict, path: str) -> None:
        if "enum" in reader:
            allowed = writer.get("enum", [writer["const"]] if "const" in writer else None)
            if allowed is None or any(v not in reader["enum"] for v in allowed):
                self._add("ENUM_ARRAY_NARROWED", f"{path}/enum", "the writer may write values the reader's enum lacks")
        if "const" in reader and writer.get("const", object()) != reader["const"] and writer.get("enum") != [
                reader["const"]]:
            self._add("CONST_CHANGED", f"{path}/const", "the writer may write other values than the reader's const")
        if "pattern" in reader and reader["pattern"] != writer.get("pattern"):
            kind = "PATTERN_CHANGED" if "pattern" in writer else "PATTERN_ADDED"
            self._add(kind, f"{path}/pattern", "the reader's pattern may refuse the writer's strings")
        if "multipleOf" in reader:
            step = writer.get("multipleOf")
            if step is None or step % reader["multipleOf"] != 0:
                kind = "MULTIPLE_OF_CHANGED" if step is not None else "MULTIPLE_OF_ADDED"
                self._add(kind, f"{path}/multipleOf", "the reader's multipleOf may refuse the writer's numbers")
        if reader.get("uniqueItems") is True and writer.get("uniqueItems") is not True:
            self._add("UNIQUE_ITEMS_ADDED", f"{path}/uniqueItems", "the reader wants unique items")

    def _bounds(self, reader: dict, writer: dict, path: str) -> None:
        for key, name in _UPPER.items():
            if key in reader and isinstance(reader[key], (int, float)) and not isinstance(reader[key], bool):
                if key not in writer:
                    self._add(f"{name}_ADDED", f"{path}/{key}", f"the reader adds {key} {reader[key]}")
                elif writer[key] > reader[key]:
                    self._add(f"{name}_DECREASED", f"{path}/{key}", f"{key} went from {writer[key]} to {reader[key]}")
        for key, name in _LOWER.items():
            if key in reader and isinstance(reader[key], (int, float)) and not isinstance(reader[key], bool):
                if key not in writer:
                    if reader[key] not in (0,):
                        self._add(f"{name}_ADDED", f"{path}/{key}", f"the reader adds {key} {reader[key]}")
                elif writer[key] < reader[key]:
                    self._add(f"{name}_INCREASED", f"{path}/{key}", f"{key} went from {writer[key]} to {reader[key]}")

    def _object(self, reader: dict, writer: dict, path: str) -> None:
        reader_props, writer_props = reader.get("properties", {}), writer.get("properties", {})
        writer_required = set(writer.get("required", ()))
        for name in reader.get("required", ()):
            if name in writer_required:
                continue
            if isinstance(reader_props.get(name), dict) and "default" in reader_props[name]:
                continue  # REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED is compatible
            self._add("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required",
                      f"the property '{name}' is required by the reader and not by the writer")
        for name, writer_prop in writer_props.items():
            here = f"{path}/properties/{name}"
            if name in reader_props:
                self.compare(reader_props[name], writer_prop, here)
            elif reader.get("additionalProperties", True) is False:
                self._add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", here,
                          f"the writer's property '{name}' is not allowed by the reader's closed content model")
            elif isinstance(reader.get("additionalProperties"), dict):
                self.compare(reader["additionalProperties"], writer_prop, here)
        for name, reader_prop in reader_props.items():
            if name in writer_props or not _open(writer):
                continue
            here = f"{path}/properties/{name}"
            extra = writer.get("additionalProperties", True)
            if extra is True or extra == {}:
                if not (reader_prop is True or reader_prop == {}):
                    self._add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", here,
                              f"the property '{name}' is new, and the writer's open content model may hold "
                              "any value under that name")
            else:
                self.compare(reader_prop, extra, here)
        reader_extra, writer_extra = reader.get("additionalProperties", True), writer.get("additionalProperties", True)
        if reader_extra is False and writer_extra is not False:
            self._add("ADDITIONAL_PROPERTIES_REMOVED", f"{path}/additionalProperties",
                      "the reader's content model is closed and the writer's is open")
        elif isinstance(reader_extra, dict) and reader_extra != {}:
            if writer_extra is True or writer_extra == {}:
                self._add("ADDITIONAL_PROPERTIES_NARROWED", f"{path}/additionalProperties",
                          "the reader constrains additional properties the writer left free")
            elif isinstance(writer_extra, dict):
                self.compare(reader_extra, writer_extra, f"{path}/additionalProperties")
