"""Payload validation (schema_registry/payload_validation.py) as a pure function over the registry's state:
Avro payloads decoded by fastavro, JSON payloads validated by jsonschema, references, the schemas whose
decoding a hostile payload could turn against the broker, and the topic configs that turn it on. The
broker's use of it, with real clients, is test_broker_payload_validation.py."""

from __future__ import annotations

import io
import json
import time

import pytest
from fastavro import parse_schema, schemaless_writer

from eoslog.cluster.topic_configs import check_values
from eoslog.protocol.errors import InvalidConfigError
from eoslog.records.batch import Record
from eoslog.schema_registry.record_format import Key, KeyType
from eoslog.schema_registry.state import RegistryState
from eoslog.schema_registry.validation import RegistryView, SchemaIdCheck, TopicValidation, check_data

TOPIC = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
PAYMENT = {"type": "record", "name": "Payment", "namespace": "shop",
           "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"},
                      {"name": "note", "type": ["null", "string"], "default": None}]}
ORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
         "properties": {"id": {"type": "string"}, "lines": {"type": "array", "items": {"type": "integer"}}},
         "required": ["id"]}


def register(state: RegistryState, subject: str, version: int, schema_id: int, schema: dict,
             schema_type: str = "AVRO", references: list | None = None) -> None:
    value = {"subject": subject, "version": version, "id": schema_id, "schema": json.dumps(schema),
             "deleted": False, "schemaType": schema_type}
    if references:
        value["references"] = references
    state.apply(Key(KeyType.SCHEMA, subject, version), value)


def avro(schema: dict, datum: dict, schema_id: int) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), datum)
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


@pytest.fixture
def view() -> RegistryView:
    state = RegistryState()
    register(state, "pay-value", 1, 1, PAYMENT)
    register(state, "orders-value", 1, 2, ORDER, "JSON")
    register(state, "proto-value", 1, 3, {}, "PROTOBUF")
    return RegistryView(state, lambda: True)


def check(view, topic: str, data: bytes, part: str = "value") -> str | None:
    return check_data(data, part, topic, TOPIC, view, payload=True)


def test_avro_that_decodes_passes_and_the_id_check_alone_never_decodes(view):
    good = avro(PAYMENT, {"id": "p1", "amount": 2.5, "note": "x"}, 1)
    assert check(view, "pay", good) is None
    assert check_data(framed(1, b"junk"), "value", "pay", TOPIC, view) is None  # payload=False: the id only


def test_avro_cut_short_or_with_trailing_bytes_is_refused_naming_why(view):
    good = avro(PAYMENT, {"id": "p1", "amount": 2.5}, 1)
    assert check(view, "pay", good[:-3]) == (
        "The value of the record does not match its schema (id 1, AVRO): the payload ends before the record "
        "does (fastavro: EOFError: cannot read double). Topic pay has value payload validation on")
    assert check(view, "pay", good + b"\x00\x01") == (
        "The value of the record does not match its schema (id 1, AVRO): 2 byte(s) left after the record. "
        "Topic pay has value payload validation on")
    bad_branch = framed(1, b"\x04p1" + b"\x00" * 8 + b"\x08")  # union branch 4 of 2
    assert "the payload does not decode (fastavro: IndexError" in check(view, "pay", bad_branch)
    assert "(id 1, AVRO): the payload ends before the record does" in check(view, "pay", framed(1, b""))


def test_json_that_validates_passes_and_a_violation_names_its_path(view):
    assert check(view, "orders", framed(2, b'{"id": "o1", "lines": [1, 2]}')) is None
    assert check(view, "orders", framed(2, b'{"id": "o1", "lines": [1, "two"]}')) == (
        "The value of the record does not match its schema (id 2, JSON): 'two' is not of type 'integer' at "
        "$.lines[1] (schema path /properties/lines/items/type). Topic orders has value payload validation on")
    assert "'id' is a required property at $ " in check(view, "orders", framed(2, b'{"lines": []}'))


@pytest.mark.parametrize("payload", [b"not json", b'{"id": "o1"', b'\xff{"id": "o1"}', b""])
def test_json_payloads_that_are_not_utf8_json_are_refused(view, payload):
    reason = check(view, "orders", framed(2, payload))
    assert reason is not None and "(id 2, JSON): the payload is not UTF-8 JSON (" in reason, reason


def test_protobuf_payloads_get_the_id_check_only(view):
    assert check(view, "proto", framed(3, b"\xff\xff anything")) is None


def test_keys_are_checked_like_values(view):
    register(view.state, "pay-key", 1, 1, PAYMENT)
    reason = check(view, "pay", framed(1, b"\x02"), part="key")
    assert reason.startswith("The key of the record does not match its schema (id 1, AVRO)")
    assert reason.endswith("Topic pay has key payload validation on")


