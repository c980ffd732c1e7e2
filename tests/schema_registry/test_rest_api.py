"""The REST API as Confluent's clients see it: the JSON bodies and the error codes they parse, over a real
registry in front of a real broker (conftest.py)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.interop

RECORD = {"type": "record", "name": "Payment", "namespace": "shop",
          "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}
WITH_CURRENCY = {**RECORD, "fields": RECORD["fields"] + [{"name": "currency", "type": "string", "default": "EUR"}]}
AMOUNT_AS_STRING = {**RECORD, "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "string"}]}


def avro(schema: dict, **extra) -> dict:
    return {"schema": json.dumps(schema), **extra}


def test_register_evolve_read_back(http):
    status, first = http.post("/subjects/pay-value/versions", avro(RECORD))
    assert status == 200
    # the same schema again, spaced differently: the same id, no new version
    assert http.post("/subjects/pay-value/versions",
                     {"schema": json.dumps(RECORD, indent=2)}) == (200, {"id": first["id"]})
    status, second = http.post("/subjects/pay-value/versions", avro(WITH_CURRENCY))
    assert status == 200 and second["id"] != first["id"]
    assert http.get("/subjects/pay-value/versions") == (200, [1, 2])
    status, latest = http.get("/subjects/pay-value/versions/latest")
    assert status == 200
    assert latest == {"subject": "pay-value", "version": 2, "id": second["id"], "schema": json.dumps(WITH_CURRENCY)}
    assert http.get(f"/schemas/ids/{first['id']}") == (200, {"schema": json.dumps(RECORD)})
    assert http.get(f"/schemas/ids/{first['id']}/subjects") == (200, ["pay-value"])
    assert http.get(f"/schemas/ids/{second['id']}/versions") == (200, [{"subject": "pay-value", "version": 2}])
    assert http.get("/subjects/pay-value/versions/1/schema") == (200, RECORD)
    # the same schema under another subject keeps its id
    assert http.post("/subjects/other-value/versions", avro(RECORD)) == (200, {"id": first["id"]})
    status, found = http.post("/subjects/pay-value", avro(WITH_CURRENCY))
    assert status == 200 and (found["version"], found["id"]) == (2, second["id"])
    assert "pay-value" in http.get("/subjects")[1]
    assert http.get("/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])


def test_incompatible_change_is_refused_with_409_naming_what_broke(http):
    assert http.post("/subjects/strict-value/versions", avro(RECORD))[0] == 200
    status, body = http.post("/subjects/strict-value/versions", avro(AMOUNT_AS_STRING))
    assert status == 409 and body["error_code"] == 409
    assert "TYPE_MISMATCH" in body["message"] and "/fields/1/type" in body["message"]
    assert http.get("/subjects/strict-value/versions") == (200, [1])  # nothing written
    status, checked = http.post("/compatibility/subjects/strict-value/versions/latest?verbose=true",
                                avro(AMOUNT_AS_STRING))
    assert status == 200 and checked["is_compatible"] is False
    assert any("TYPE_MISMATCH" in m for m in checked["messages"])
    assert http.post("/compatibility/subjects/strict-value/versions/latest", avro(WITH_CURRENCY)) == \
        (200, {"is_compatible": True})


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), [
    ("GET", "/subjects/missing/versions", None, 404, 40401),
    ("GET", "/subjects/missing/versions/1", None, 404, 40401),
    ("GET", "/schemas/ids/999999", None, 404, 40403),
    ("GET", "/subjects/known-value/versions/7", None, 404, 40402),
    ("GET", "/subjects/known-value/versions/zero", None, 422, 42202),
    ("POST", "/subjects/known-value/versions", {"schema": "{\"type\": \"recordd\"}"}, 422, 42201),
    ("POST", "/subjects/known-value/versions", {"schema": ""}, 422, 42201),
    ("POST", "/subjects/known-value/versions", {"schema": "{}", "schemaType": "XML"}, 422, 42201),
    ("POST", "/subjects/known-value", {"schema": "{\"type\": \"int\"}"}, 404, 40403),
    ("POST", "/subjects/missing", {"schema": "{\"type\": \"int\"}"}, 404, 40401),
    ("PUT", "/config/known-value", {"compatibility": "SIDEWAYS"}, 422, 42203),
    ("GET", "/config/known-value", None, 404, 40408),
    ("PUT", "/mode/known-value", {"mode": "READWRITEISH"}, 422, 42204),
    ("GET", "/mode/known-value", None, 404, 40409),
    ("POST", "/subjects/known-value/versions",
     {"schema": "{\"type\": \"string\"}", "references": [{"name": "x", "subject": "nobody", "version": 1}]},
     422, 42201),
    # nested thousands deep: refused as the client's fault, not a 500 from a RecursionError
    ("POST", "/subjects/deep-value/versions", {"schema": "[" * 3000 + '"int"' + "]" * 3000}, 422, 42201),
    ("POST", "/subjects/deep-value/versions", {"schema": '{"items":' * 3000 + "{}" + "}" * 3000,
                                               "schemaType": "JSON"}, 422, 42201),
    ("POST", "/compatibility/subjects/known-value/versions/latest", {"schema": "[" * 3000 + '"int"' + "]" * 3000},
     422, 42201),
])
def test_error_codes(http, method, path, body, status, code):
    http.post("/subjects/known-value/versions", {"schema": "{\"type\": \"string\"}"})
    got_status, got = http.call(method, path, body)
    assert (got_status, got["error_code"]) == (status, code), got
    assert got["message"]


def test_compatibility_configuration_global_and_per_subject(http):
    assert http.get("/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert http.put("/config/loose-value", {"compatibility": "none"}) == (200, {"compatibility": "NONE"})
    assert http.get("/config/loose-value") == (200, {"compatibilityLevel": "NONE"})
    assert http.post("/subjects/loose-value/versions", avro(RECORD))[0] == 200
    assert http.post("/subjects/loose-value/versions", avro(AMOUNT_AS_STRING))[0] == 200  # NONE lets it in
    assert http.delete("/config/loose-value") == (200, {"compatibilityLevel": "NONE"})
    assert http.get("/config/loose-value?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert http.put("/config", {"compatibility": "FULL_TRANSITIVE"}) == (200, {"compatibility": "FULL_TRANSITIVE"})
    try:
        assert http.get("/config") == (200, {"compatibilityLevel": "FULL_TRANSITIVE"})
        assert http.get("/config/loose-value?defaultToGlobal=true")[1] == {"compatibilityLevel": "FULL_TRANSITIVE"}
    finally:
        assert http.put("/config", {"compatibility": "BACKWARD"})[0] == 200


def test_a_read_only_subject_refuses_in_confluents_order(http):
    """Confluent's registry parses and looks the schema up before it asks the mode: an invalid schema is
    INVALID_SCHEMA (42201) and a schema the subject already has answers its id, READONLY or not; only a
    registration that would write is OPERATION_NOT_PERMITTED (42205)."""
    status, registered = http.post("/subjects/read-only-order-value/versions", avro(RECORD))
    assert status == 200
    assert http.put("/mode/read-only-order-value", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    try:
        status, body = http.post("/subjects/read-only-order-value/versions", {"schema": "{not avro"})
        assert (status, body["error_code"]) == (422, 42201)
        assert http.post("/subjects/read-only-order-value/versions", avro(RECORD)) == (200, registered)
        status, body = http.post("/subjects/read-only-order-value/versions", avro(WITH_CURRENCY))
        assert (status, body) == (422, {"error_code": 42205,
                                        "message": "Subject read-only-order-value is in read-only mode"})
    finally:
        assert http.delete("/mode/read-only-order-value")[0] == 200


def test_import_mode_registers_given_ids_only(http):
    """As Confluent's registry: in IMPORT mode a registration without an id would assign one, which only
    READWRITE does (42205, "not in read-write mode")."""
    assert http.put("/mode/import-only-value", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    try:
        assert http.post("/subjects/import-only-value/versions", avro(RECORD)) == (
            422, {"error_code": 42205, "message": "Subject import-only-value is not in read-write mode"})
        assert http.post("/subjects/import-only-value/versions", avro(RECORD, id=7000, version=1)) == (
            200, {"id": 7000})
    finally:
        assert http.delete("/mode/import-only-value")[0] == 200


def test_modes(http):
    assert http.get("/mode") == (200, {"mode": "READWRITE"})
    assert http.post("/subjects/frozen-value/versions", avro(RECORD))[0] == 200
    assert http.put("/mode/frozen-value", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = http.post("/subjects/frozen-value/versions", avro(WITH_CURRENCY))
    assert (status, body["error_code"]) == (422, 42205)
    assert http.delete("/subjects/frozen-value")[1]["error_code"] == 42205
    assert http.delete("/mode/frozen-value") == (200, {"mode": "READONLY"})
    assert http.post("/subjects/frozen-value/versions", avro(WITH_CURRENCY))[0] == 200
    # IMPORT: ids and versions come from the request, no compatibility check; only on an empty subject
    assert http.put("/mode/frozen-value", {"mode": "IMPORT"})[1]["error_code"] == 42205
    assert http.put("/mode/imported-value", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert http.post("/subjects/imported-value/versions", avro(RECORD, id=5000, version=3)) == (200, {"id": 5000})
    assert http.post("/subjects/imported-value/versions", avro(AMOUNT_AS_STRING, id=5001, version=4)) == \
        (200, {"id": 5001})
    assert http.post("/subjects/imported-value/versions", avro(WITH_CURRENCY, id=5000))[1]["error_code"] == 42207
    assert http.get("/subjects/imported-value/versions") == (200, [3, 4])
    assert http.get("/schemas/ids/5001/versions") == (200, [{"subject": "imported-value", "version": 4}])
    assert http.put("/mode/imported-value", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})
    # back in READWRITE the registry's own ids continue above every id it has seen
    status, body = http.post("/subjects/after-import-value/versions", avro({"type": "fixed", "name": "F", "size": 3}))
    assert status == 200 and body["id"] > 5001
    assert http.post("/subjects/imported-value/versions", avro(RECORD, id=42))[1]["error_code"] == 42205


def test_soft_and_hard_delete(http):
    for schema in (RECORD, WITH_CURRENCY):
        assert http.post("/subjects/gone-value/versions", avro(schema))[0] == 200
    assert http.delete("/subjects/gone-value/versions/2?permanent=true")[1]["error_code"] == 40407
    assert http.delete("/subjects/gone-value/versions/2") == (200, 2)
    assert http.delete("/subjects/gone-value/versions/2")[1]["error_code"] == 40406
    assert http.get("/subjects/gone-value/versions") == (200, [1])
    assert http.get("/subjects/gone-value/versions?deleted=true") == (200, [1, 2])
    assert http.get("/subjects/gone-value/versions/2")[1]["error_code"] == 40402
    assert http.get("/subjects/gone-value/versions/2?deleted=true")[1]["version"] == 2
    assert http.delete("/subjects/gone-value?permanent=true")[1]["error_code"] == 40405
    assert http.delete("/subjects/gone-value") == (200, [1])
    assert http.delete("/subjects/gone-value")[1]["error_code"] == 40404
    assert "gone-value" not in http.get("/subjects")[1]
    assert "gone-value" in http.get("/subjects?deleted=true")[1]
    status, kept = http.get("/subjects/gone-value/versions/1?deleted=true")
    assert status == 200
    assert http.get(f"/schemas/ids/{kept['id']}")[0] == 200  # soft-deleted schemas keep their id
    assert http.delete("/subjects/gone-value?permanent=true") == (200, [1, 2])
    assert http.get("/subjects/gone-value/versions?deleted=true")[1]["error_code"] == 40401
    assert "gone-value" not in http.get("/subjects?deleted=true")[1]
    # a schema registered again after a hard delete starts over at version 1
    assert http.post("/subjects/gone-value/versions", avro(RECORD))[0] == 200
    assert http.get("/subjects/gone-value/versions") == (200, [1])


def test_references_resolve_and_protect_what_they_name(http):
    address = {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
    customer = {"type": "record", "name": "Customer", "namespace": "shop",
                "fields": [{"name": "name", "type": "string"}, {"name": "address", "type": "shop.Address"}]}
    assert http.post("/subjects/address/versions", avro(address))[0] == 200
    # without the reference the name is unknown
    assert http.post("/subjects/customer-value/versions", avro(customer))[1]["error_code"] == 42201
    reference = [{"name": "shop.Address", "subject": "address", "version": 1}]
    status, body = http.post("/subjects/customer-value/versions", avro(customer, references=reference))
    assert status == 200
    assert http.get(f"/schemas/ids/{body['id']}")[1]["references"] == reference
    assert http.get("/subjects/address/versions/1/referencedby") == (200, [body["id"]])
    status, refused = http.delete("/subjects/address")
    assert (status, refused["error_code"]) == (422, 42206)
    assert http.delete("/subjects/customer-value")[0] == 200
    assert http.delete("/subjects/address") == (200, [1])


def test_normalize_makes_equivalent_schemas_one(http):
    short = {"type": "record", "name": "N", "namespace": "norm", "fields": [{"name": "a", "type": "int"}]}
    long = {"type": "record", "name": "norm.N", "fields": [{"name": "a", "type": "int"}]}
    status, first = http.post("/subjects/norm-value/versions?normalize=true", avro(short))
    assert status == 200
    assert http.post("/subjects/norm-value/versions?normalize=true", avro(long)) == (200, {"id": first["id"]})
    assert http.get("/subjects/norm-value/versions") == (200, [1])
    # without normalize the short spelling is another text: another id and version
    assert http.post("/subjects/plain-value/versions", avro(long))[0] == 200
    status, second = http.post("/subjects/plain-value/versions", avro(short))
    assert status == 200 and second["id"] != first["id"]
    assert http.get("/subjects/plain-value/versions") == (200, [1, 2])


def test_protoc_diagnostics_are_the_message(http):
    status, body = http.post("/subjects/garbled-value/versions", {"schema": "message {{{", "schemaType": "PROTOBUF"})
    assert (status, body["error_code"]) == (422, 42201)
    assert body["message"].startswith("Invalid schema: schema.proto:1:"), body["message"]
    assert "absl" not in body["message"]


def test_a_schema_too_large_for_the_topic_is_refused_and_the_writer_goes_on(http):
    huge = {"type": "enum", "name": "Huge", "symbols": [f"SYMBOL_{i}" for i in range(150_000)]}  # > 1 MiB
    status, body = http.post("/subjects/huge-value/versions", avro(huge))
    assert (status, body["error_code"]) == (422, 42201) and "too large" in body["message"], body
    # the failed transaction was aborted: the next registrations go through
    for i in range(3):
        status, body = http.post(f"/subjects/after-huge-{i}-value/versions",
                                 avro({"type": "enum", "name": "Small", "symbols": [f"S{i}"]}))
        assert status == 200, body
    assert http.get("/subjects/huge-value/versions")[1]["error_code"] == 40401


@pytest.mark.parametrize("path", ["/subjects/held-value/versions", "/subjects/held-value",
                                  "/compatibility/subjects/held-value/versions/latest"])
def test_reads_go_on_while_a_request_parses_its_schema(http, monkeypatch, path):
    """A registration's, lookup's or compatibility check's schema is parsed outside the store's lock (a
    Protobuf parse is a protoc run): held in the middle of its parse, other reads are still answered."""
    import threading

    from eoslog.schema_registry import registry as registry_module

    parsing, release = threading.Event(), threading.Event()
    real = registry_module.parse

    def held(schema_type, text, dependencies=()):
        if "held-in-parse" in text:
            parsing.set()
            assert release.wait(30)
        return real(schema_type, text, dependencies)

    monkeypatch.setattr(registry_module, "parse", held)
    outcome = []
    writer = threading.Thread(target=lambda: outcome.append(http.post(
        path, avro({"type": "enum", "name": "Held", "symbols": ["S"], "doc": "held-in-parse"}))))
    writer.start()
    try:
        assert parsing.wait(30), "the registration never reached its parse"
        reader = threading.Thread(target=lambda: outcome.append(http.get("/subjects")))
        reader.start()
        reader.join(10)
        assert not reader.is_alive(), "a read waited for a registration's parse"
        assert outcome[-1][0] == 200
    finally:
        release.set()
        writer.join(30)
    assert len(outcome) == 2 and outcome[-1][0] in (200, 404), outcome  # the held request answered too
