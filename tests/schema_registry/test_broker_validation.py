"""Schema id validation on the broker (``confluent.value.schema.validation``), driven by real clients: an
embedded broker that serves its own registry (so validation reads the registry's in-process state),
confluent-kafka's SchemaRegistryClient and AvroSerializer, its Producer and AdminClient, and raw Produce
requests for the per-record errors (librdkafka reports only the batch's INVALID_RECORD to its caller)."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop

PAYMENT = {"type": "record", "name": "Payment", "namespace": "shop",
           "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}
REFUND = {"type": "record", "name": "Refund", "namespace": "shop", "fields": [{"name": "id", "type": "string"}]}
VALIDATED = {"confluent.value.schema.validation": "true"}


def new_topic(admin, configs: dict | None = None, prefix: str = "validated") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1, config=configs or {})])[name].result(30)
    return name


def deliveries(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> list:
    """Produces ``records`` in one batch and returns each delivery's error name, or "delivered"."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 500, "retries": 0})
    outcomes: list = [None] * len(records)
    for i, (key, value) in enumerate(records):
        producer.produce(topic, value, key=key, on_delivery=lambda error, _m, i=i: outcomes.__setitem__(
            i, error.name() if error is not None else "delivered"))
    assert producer.flush(30) == 0
    return outcomes


def produce_raw(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]):
    """One Produce v9 request of one batch; the partition's response (error code, message, record errors)."""
    from eoslog.client.connection import BrokerConnection
    from eoslog.protocol import messages
    from eoslog.records.builder import SimpleRecord, build_batch

    p = messages.ProduceRequest
    data = build_batch([SimpleRecord(key, value, ()) for key, value in records])
    with BrokerConnection.from_bootstrap(bootstrap) as wire:
        response = wire.request(0, 9, p(acks=-1, timeout_ms=10000, topic_data=[p.TopicProduceData(
            name=topic, partition_data=[p.PartitionProduceData(index=0, records=data)])]))
    ((partition,),) = [t.partition_responses for t in response.responses]
    return partition


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watermarks-{uuid.uuid4()}"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
    finally:
        consumer.close()


def wire(schema_id: int, payload: bytes = b"\x02x") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def test_avro_serializer_to_a_validated_topic_succeeds(served, admin, client):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    broker, _ = served
    topic = new_topic(admin, VALIDATED)
    serialize = AvroSerializer(client, json.dumps(PAYMENT))  # registers <topic>-value on first use
    context = SerializationContext(topic, MessageField.VALUE)
    values = [serialize({"id": f"p{i}", "amount": i / 2}, context) for i in range(5)]
    assert deliveries(broker.bootstrap, topic, [(b"k", v) for v in values]) == ["delivered"] * 5
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"read-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read: list = []
    try:
        wait_until(lambda: (m := consumer.poll(0.2)) is not None and not m.error() and read.append(m) is None
                   and len(read) == 5, 30, "the five records read back")
    finally:
        consumer.close()
    deserialize = AvroDeserializer(client)
    assert [deserialize(m.value(), context)["id"] for m in read] == [f"p{i}" for i in range(5)]


def test_a_raw_value_fails_the_whole_batch_naming_the_record(served, admin, client):
    from confluent_kafka.schema_registry.avro import AvroSerializer

    broker, _ = served
    topic = new_topic(admin, VALIDATED)
    good = AvroSerializer(client, json.dumps(PAYMENT))({"id": "p", "amount": 1.0},
                                                       SerializationContext(topic, MessageField.VALUE))
    # what the client reports: the batch's INVALID_RECORD, for every record in it
    assert deliveries(broker.bootstrap, topic, [(b"k", good), (b"k", b"not avro")]) == ["INVALID_RECORD"] * 2
    partition = produce_raw(broker.bootstrap, topic, [(b"k", good), (b"k", b"plain"), (b"k", good)])
    assert partition.error_code == 87  # INVALID_RECORD
    (error,) = partition.record_errors
    assert error.batch_index == 1
    assert error.batch_index_error_message == (
        "The value of the record is not in the schema registry's wire format (magic byte 0, then a 4-byte "
        f"schema id): 5 byte(s) starting 70 6c 61 69 6e. Topic {topic} has value schema validation on")
    assert partition.error_message.startswith("One or more records have been rejected due to 1 record errors")
    assert end_offset(broker.bootstrap, topic) == 0  # nothing of either batch was written
    assert deliveries(broker.bootstrap, topic, [(b"k", good), (None, None)]) == ["delivered"] * 2  # nulls pass


