"""What the console's schema pages show of a schema and of the difference between two versions, no I/O:
the schema pretty-printed in one canonical form, a unified line diff of two such forms (the standard
library's difflib), and for Avro and JSON Schema the fields added, removed and changed.

Why a canonical form: two registrations of one schema may differ in key order and white space (a
serializer's ``json.dumps`` and a hand-written ``.avsc``), and a line diff of the texts as registered
would show those as changes. Avro and JSON Schema are JSON, so they are printed with sorted keys and an
indent of two; Protobuf is shown as registered, trailing white space removed (a ``.proto`` has no form
shorter to agree on without its compiler, and a base64 descriptor is shown as it is).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field

AVRO, JSON_SCHEMA, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
CONTEXT_LINES = 3  # unchanged lines shown around each change, as `diff -u`


def pretty(schema_type: str, schema: str) -> str:
    if schema_type in (AVRO, JSON_SCHEMA):
        try:
            return json.dumps(json.loads(schema), indent=2, sort_keys=True, ensure_ascii=False)
        except ValueError:
            pass  # the registry checked it; a registry that did not is shown what it holds
    return "\n".join(line.rstrip() for line in schema.strip("\n").splitlines())


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk" (a @@ line), "ctx"
    text: str


def line_diff(old: str, new: str, context: int = CONTEXT_LINES) -> list[DiffLine]:
    """A unified diff of two pretty-printed schemas, each line with its kind; empty when they are equal."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), n=context, lineterm=""))
    # lines[:2] name the two files ("---", "+++"): the page names the versions itself
    return [DiffLine({"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx"), line) for line in lines[2:]]


@dataclass
class FieldChanges:
    """Fields by path (``address.city``; ``items[].sku`` inside a JSON Schema array)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # type, default, or (JSON Schema) required changed

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def field_changes(schema_type: str, old: str, new: str) -> FieldChanges | None:
    """The fields two versions differ in, or None for Protobuf or a schema that is not JSON."""
    fields_of = {AVRO: avro_fields, JSON_SCHEMA: json_schema_fields}.get(schema_type)
    if fields_of is None:
        return None
    try:
        before, after = fields_of(json.loads(old)), fields_of(json.loads(new))
    except ValueError:
        return None
    return FieldChanges(added=[p for p in after if p not in before], removed=[p for p in before if p not in after],
                        changed=[p for p in after if p in before and after[p] != before[p]])


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


def avro_fields(schema, prefix: str = "") -> dict[str, str]:
    """Each field of each record the schema defines inline (nested records through a field's type, a
    union's branches, an array's items or a map's values) -> its description (type, default, order,
    aliases). A nested record stands in its parent's description by its name only, so a field added to
    it is that field's change, not its parent's too."""
    found: dict[str, str] = {}
    for record, path in _avro_records(schema, prefix):
        for f in record.get("fields") or ():
            if not isinstance(f, dict) or not isinstance(f.get("name"), str):
                continue
            name = f"{path}{f['name']}"
            found[name] = _canonical({k: _avro_shape(v) if k == "type" else v for k, v in f.items() if k != "doc"})
            found.update(avro_fields(f.get("type"), name + "."))
    return found


def _avro_records(schema, path: str):
    """The records ``schema`` defines at its top (itself, or inside a union, array or map)."""
    if isinstance(schema, list):
        for branch in schema:
            yield from _avro_records(branch, path)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "error"):
            yield schema, path
        elif schema.get("type") == "array":
            yield from _avro_records(schema.get("items"), path)
        elif schema.get("type") == "map":
            yield from _avro_records(schema.get("values"), path)


def _avro_shape(schema):
    """A field's type with every inline record reduced to its name."""
    if isinstance(schema, list):
        return [_avro_shape(branch) for branch in schema]
    if isinstance(schema, dict):
        if schema.get("type") in ("record", "error"):
            return {"type": schema["type"], "name": schema.get("name"), "namespace": schema.get("namespace")}
        return {k: _avro_shape(v) if k in ("items", "values") else v for k, v in schema.items() if k != "doc"}
    return schema


def json_schema_fields(schema, prefix: str = "") -> dict[str, str]:
    """Each property of each object the schema describes inline (nested through ``properties`` and an
    array's ``items``) -> its description: its subschema without nested properties, and whether the
    object requires it."""
    found: dict[str, str] = {}
    if not isinstance(schema, dict):
        return found
    properties = schema.get("properties")
    required = set(schema.get("required") or ()) if isinstance(schema.get("required"), list) else set()
    if isinstance(properties, dict):
        for name, sub in properties.items():
            path = f"{prefix}{name}"
            shape = {k: v for k, v in sub.items() if k not in ("properties", "required", "items", "description",
                                                              "title")} if isinstance(sub, dict) else sub
            found[path] = _canonical({"schema": shape, "required": name in required})
            found.update(json_schema_fields(sub, path + "."))
    items = schema.get("items")
    if isinstance(items, dict):
        found.update(json_schema_fields(items, prefix.removesuffix(".") + "[]." if prefix else "[]."))
    return found
