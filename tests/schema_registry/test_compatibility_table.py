"""The compatibility levels over each format, as a table: a subject's history (oldest first), a candidate,
and for every level either None (may be registered) or the error type the refusal must name. The formats
are parsed by their libraries (avro, jsonschema, protoc); ``compatibility.check`` is pure, so these run
without a broker. test_rest_api.py and test_confluent_client.py show the same refusals over HTTP."""

from __future__ import annotations

import json

import pytest

from eoslog.schema_registry.compatibility import Earlier, check
from eoslog.schema_registry.formats import parse

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


def outcomes(none=None, b=None, bt=None, f=None, ft=None, full=None, fullt=None) -> dict[str, str | None]:
    return dict(zip(LEVELS, (none, b, bt, f, ft, full, fullt), strict=True))


# ---- Avro ------------------------------------------------------------------------------------------------

def avro(*fields) -> str:
    return json.dumps({"type": "record", "name": "Payment", "namespace": "eoslog.test", "fields": list(fields)})


A = {"name": "a", "type": "int"}
A_LONG = {"name": "a", "type": "long"}
B = {"name": "b", "type": "string"}
B_DEFAULT = {"name": "b", "type": "string", "default": ""}
MISSING = "READER_FIELD_MISSING_DEFAULT_VALUE"

AVRO = [
    ("optional field added", [avro(A)], avro(A, B_DEFAULT), outcomes()),
    ("field without default added", [avro(A)], avro(A, B), outcomes(b=MISSING, bt=MISSING, full=MISSING,
                                                                    fullt=MISSING)),
    ("field without default removed", [avro(A, B)], avro(A), outcomes(f=MISSING, ft=MISSING, full=MISSING,
                                                                     fullt=MISSING)),
    ("int widened to long", [avro(A)], avro(A_LONG), outcomes(f="TYPE_MISMATCH", ft="TYPE_MISMATCH",
                                                              full="TYPE_MISMATCH", fullt="TYPE_MISMATCH")),
    ("enum symbol removed",
     [json.dumps({"type": "enum", "name": "Kind", "symbols": ["A", "B"]})],
     json.dumps({"type": "enum", "name": "Kind", "symbols": ["A"]}),
     outcomes(b="MISSING_ENUM_SYMBOLS", bt="MISSING_ENUM_SYMBOLS", full="MISSING_ENUM_SYMBOLS",
              fullt="MISSING_ENUM_SYMBOLS")),
    ("record renamed", [avro(A)], json.dumps({"type": "record", "name": "Other", "fields": [A]}),
     outcomes(b="NAME_MISMATCH", bt="NAME_MISMATCH", f="NAME_MISMATCH", ft="NAME_MISMATCH", full="NAME_MISMATCH",
              fullt="NAME_MISMATCH")),
    # compatible with the latest version only: the transitive levels look further back
    ("default dropped after it was added", [avro(A), avro(A, B_DEFAULT)], avro(A, B),
     outcomes(bt=MISSING, fullt=MISSING)),
    ("field removed once it had a default", [avro(A, B), avro(A, B_DEFAULT)], avro(A),
     outcomes(ft=MISSING, fullt=MISSING)),
]

# ---- JSON Schema -----------------------------------------------------------------------------------------

def closed(**properties) -> str:
    return json.dumps({"type": "object", "properties": properties, "additionalProperties": False})


# A difference is named from the writer's schema to the reader's, as Confluent's registry names it: a
# reader with a lower maxLength is MAX_LENGTH_DECREASED whichever of the two is the newer.
def text(max_length: int) -> str:
    return json.dumps({"type": "string", "maxLength": max_length})


JSON = [
    ("property added to a closed model", [closed(a={"type": "integer"})],
     closed(a={"type": "integer"}, b={"type": "string"}),
     outcomes(f="PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", ft="PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
              full="PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", fullt="PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")),
    ("required property added", [json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})],
     json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
     outcomes(b="REQUIRED_ATTRIBUTE_ADDED", bt="REQUIRED_ATTRIBUTE_ADDED", full="REQUIRED_ATTRIBUTE_ADDED",
              fullt="REQUIRED_ATTRIBUTE_ADDED")),
    # an open model may have held any value under a name it did not declare
    ("property added to an open model", [json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})],
     json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}),
     outcomes(b="PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", bt="PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
              full="PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", fullt="PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")),
    ("property removed from an open model",
     [json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}})],
     json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}}),
     outcomes(f="PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", ft="PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
              full="PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", fullt="PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")),
    ("enum narrowed", [json.dumps({"enum": ["a", "b"]})], json.dumps({"enum": ["a"]}),
     outcomes(b="ENUM_ARRAY_NARROWED", bt="ENUM_ARRAY_NARROWED", full="ENUM_ARRAY_NARROWED",
              fullt="ENUM_ARRAY_NARROWED")),
    ("integer widened to number", [closed(a={"type": "integer"})], closed(a={"type": "number"}),
     outcomes(f="TYPE_NARROWED", ft="TYPE_NARROWED", full="TYPE_NARROWED", fullt="TYPE_NARROWED")),
    ("string became integer", [closed(a={"type": "string"})], closed(a={"type": "integer"}),
     outcomes(b="TYPE_CHANGED", bt="TYPE_CHANGED", f="TYPE_CHANGED", ft="TYPE_CHANGED", full="TYPE_CHANGED",
              fullt="TYPE_CHANGED")),
    ("maximum length raised", [text(10)], text(20),
     outcomes(f="MAX_LENGTH_DECREASED", ft="MAX_LENGTH_DECREASED", full="MAX_LENGTH_DECREASED",
              fullt="MAX_LENGTH_DECREASED")),
    # between the latest and an older version: only the transitive levels see the older one
    ("shorter than an older version", [text(20), text(10)], text(15),
     outcomes(bt="MAX_LENGTH_DECREASED", f="MAX_LENGTH_DECREASED", ft="MAX_LENGTH_DECREASED",
              full="MAX_LENGTH_DECREASED", fullt="MAX_LENGTH_DECREASED")),
    ("longer than an older version", [text(10), text(20)], text(15),
     outcomes(b="MAX_LENGTH_DECREASED", bt="MAX_LENGTH_DECREASED", ft="MAX_LENGTH_DECREASED",
              full="MAX_LENGTH_DECREASED", fullt="MAX_LENGTH_DECREASED")),
]