def test_an_unknown_id_and_an_id_of_another_subject_fail(served, admin, client):
    broker, _ = served
    topic = new_topic(admin, VALIDATED)
    other_id = client.register_schema(f"other-{topic}-value", Schema(json.dumps(REFUND), "AVRO"))
    own_id = client.register_schema(f"{topic}-value", Schema(json.dumps(PAYMENT), "AVRO"))
    assert other_id != own_id
    unknown = max(own_id, other_id) + 1000
    assert deliveries(broker.bootstrap, topic, [(b"k", wire(unknown))]) == ["INVALID_RECORD"]
    assert deliveries(broker.bootstrap, topic, [(b"k", wire(other_id))]) == ["INVALID_RECORD"]
    partition = produce_raw(broker.bootstrap, topic, [(b"k", wire(own_id)), (b"k", wire(unknown)),
                                                      (b"k", wire(other_id))])
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
        (1, (f"Schema id {unknown} of the record's value is not valid for topic {topic}: it is not registered "
             f"under subject {topic}-value (TopicNameStrategy)")),
        (2, (f"Schema id {other_id} of the record's value is not valid for topic {topic}: it is not registered "
             f"under subject {topic}-value (TopicNameStrategy)"))]
    assert deliveries(broker.bootstrap, topic, [(b"k", wire(own_id))]) == ["delivered"]
    assert end_offset(broker.bootstrap, topic) == 1


def test_key_validation_and_record_name_strategy(served, admin, client):
    broker, _ = served
    topic = new_topic(admin, {"confluent.key.schema.validation": "true",
                              "confluent.key.subject.name.strategy": "RecordNameStrategy"})
    refund_id = client.register_schema("shop.Refund", Schema(json.dumps(REFUND), "AVRO"))
    payment_id = client.register_schema(f"{topic}-key", Schema(json.dumps(PAYMENT), "AVRO"))
    assert deliveries(broker.bootstrap, topic, [(wire(refund_id), b"any value"), (None, b"v")]) == ["delivered"] * 2
    partition = produce_raw(broker.bootstrap, topic, [(wire(payment_id), b"v"), (b"raw key", b"v")])
    assert [(e.batch_index, e.batch_index_error_message.split(":")[0]) for e in partition.record_errors] == [
        (0, f"Schema id {payment_id} of the record's key is not valid for topic {topic}"),
        (1, ("The key of the record is not in the schema registry's wire format (magic byte 0, then a 4-byte "
             "schema id)"))]
    assert "not registered under subject shop.Payment (RecordNameStrategy)" in \
        partition.record_errors[0].batch_index_error_message


def test_a_topic_without_validation_accepts_anything(served, admin):
    broker, _ = served
    topic = new_topic(admin, prefix="plain")
    assert deliveries(broker.bootstrap, topic, [(b"k", b"plain"), (None, wire(123456))]) == ["delivered"] * 2
    partitions = broker.call(lambda: [p.record_checks for (t, _), p in broker.broker.registry.partitions.items()
                                      if t == topic])
    assert partitions == [()]  # no check at all: the batch is not even decoded


def _incremental(admin, topic: str, op: AlterConfigOpType, value: str | None = None) -> None:
    entry = ConfigEntry("confluent.value.schema.validation", value, incremental_operation=op)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)


def _described(admin, topic: str) -> dict:
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return {name: entry.value for name, entry in future.result(30).items() if name.startswith("confluent.")}


