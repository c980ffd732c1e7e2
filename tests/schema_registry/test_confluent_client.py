"""confluent-kafka's own SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers and
deserializers, unmodified, against the registry and the broker (conftest.py): register, evolve compatibly,
refuse an incompatible change, references, and records produced and consumed through eoslog."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

pytestmark = pytest.mark.interop


@pytest.fixture
def client(registry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def round_trip(bootstrap: str, topic: str, serialize, deserialize, values: list, before: int = 0) -> list:
    """Each value serialized and produced to ``topic``; then the topic read from its start (``before``
    records were there already) and every record deserialized."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"sr-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    read: list = []
    try:
        for _ in range(300):
            if len(read) == before + len(values):
                break
            message = consumer.poll(0.1)
            if message is None or message.error():
                continue
            assert message.value()[0] == 0  # the wire format: magic byte, schema id, payload
            read.append(deserialize(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return read


# ---- Avro ------------------------------------------------------------------------------------------------

PAYMENT = {"type": "record", "name": "Payment", "namespace": "shop",
           "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}]}
PAYMENT_V2 = {**PAYMENT, "fields": PAYMENT["fields"] + [{"name": "currency", "type": "string", "default": "EUR"}]}


def test_avro_register_evolve_refuse_round_trip(client, broker):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    topic = "avro-payments"
    first = AvroSerializer(client, json.dumps(PAYMENT))
    before = round_trip(broker.bootstrap, topic, first, AvroDeserializer(client), [{"id": "p1", "amount": 1.5}])
    assert before == [{"id": "p1", "amount": 1.5}]
    v1 = client.get_latest_version(f"{topic}-value")
    assert v1.version == 1

    # a compatible change: a new field with a default; the old reader's data is read with the default
    evolved = AvroSerializer(client, json.dumps(PAYMENT_V2))
    reader = AvroDeserializer(client, json.dumps(PAYMENT_V2))
    after = round_trip(broker.bootstrap, topic, evolved, reader, [{"id": "p2", "amount": 2.0, "currency": "USD"}], 1)
    assert after == [{"id": "p1", "amount": 1.5, "currency": "EUR"}, {"id": "p2", "amount": 2.0, "currency": "USD"}]
    assert client.get_versions(f"{topic}-value") == [1, 2]
    assert client.test_compatibility(f"{topic}-value", Schema(json.dumps(PAYMENT_V2), "AVRO")) is True

    # an incompatible one: refused with 409 naming what broke, and nothing registered
    broken = {**PAYMENT, "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "string"}]}
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(json.dumps(broken), "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    assert "TYPE_MISMATCH" in refused.value.error_message
    assert client.test_compatibility(f"{topic}-value", Schema(json.dumps(broken), "AVRO")) is False
    assert client.get_versions(f"{topic}-value") == [1, 2]


def test_avro_references(client, broker):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    money = {"type": "record", "name": "Money", "namespace": "shop",
             "fields": [{"name": "units", "type": "long"}, {"name": "currency", "type": "string"}]}
    client.register_schema("shop.Money", Schema(json.dumps(money), "AVRO"))
    order = {"type": "record", "name": "Order", "namespace": "shop",
             "fields": [{"name": "id", "type": "string"}, {"name": "total", "type": "shop.Money"}]}
    schema = Schema(json.dumps(order), "AVRO", [SchemaReference("shop.Money", "shop.Money", 1)])
    schema_id = client.register_schema("avro-orders-value", schema)
    assert client.get_schema(schema_id).references[0].subject == "shop.Money"
    value = {"id": "o1", "total": {"units": 1250, "currency": "EUR"}}
    serializer = AvroSerializer(client, schema, conf={"auto.register.schemas": False, "use.latest.version": True})
    assert round_trip(broker.bootstrap, "avro-orders", serializer, AvroDeserializer(client), [value]) == [value]
    # a referenced version cannot go while a schema names it
    with pytest.raises(SchemaRegistryError) as referenced:
        client.delete_version("shop.Money", 1)
    assert referenced.value.error_code == 42206


# ---- JSON Schema -----------------------------------------------------------------------------------------

ACCOUNT = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Account", "type": "object",
           "properties": {"id": {"type": "string"}, "balance": {"type": "integer"}},
           "required": ["id"], "additionalProperties": False}


def test_json_schema_register_evolve_refuse_round_trip(client, broker):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    topic = "json-accounts"
    values = [{"id": "a1", "balance": 10}]
    assert round_trip(broker.bootstrap, topic, JSONSerializer(json.dumps(ACCOUNT), client),
                      JSONDeserializer(json.dumps(ACCOUNT)), values) == values
    # BACKWARD: a new optional property in a closed model reads everything written before
    widened = {**ACCOUNT, "properties": {**ACCOUNT["properties"], "owner": {"type": "string"}}}
    evolved = [{"id": "a2", "balance": 5, "owner": "ann"}]
    assert round_trip(broker.bootstrap, topic, JSONSerializer(json.dumps(widened), client),
                      JSONDeserializer(None, schema_registry_client=client), evolved, 1) == values + evolved
    assert client.get_versions(f"{topic}-value") == [1, 2]
    required = {**widened, "required": ["id", "owner"]}
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(json.dumps(required), "JSON"))
    assert refused.value.error_code == 409 and "REQUIRED_ATTRIBUTE_ADDED" in refused.value.error_message


def test_json_schema_references(client, broker):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    client.register_schema("address.json", Schema(json.dumps(address), "JSON"))
    customer = {"type": "object", "properties": {"name": {"type": "string"}, "address": {"$ref": "address.json"}}}
    schema = Schema(json.dumps(customer), "JSON", [SchemaReference("address.json", "address.json", 1)])
    client.register_schema("json-customers-value", schema)
    value = {"name": "Ann", "address": {"city": "Ghent"}}
    serializer = JSONSerializer(schema, client, conf={"auto.register.schemas": False, "use.latest.version": True})
    assert round_trip(broker.bootstrap, "json-customers", serializer,
                      JSONDeserializer(None, schema_registry_client=client), [value]) == [value]


# ---- Protobuf --------------------------------------------------------------------------------------------

COMMON_PROTO = 'syntax = "proto3";\npackage shop;\nmessage Money { int64 units = 1; string currency = 2; }\n'
INVOICE_PROTO = ('syntax = "proto3";\npackage shop;\nimport "shop/money.proto";\n'
                 'message Invoice { string id = 1; shop.Money total = 2; %s}\n')


def compile_proto(tmp_path, name: str, files: dict[str, str]):
    """The .proto files compiled by grpcio-tools' protoc into generated modules; the module of ``name``
    imported (once a process: its messages go into protobuf's default pool)."""
    root = tmp_path / "proto"
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    out = tmp_path / f"gen-{uuid.uuid4().hex[:8]}"
    out.mkdir()
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root}", f"--python_out={out}", *files],
                   check=True, capture_output=True)
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module(name.replace("/", ".").removesuffix(".proto") + "_pb2")
    finally:
        sys.path.remove(str(out))


def test_protobuf_register_evolve_refuse_round_trip_with_a_reference(client, broker, tmp_path):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    topic = "proto-invoices"
    files = {"shop/money.proto": COMMON_PROTO, "shop/invoice.proto": INVOICE_PROTO % ""}
    generated = compile_proto(tmp_path, "shop/invoice.proto", files)
    serializer = ProtobufSerializer(generated.Invoice, client, {"use.deprecated.format": False})
    invoice = generated.Invoice(id="i1", total={"units": 990, "currency": "EUR"})
    read = round_trip(broker.bootstrap, topic, serializer,
                      ProtobufDeserializer(generated.Invoice, {"use.deprecated.format": False}), [invoice])
    assert read == [invoice]
    # the import was registered as a reference under its file name
    latest = client.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject) for r in latest.schema.references] == [("shop/money.proto", "shop/money.proto")]

    # a new field is compatible (registered as .proto text over the descriptor the serializer registered);
    # changing a field's type is not
    money = [SchemaReference("shop/money.proto", "shop/money.proto", 1)]
    client.register_schema(f"{topic}-value", Schema(INVOICE_PROTO % "string note = 3; ", "PROTOBUF", money))
    assert client.get_versions(f"{topic}-value") == [1, 2]
    broken = (INVOICE_PROTO % "").replace("string id = 1", "int64 id = 1")
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(broken, "PROTOBUF", money))
    assert refused.value.error_code == 409 and "FIELD_SCALAR_KIND_CHANGED" in refused.value.error_message