# ---- Protobuf --------------------------------------------------------------------------------------------

def proto(body: str, syntax: str = "proto3", package: str = "eoslog.test") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{body}\n'


M = "message M { int32 a = 1; }"
M_B = "message M { int32 a = 1; string b = 2; }"
N = "message N { string n = 1; }"

PROTOBUF = [
    ("field added", [proto(M)], proto(M_B), outcomes()),
    ("field removed", [proto(M_B)], proto(M), outcomes()),
    ("int32 became int64 (one wire type)", [proto(M)], proto("message M { int64 a = 1; }"), outcomes()),
    ("int32 became string", [proto(M)], proto("message M { string a = 1; }"),
     outcomes(**{level: "FIELD_SCALAR_KIND_CHANGED" for level in ("b", "bt", "f", "ft", "full", "fullt")})),
    ("field became a message", [proto(M + N)], proto("message M { N a = 1; }" + N),
     outcomes(**{level: "FIELD_KIND_CHANGED" for level in ("b", "bt", "f", "ft", "full", "fullt")})),
    ("message removed", [proto(M + N)], proto(M),
     outcomes(b="MESSAGE_REMOVED", bt="MESSAGE_REMOVED", full="MESSAGE_REMOVED", fullt="MESSAGE_REMOVED")),
    ("package changed", [proto(M)], proto(M, package="eoslog.other"),
     outcomes(**{level: "PACKAGE_CHANGED" for level in ("b", "bt", "f", "ft", "full", "fullt")})),
    ("proto2 required field added", [proto("message M { optional int32 a = 1; }", "proto2")],
     proto("message M { optional int32 a = 1; required int32 b = 2; }", "proto2"),
     outcomes(b="REQUIRED_FIELD_ADDED", bt="REQUIRED_FIELD_ADDED", f="REQUIRED_FIELD_REMOVED",
              ft="REQUIRED_FIELD_REMOVED", full="REQUIRED_FIELD_ADDED", fullt="REQUIRED_FIELD_ADDED")),
    # a message an older version had and the latest dropped: only the transitive levels see it
    ("message an older version had", [proto(M + N), proto(M)], proto(M_B),
     outcomes(bt="MESSAGE_REMOVED", fullt="MESSAGE_REMOVED")),
]

CASES = [pytest.param(kind, history, candidate, levels, id=f"{kind}: {name}")
         for kind, table in (("AVRO", AVRO), ("JSON", JSON), ("PROTOBUF", PROTOBUF))
         for name, history, candidate, levels in table]


@pytest.mark.parametrize(("schema_type", "history", "candidate", "levels"), CASES)
def test_every_level(schema_type, history, candidate, levels):
    earlier = [Earlier(version, parse(schema_type, schema)) for version, schema in enumerate(history, 1)]
    parsed = parse(schema_type, candidate)
    got = {}
    for level in LEVELS:
        messages = check(level, parsed, earlier)
        expected = levels[level]
        if expected is None:
            got[level] = None if not messages else messages
        else:
            # the refusal names the error type, the version it broke against and the level
            named = any(f"errorType:'{expected}'" in m for m in messages)
            got[level] = expected if named and f"{{compatibility: '{level}'}}" in messages else messages
    assert got == levels


def test_a_refusal_names_each_version_it_breaks_against():
    history = [avro(A), avro(A, B_DEFAULT), avro(A, B_DEFAULT, {"name": "c", "type": "int", "default": 0})]
    earlier = [Earlier(version, parse("AVRO", schema)) for version, schema in enumerate(history, 1)]
    messages = check("FULL_TRANSITIVE", parse("AVRO", avro(A_LONG)), earlier)
    assert [m for m in messages if m.startswith("{oldSchemaVersion")] == [
        "{oldSchemaVersion: 3}", "{oldSchemaVersion: 2}", "{oldSchemaVersion: 1}"]
    assert "path:'/fields/0/type'" in messages[0]


def test_another_schema_type_is_refused_at_every_level_but_none():
    earlier = [Earlier(1, parse("AVRO", avro(A)))]
    candidate = parse("JSON", closed(a={"type": "integer"}))
    assert check("NONE", candidate, earlier) == []
    for level in LEVELS[1:]:
        assert "errorType:'TYPE_CHANGED'" in check(level, candidate, earlier)[0]