def test_validation_toggled_at_runtime_takes_effect(served, admin):
    broker, _ = served
    topic = new_topic(admin, prefix="toggled")
    assert _described(admin, topic) == {
        "confluent.key.schema.validation": "false", "confluent.value.schema.validation": "false",
        "confluent.key.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicNameStrategy",
        "confluent.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicNameStrategy"}
    assert deliveries(broker.bootstrap, topic, [(b"k", b"raw")]) == ["delivered"]
    _incremental(admin, topic, AlterConfigOpType.SET, "true")
    assert _described(admin, topic)["confluent.value.schema.validation"] == "true"
    assert deliveries(broker.bootstrap, topic, [(b"k", b"raw")]) == ["INVALID_RECORD"]
    _incremental(admin, topic, AlterConfigOpType.DELETE)
    assert deliveries(broker.bootstrap, topic, [(b"k", b"raw")]) == ["delivered"]
    assert end_offset(broker.bootstrap, topic) == 2


@pytest.mark.parametrize("configs", [{"confluent.value.schema.validation": "yes"},
                                     {"confluent.value.subject.name.strategy": "com.example.MyStrategy"}])
def test_bad_values_are_refused_by_create_topics(admin, configs):
    name = f"bad-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)
    assert refused.value.args[0].name() == "INVALID_CONFIG", refused.value


def test_idempotent_and_transactional_producers_go_on_after_a_refusal(served, admin, client):
    """A refused batch is refused before the producer's state is looked at: it takes no sequence numbers,
    so an idempotent producer's next batch is delivered, and a transaction can be aborted and the next one
    committed."""
    broker, _ = served
    topic = new_topic(admin, VALIDATED)
    own_id = client.register_schema(f"{topic}-value", Schema(json.dumps(PAYMENT), "AVRO"))
    outcomes: list = []

    def report(error, _message) -> None:
        outcomes.append(error.name() if error is not None else "delivered")

    idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for value in (wire(own_id), b"raw", wire(own_id)):
        idempotent.produce(topic, value, on_delivery=report)
        assert idempotent.flush(30) == 0
    assert outcomes == ["delivered", "INVALID_RECORD", "delivered"]

    outcomes.clear()
    transactional = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(topic, b"raw", on_delivery=report)
    transactional.flush(30)
    assert outcomes == ["INVALID_RECORD"]
    transactional.abort_transaction(30)
    # librdkafka numbered the refused batch, so its next batch skips a sequence number; it then asks for an
    # abort with an epoch bump (as it would of Kafka, which also refuses before the producer's state). The
    # application's usual retry loop commits the transaction.
    for _attempt in range(3):
        transactional.begin_transaction()
        transactional.produce(topic, wire(own_id), on_delivery=report)
        try:
            transactional.commit_transaction(30)
            break
        except KafkaException as exc:
            assert exc.args[0].txn_requires_abort(), exc
            transactional.abort_transaction(30)
    else:
        pytest.fail("the transaction never committed")
    assert outcomes[-1] == "delivered"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"read-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    read: list = []
    try:
        wait_until(lambda: (m := consumer.poll(0.2)) is not None and not m.error() and read.append(m.value()) is None
                   and len(read) == 3, 30, "the three delivered records read back")
    finally:
        consumer.close()
    assert read == [wire(own_id)] * 3


def test_a_validated_topic_is_still_validated_after_a_restart(tmp_path):
    """The checks are given when the partitions open at start-up, from the topic's stored configs, and read
    the registry the restarted broker serves once it has read _schemas again."""
    from eoslog.server.embedded import EmbeddedBroker

    properties = {"eoslog.schema.registry.listen": "127.0.0.1:0"}
    with EmbeddedBroker(data_dir=tmp_path, properties=properties) as embedded:
        server = embedded.broker.schema_registry.server
        wait_until(lambda: server.registry.is_writer and server.registry._writer is not None, 60, "the writer")
        topic = new_topic(AdminClient({"bootstrap.servers": embedded.bootstrap}), VALIDATED)
        schema_id = SchemaRegistryClient({"url": server.url}).register_schema(
            f"{topic}-value", Schema(json.dumps(PAYMENT), "AVRO"))
    with EmbeddedBroker(data_dir=tmp_path, properties=properties) as embedded:
        view = embedded.broker.schema_validation.view
        wait_until(lambda: view is not None and view.loaded(), 60, "the restarted broker's registry read _schemas")
        assert deliveries(embedded.bootstrap, topic, [(b"k", wire(schema_id))]) == ["delivered"]
        assert deliveries(embedded.bootstrap, topic, [(b"k", b"raw")]) == ["INVALID_RECORD"]