def test_references_are_resolved_through_the_registrys_versions():
    state = RegistryState()
    address = {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
    customer = {"type": "record", "name": "Customer", "namespace": "shop",
                "fields": [{"name": "name", "type": "string"}, {"name": "address", "type": "shop.Address"}]}
    register(state, "address", 1, 10, address)
    register(state, "cust-value", 1, 11, customer, references=[
        {"name": "shop.Address", "subject": "address", "version": 1}])
    register(state, "money", 1, 12, {"type": "object", "properties": {"cents": {"type": "integer"}}}, "JSON")
    register(state, "bill-value", 1, 13, {"type": "object", "properties": {"total": {"$ref": "money.json"}}}, "JSON",
             references=[{"name": "money.json", "subject": "money", "version": 1}])
    view = RegistryView(state, lambda: True)
    full = {**customer, "fields": [customer["fields"][0], {"name": "address", "type": address}]}
    assert check(view, "cust", avro(full, {"name": "n", "address": {"city": "c"}}, 11)) is None
    assert "ends before the record does" in check(view, "cust", avro(full, {"name": "n", "address": {"city": "c"}},
                                                                       11)[:-1])
    assert check(view, "bill", framed(13, b'{"total": {"cents": 5}}')) is None
    assert "'5' is not of type 'integer' at $.total.cents" in check(view, "bill", framed(13, b'{"total": {"cents": "5"}}'))


def test_a_recursive_schema_refuses_a_payload_nested_too_deep_instead_of_crashing():
    """fastavro's compiled reader recurses in C: a million levels overflow the stack (a SIGSEGV of the
    broker). A recursive schema is read by its Python reader, which the recursion limit stops."""
    state = RegistryState()
    register(state, "list-value", 1, 20, {"type": "record", "name": "Node",
                                          "fields": [{"name": "next", "type": ["null", "Node"]}]})
    view = RegistryView(state, lambda: True)
    assert check(view, "list", framed(20, b"\x02" * 50 + b"\x00")) is None
    assert check(view, "list", framed(20, b"\x02" * 1_000_000 + b"\x00")).endswith(
        "(id 20, AVRO): the payload nests deeper than the broker decodes. Topic list has value payload validation on")


def test_an_array_of_items_without_bytes_is_checked_by_id_only():
    """A count of 2**62 null items is 9 bytes to send and would take forever to read."""
    state = RegistryState()
    register(state, "nulls-value", 1, 21, {"type": "record", "name": "Nulls",
                                           "fields": [{"name": "n", "type": {"type": "array", "items": "null"}}]})
    view = RegistryView(state, lambda: True)
    started = time.monotonic()
    assert check(view, "nulls", framed(21, b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f\x00")) is None
    assert time.monotonic() - started < 5


def test_a_schema_fastavro_cannot_compile_refuses_with_a_reason():
    state = RegistryState()
    register(state, "gone-value", 1, 30, {"type": "record", "name": "R", "fields": [{"name": "a", "type": "shop.Gone"}]})
    view = RegistryView(state, lambda: True)
    assert "schema 30 (AVRO) cannot be used to validate payloads: fastavro: " in check(view, "gone", framed(30, b""))


def test_the_levels_turn_payload_validation_on_only_where_the_id_check_is_on():
    on = {"confluent.value.schema.validation": "true", "eoslog.value.schema.validation.level": "payload"}
    assert TopicValidation.from_configs("t", on) == TopicValidation("t", TOPIC, None, True, False)
    assert TopicValidation.from_configs("t", {**on, "eoslog.value.schema.validation.level": " Payload "}).value_payload
    assert not TopicValidation.from_configs("t", {**on, "eoslog.value.schema.validation.level": "id"}).value_payload
    assert TopicValidation.from_configs("t", {"eoslog.value.schema.validation.level": "payload"}) is None
    keys = TopicValidation.from_configs("t", {**on, "confluent.key.schema.validation": "true",
                                              "eoslog.key.schema.validation.level": "payload"})
    assert (keys.value_payload, keys.key_payload) == (True, True)


@pytest.mark.parametrize("configs", [{"eoslog.value.schema.validation.level": "full"},
                                     {"eoslog.key.schema.validation.level": ""},
                                     {"eoslog.key.schema.validation.level": "true"}])
def test_bad_levels_are_refused(configs):
    with pytest.raises(InvalidConfigError, match="must be one of id, payload"):
        check_values(configs)


def test_a_batch_of_good_payloads_passes_whole_and_a_bad_one_is_named_record_by_record(view, monkeypatch):
    """The scan's runs place every payload, so a batch whose payloads all decode passes without a record
    decoded into an object; one bad payload among records of the same size (so in the same run) sends
    the batch record by record, which names it."""
    from eoslog.log import record_validation
    from eoslog.log.config import LogConfig
    from eoslog.log.record_validation import RecordValidationError, validate_records
    from eoslog.records.builder import SimpleRecord, build_batch
    from eoslog.records.header import read_header

    check_ = SchemaIdCheck(TopicValidation("pay", TOPIC, None, True, False), view)
    good = avro(PAYMENT, {"id": "p1", "amount": 2.5}, 1)
    bad = good[:5] + b"\x06" + good[6:]  # the id's string takes a byte more: the double runs short
    assert len(bad) == len(good)

    def validate(values) -> None:
        batch = build_batch([SimpleRecord(None, v) for v in values])
        validate_records(memoryview(batch), read_header(batch, 0), LogConfig(), topic_partition="pay-0",
                         now_ms=int(time.time() * 1000), checks=(check_,))

    decoded = []
    real_parse = record_validation.parse_records
    monkeypatch.setattr(record_validation, "parse_records", lambda *a, **k: decoded.append(1) or real_parse(*a, **k))
    validate([good] * 100 + [None] * 10)
    assert decoded == []
    with pytest.raises(RecordValidationError) as refused:
        validate([good] * 70 + [bad] + [good] * 29)
    assert decoded == [1]
    ((index, message),) = refused.value.record_errors
    assert index == 70 and "(id 1, AVRO): the payload ends before the record does" in message
    # sizes that change from record to record: the general scan places each payload
    varied = [avro(PAYMENT, {"id": "p" * (i % 9), "amount": 2.5}, 1) for i in range(60)]
    decoded.clear()
    validate(varied)
    assert decoded == []
    bad = varied[31][:5] + bytes((varied[31][5] + 2,)) + varied[31][6:]  # the string runs a byte long
    with pytest.raises(RecordValidationError) as refused:
        validate(varied[:31] + [bad] + varied[32:])
    assert decoded == [1] and [e.batch_index for e in refused.value.record_errors] == [31]
    assert check_(None, Record(0, 0, None, None, ()), 0) is None  # a tombstone
