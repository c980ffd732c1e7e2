"""Payload validation on the broker (``eoslog.value.schema.validation.level=payload``), driven by real
clients: an embedded broker serving its own registry, confluent-kafka's SchemaRegistryClient with its
AvroSerializer and JSONSerializer for the valid records, and raw bytes with a registered id but a bad body
for the invalid ones, sent as raw Produce requests to read the per-record errors (KIP-467)."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from confluent_kafka.schema_registry import Schema
from confluent_kafka.serialization import MessageField, SerializationContext

from eoslog.testing.wait import wait_until
from tests.schema_registry.test_broker_validation import deliveries, end_offset, new_topic, produce_raw

pytestmark = pytest.mark.interop

PAYMENT = {"type": "record", "name": "Payment", "namespace": "shop",
           "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}
ORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
         "properties": {"id": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
         "required": ["id", "quantity"]}
PAYLOAD = {"confluent.value.schema.validation": "true", "eoslog.value.schema.validation.level": "payload"}
LEVEL = "eoslog.value.schema.validation.level"


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def errors_of(partition) -> list[tuple[int, str]]:
    return [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors]


def read_back(bootstrap: str, topic: str, count: int, isolation: str = "read_uncommitted") -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": isolation})
    consumer.subscribe([topic])
    read: list = []
    try:
        wait_until(lambda: (m := consumer.poll(0.2)) is not None and not m.error() and read.append(m) is None
                   and len(read) == count, 30, f"{count} records read back")
    finally:
        consumer.close()
    return read


def test_avro_values_that_decode_pass_and_bad_bodies_are_refused_naming_why(served, admin, client):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    broker, _ = served
    topic = new_topic(admin, PAYLOAD, prefix="avro-payload")
    context = SerializationContext(topic, MessageField.VALUE)
    serialize = AvroSerializer(client, json.dumps(PAYMENT))  # registers <topic>-value
    values = [serialize({"id": f"p{i}", "amount": i / 4}, context) for i in range(5)]
    assert deliveries(broker.bootstrap, topic, [(b"k", v) for v in values] + [(b"k", None)]) == ["delivered"] * 6
    schema_id = int.from_bytes(values[0][1:5], "big")
    good = values[0]
    partition = produce_raw(broker.bootstrap, topic, [
        (b"k", good), (b"k", good[:-3]), (b"k", good + b"\x00"), (b"k", framed(schema_id, b"\x09")), (b"k", good)])
    assert partition.error_code == 87  # INVALID_RECORD, nothing of the batch written
    where = f"(id {schema_id}, AVRO)"
    tail = f"Topic {topic} has value payload validation on"
    assert errors_of(partition) == [
        (1, (f"The value of the record does not match its schema {where}: the payload ends before the record does "
            f"(fastavro: EOFError: cannot read double). {tail}")),
        (2, f"The value of the record does not match its schema {where}: 1 byte(s) left after the record. {tail}"),
        (3, (f"The value of the record does not match its schema {where}: the payload ends before the record does "
            f"(fastavro: EOFError: Expected -5 bytes, read 0). {tail}"))]
    # what librdkafka reports: the batch's error, for each of its records
    assert deliveries(broker.bootstrap, topic, [(b"k", good), (b"k", good[:-1])]) == ["INVALID_RECORD"] * 2
    read = read_back(broker.bootstrap, topic, 6)
    assert len(read) == 6 and end_offset(broker.bootstrap, topic) == 6
    deserialize = AvroDeserializer(client)
    assert [deserialize(m.value(), context)["id"] for m in read[:5]] == [f"p{i}" for i in range(5)]


def test_json_values_that_validate_pass_and_others_are_refused_naming_the_path(served, admin, client):
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    broker, _ = served
    topic = new_topic(admin, PAYLOAD, prefix="json-payload")
    serialize = JSONSerializer(json.dumps(ORDER), client)
    context = SerializationContext(topic, MessageField.VALUE)
    good = serialize({"id": "o1", "quantity": 2}, context)
    assert deliveries(broker.bootstrap, topic, [(None, good), (None, serialize({"id": "o2", "quantity": 9}, context))]
                      ) == ["delivered"] * 2
    schema_id = int.from_bytes(good[1:5], "big")
    partition = produce_raw(broker.bootstrap, topic, [
        (None, framed(schema_id, b'{"id": "o3", "quantity": 0}')), (None, good),
        (None, framed(schema_id, b'{"id": "o4"}')), (None, framed(schema_id, b"<order/>")),
        (None, framed(schema_id, b'{"id": "\xff", "quantity": 1}'))])
    where, tail = f"(id {schema_id}, JSON)", f"Topic {topic} has value payload validation on"
    errors = errors_of(partition)
    assert errors[:2] == [
        (0, (f"The value of the record does not match its schema {where}: 0 is less than the minimum of 1 at "
            f"$.quantity (schema path /properties/quantity/minimum). {tail}")),
        (2, (f"The value of the record does not match its schema {where}: 'quantity' is a required property at $ "
            f"(schema path /required). {tail}"))]
    assert [(index, message.split(":")[1].strip()) for index, message in errors[2:]] == [
        (3, "the payload is not UTF-8 JSON (JSONDecodeError"), (4, "the payload is not UTF-8 JSON (UnicodeDecodeError")]
    assert end_offset(broker.bootstrap, topic) == 2


def test_keys_are_decoded_where_key_payload_validation_is_on(served, admin, client):
    from confluent_kafka.schema_registry.avro import AvroSerializer

    broker, _ = served
    topic = new_topic(admin, {"confluent.key.schema.validation": "true",
                              "eoslog.key.schema.validation.level": "payload"}, prefix="key-payload")
    key = AvroSerializer(client, json.dumps(PAYMENT))({"id": "k", "amount": 1.0},
                                                      SerializationContext(topic, MessageField.KEY))
    assert deliveries(broker.bootstrap, topic, [(key, b"any value"), (None, b"v")]) == ["delivered"] * 2
    partition = produce_raw(broker.bootstrap, topic, [(key, b"v"), (key[:6], b"v")])
    ((index, message),) = errors_of(partition)
    assert index == 1 and message.startswith("The key of the record does not match its schema (id ")
    assert message.endswith(f"the payload ends before the record does (fastavro: EOFError: Expected 1 bytes, read 0). "
                            f"Topic {topic} has key payload validation on")


def _describe(admin, topic: str) -> dict:
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return {name: entry.value for name, entry in future.result(30).items() if ".schema.validation" in name}


def _alter(admin, topic: str, value: str | None) -> None:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic,
                              incremental_configs=[ConfigEntry(LEVEL, value, incremental_operation=op)])
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_the_level_is_described_altered_and_only_takes_effect_with_the_id_check(served, admin, client):
    broker, _ = served
    topic = new_topic(admin, {LEVEL: "payload"}, prefix="level")
    assert _describe(admin, topic) == {
        "confluent.key.schema.validation": "false", "confluent.value.schema.validation": "false",
        "eoslog.key.schema.validation.level": "id", "eoslog.value.schema.validation.level": "payload"}
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(PAYMENT), "AVRO"))
    bad_body = framed(schema_id, b"\x02")
    assert deliveries(broker.bootstrap, topic, [(b"k", bad_body)]) == ["delivered"]  # the id check is off
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[ConfigEntry(
        "confluent.value.schema.validation", "true", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert deliveries(broker.bootstrap, topic, [(b"k", bad_body)]) == ["INVALID_RECORD"]
    _alter(admin, topic, "id")
    assert _describe(admin, topic)["eoslog.value.schema.validation.level"] == "id"
    assert deliveries(broker.bootstrap, topic, [(b"k", bad_body)]) == ["delivered"]
    _alter(admin, topic, "payload")
    assert deliveries(broker.bootstrap, topic, [(b"k", bad_body)]) == ["INVALID_RECORD"]
    _alter(admin, topic, None)  # back to the default, id
    assert deliveries(broker.bootstrap, topic, [(b"k", bad_body)]) == ["delivered"]
    with pytest.raises(KafkaException) as refused:
        _alter(admin, topic, "full")
    assert refused.value.args[0].name() == "INVALID_CONFIG", refused.value
    assert end_offset(broker.bootstrap, topic) == 3


@pytest.mark.parametrize("configs", [{LEVEL: "full"}, {"eoslog.key.schema.validation.level": "true"}])
def test_bad_levels_are_refused_by_create_topics(admin, configs):
    name = f"bad-level-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)
    assert refused.value.args[0].name() == "INVALID_CONFIG", refused.value
    assert "must be one of id, payload" in refused.value.args[0].str()


def test_idempotent_and_transactional_producers_go_on_after_a_refused_payload(served, admin, client):
    """The payload check runs with the id check, before the producer's state is looked at: a refused batch
    takes no sequence numbers and changes no transaction."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    broker, _ = served
    topic = new_topic(admin, PAYLOAD, prefix="tx-payload")
    context = SerializationContext(topic, MessageField.VALUE)
    good = AvroSerializer(client, json.dumps(PAYMENT))({"id": "p", "amount": 1.0}, context)
    bad = good[:-1]
    outcomes: list = []

    def report(error, _message) -> None:
        outcomes.append(error.name() if error is not None else "delivered")

    idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for value in (good, bad, good):
        idempotent.produce(topic, value, on_delivery=report)
        assert idempotent.flush(30) == 0
    assert outcomes == ["delivered", "INVALID_RECORD", "delivered"]

    outcomes.clear()
    transactional = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(topic, bad, on_delivery=report)
    transactional.flush(30)
    assert outcomes == ["INVALID_RECORD"]
    transactional.abort_transaction(30)
    # as after an id refusal (test_broker_validation.py): librdkafka numbered the refused batch, so it asks
    # for an abort with an epoch bump once; the usual retry loop then commits
    for _attempt in range(3):
        transactional.begin_transaction()
        transactional.produce(topic, good, on_delivery=report)
        try:
            transactional.commit_transaction(30)
            break
        except KafkaException as exc:
            assert exc.args[0].txn_requires_abort(), exc
            transactional.abort_transaction(30)
    else:
        pytest.fail("the transaction never committed")
    assert outcomes[-1] == "delivered"
    assert [m.value() for m in read_back(broker.bootstrap, topic, 3, "read_committed")] == [good] * 3


def test_a_compacted_topic_takes_tombstones_and_refuses_bad_payloads(served, admin, client):
    """Compaction's rule (a key on every record) and payload validation apply together, record by record;
    a tombstone passes both, so it still deletes."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    broker, _ = served
    topic = new_topic(admin, {**PAYLOAD, "cleanup.policy": "compact"}, prefix="compacted-payload")
    good = AvroSerializer(client, json.dumps(PAYMENT))({"id": "p", "amount": 1.0},
                                                       SerializationContext(topic, MessageField.VALUE))
    assert deliveries(broker.bootstrap, topic, [(b"k1", good), (b"k1", None)]) == ["delivered"] * 2
    partition = produce_raw(broker.bootstrap, topic, [(b"k2", good + b"\x00"), (None, good)])
    assert [(index, message.split(":")[0]) for index, message in errors_of(partition)] == [
        (0, f"The value of the record does not match its schema (id {int.from_bytes(good[1:5], 'big')}, AVRO)"),
        (1, "Compacted topic cannot accept message without key in topic partition " + f"{topic}-0")]
    assert end_offset(broker.bootstrap, topic) == 2
