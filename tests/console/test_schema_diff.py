"""The schema pages' pure core (console/schema_diff.py): the canonical pretty form, the line diff and
the fields added, removed and changed."""

from __future__ import annotations

import json

from eoslog.console.schema_diff import field_changes, line_diff, pretty


def test_the_pretty_form_ignores_key_order_and_white_space():
    a = '{"type":"record","name":"P","fields":[{"name":"id","type":"string"}]}'
    b = '{\n "name": "P",   "fields": [ {"type": "string", "name": "id"} ], "type": "record"}'
    assert pretty("AVRO", a) == pretty("AVRO", b)
    assert line_diff(pretty("AVRO", a), pretty("AVRO", b)) == []
    assert pretty("PROTOBUF", 'syntax = "proto3";   \nmessage M {}\n\n') == 'syntax = "proto3";\nmessage M {}'


def test_the_line_diff_marks_lines_by_kind():
    old, new = "a\nb\nc", "a\nB\nc\nd"
    kinds = [(line.kind, line.text) for line in line_diff(old, new)]
    assert kinds == [("hunk", "@@ -1,3 +1,4 @@"), ("ctx", " a"), ("del", "-b"), ("add", "+B"), ("ctx", " c"),
                     ("add", "+d")]


def record(name, fields):
    return {"type": "record", "name": name, "fields": fields}


def test_avro_fields_added_removed_changed_in_nested_records():
    address = record("Address", [{"name": "city", "type": "string"}])
    old = record("P", [{"name": "id", "type": "string"}, {"name": "gone", "type": "int"},
                       {"name": "home", "type": ["null", address], "default": None}])
    new_address = record("Address", [{"name": "city", "type": "string"}, {"name": "zip", "type": "string",
                                                                          "default": ""}])
    new = record("P", [{"name": "id", "type": "long"}, {"name": "home", "type": ["null", new_address], "default": None},
                       {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []}])
    changes = field_changes("AVRO", json.dumps(old), json.dumps(new))
    # home's own type did not change (its record is named the same): only the field inside it did
    assert (changes.added, changes.removed, changes.changed) == (["home.zip", "tags"], ["gone"], ["id"])
    assert not field_changes("AVRO", json.dumps(old), json.dumps(old))
    assert field_changes("PROTOBUF", "message A {}", "message B {}") is None


def test_json_schema_properties_and_required():
    old = {"type": "object", "properties": {"id": {"type": "integer"}, "lines": {
        "type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}}}, "required": ["id"]}
    new = {"type": "object", "properties": {"id": {"type": "integer"}, "total": {"type": "number"}, "lines": {
        "type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}},
                                   "required": ["sku"]}}}, "required": ["id"]}
    changes = field_changes("JSON", json.dumps(old), json.dumps(new))
    assert (changes.added, changes.removed, changes.changed) == (["total"], [], ["lines[].sku"])
