"""The broker's schema id check (schema_registry/validation.py) as a pure function over the registry's state:
the wire format, the subject each strategy names, live and soft-deleted versions, and the topic configs
that turn it on. The broker's use of it, with real clients, is test_broker_validation.py."""

from __future__ import annotations

import json

import pytest

from eoslog.cluster.topic_configs import check_values
from eoslog.protocol.errors import InvalidConfigError
from eoslog.schema_registry.record_format import Key, KeyType
from eoslog.schema_registry.state import RegistryState
from eoslog.schema_registry.validation import RegistryView, TopicValidation, check_data

TOPIC = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
RECORD = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
TOPIC_RECORD = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
AVRO = json.dumps({"type": "record", "name": "Payment", "namespace": "shop", "fields": []})


def register(state: RegistryState, subject: str, version: int, schema_id: int, schema: str = AVRO,
             schema_type: str | None = None, deleted: bool = False) -> None:
    value = {"subject": subject, "version": version, "id": schema_id, "schema": schema, "deleted": deleted}
    if schema_type is not None:
        value["schemaType"] = schema_type
    state.apply(Key(KeyType.SCHEMA, subject, version), value)


def wire(schema_id: int, payload: bytes = b"\x02x") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


@pytest.fixture
def view() -> RegistryView:
    state = RegistryState()
    register(state, "orders-value", 1, 7)
    register(state, "orders-value", 2, 8)
    register(state, "other-value", 1, 9, json.dumps({"type": "string"}))
    return RegistryView(state, lambda: True)


def test_a_registered_id_of_the_topics_subject_passes(view):
    assert check_data(wire(7), "value", "orders", TOPIC, view) is None
    assert check_data(wire(8), "value", "orders", TOPIC, view) is None  # any of its versions


def test_null_passes_as_confluents_does(view):
    assert check_data(None, "value", "orders", TOPIC, view) is None


@pytest.mark.parametrize("data", [b"plain text", b"", b"\x00\x00\x00", b"\x01" + (7).to_bytes(4, "big") + b"x"])
def test_data_outside_the_wire_format_is_refused(view, data):
    reason = check_data(data, "value", "orders", TOPIC, view)
    assert reason is not None and reason.startswith(
        "The value of the record is not in the schema registry's wire format (magic byte 0, then a 4-byte "
        "schema id)"), reason
    assert reason.endswith("Topic orders has value schema validation on")


def test_an_unknown_id_and_another_subjects_id_are_refused_naming_the_subject(view):
    assert check_data(wire(99), "value", "orders", TOPIC, view) == (
        "Schema id 99 of the record's value is not valid for topic orders: it is not registered under "
        "subject orders-value (TopicNameStrategy)")
    assert "it is not registered under subject orders-value" in check_data(wire(9), "value", "orders", TOPIC, view)
    assert "subject orders-key" in check_data(wire(7), "key", "orders", TOPIC, view)


def test_a_soft_deleted_versions_id_is_refused_until_registered_again(view):
    view.state.apply(Key(KeyType.SCHEMA, "orders-value", 1), {"subject": "orders-value", "version": 1, "id": 7,
                                                              "schema": AVRO, "deleted": True})
    assert check_data(wire(7), "value", "orders", TOPIC, view) is not None
    assert check_data(wire(8), "value", "orders", TOPIC, view) is None
    view.state.apply(Key(KeyType.DELETE_SUBJECT, "orders-value"), {"subject": "orders-value", "version": 2})
    assert check_data(wire(8), "value", "orders", TOPIC, view) is not None
    register(view.state, "orders-value", 3, 7)
    assert check_data(wire(7), "value", "orders", TOPIC, view) is None


def test_a_hard_deleted_subject_refuses_its_ids(view):
    view.state.apply(Key(KeyType.SCHEMA, "other-value", 1), None)
    assert "other-value" not in view.state.live_ids
    assert check_data(wire(9), "value", "other", TOPIC, view) is not None


def test_record_name_strategies_name_the_subject_after_the_schemas_record(view):
    register(view.state, "shop.Payment", 1, 7)
    register(view.state, "orders-shop.Payment", 1, 7)
    assert check_data(wire(7), "value", "orders", RECORD, view) is None
    assert check_data(wire(7), "value", "orders", TOPIC_RECORD, view) is None
    assert check_data(wire(7), "value", "refunds", TOPIC_RECORD, view) == (
        "Schema id 7 of the record's value is not valid for topic refunds: it is not registered under subject "
        "refunds-shop.Payment (TopicRecordNameStrategy)")
    # a schema without a record name (an Avro string) cannot name a subject by its record
    assert "no schema with a record name has that id" in check_data(wire(9), "value", "other", RECORD, view)


def test_json_schema_record_name_is_its_title():
    state = RegistryState()
    register(state, "Invoice", 1, 3, json.dumps({"title": "Invoice", "type": "object"}), "JSON")
    assert check_data(wire(3), "value", "invoices", RECORD, RegistryView(state, lambda: True)) is None


def test_a_refusal_before_the_state_is_read_says_so():
    reason = check_data(wire(7), "value", "orders", TOPIC, RegistryView(RegistryState(), lambda: False))
    assert reason.endswith("(the schema registry's state is still being read)")


def test_topic_configs_turn_validation_on():
    assert TopicValidation.from_configs("t", {}) is None
    assert TopicValidation.from_configs("t", {"confluent.value.schema.validation": "false"}) is None
    on = TopicValidation.from_configs("t", {"confluent.value.schema.validation": "true",
                                            "confluent.key.schema.validation": "TRUE",
                                            "confluent.key.subject.name.strategy": "RecordNameStrategy"})
    assert on == TopicValidation("t", "io.confluent.kafka.serializers.subject.TopicNameStrategy", RECORD)


@pytest.mark.parametrize("configs", [{"confluent.value.schema.validation": "yes"},
                                     {"confluent.key.subject.name.strategy": "MyStrategy"}])
def test_bad_values_are_refused(configs):
    with pytest.raises(InvalidConfigError):
        check_values(configs)
