"""Typed values (spark/avro_values.py): record values in the schema registry's wire format decoded into Spark
struct columns with the registry's schemas, and encoded back. A real broker and registry (conftest.py);
the values are written and read by confluent-kafka's own AvroSerializer and AvroDeserializer, unmodified.

The decode and encode tests call the executor-side functions directly (seconds); one test runs the whole
path in Spark: v1 registered and produced, v2 (a field added with a default) registered and produced,
then both read as typed columns.
"""

from __future__ import annotations

import json
import socket
import uuid

import pyarrow as pa
import pytest

pytest.importorskip("fastavro")

from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql.pandas.types import to_arrow_type

from eoslog.spark import avro_types, avro_values
from eoslog.spark.avro_values import FAILFAST, PERMISSIVE, RegistryError, ValueSchema
from eoslog.spark.errors import MalformedValueError

PAYMENT_V1 = {"type": "record", "name": "Payment", "namespace": "shop", "fields": [
    {"name": "id", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
# v2 adds a field with a default: BACKWARD compatible, so v1 records read under v2 get "EUR"
PAYMENT_V2 = {**PAYMENT_V1, "fields": PAYMENT_V1["fields"] + [
    {"name": "currency", "type": "string", "default": "EUR"}]}


class Subject:
    """One subject's two versions, registered through confluent-kafka's client, with a serializer each."""

    def __init__(self, url: str, subject: str, topic: str) -> None:
        self.client = SchemaRegistryClient({"url": url})
        self.subject, self.topic = subject, topic
        self.ids: dict[int, int] = {}
        self.serializers: dict[int, AvroSerializer] = {}

    def register(self, version: int, schema: dict) -> int:
        self.ids[version] = self.client.register_schema(self.subject, Schema(json.dumps(schema), "AVRO"))
        self.serializers[version] = AvroSerializer(self.client, json.dumps(schema),
                                                   conf={"auto.register.schemas": False})
        return self.ids[version]

    def serialize(self, version: int, value: dict) -> bytes:
        return self.serializers[version](value, SerializationContext(self.topic, MessageField.VALUE))


def _payment(i: int, **extra) -> dict:
    import datetime
    import decimal

    return {"id": f"p{i}", "amount": decimal.Decimal(i) / 100,
            "ts": datetime.datetime(2026, 11, 29, 0, 0, i % 60, tzinfo=datetime.UTC), **extra}


def _value_schema(url: str, subject: str, schema_id: int, mode: str = FAILFAST) -> ValueSchema:
    return ValueSchema((("url", url),), subject, schema_id, mode)


def _arrow_type(url: str, schema_id: int):
    parsed = avro_values.parsed_schema((("url", url),), schema_id)
    return to_arrow_type(avro_types.spark_type(parsed).dataType, timezone="UTC")


@pytest.fixture
def subject(registry) -> Subject:
    topic = f"typed-{uuid.uuid4().hex[:8]}"
    return Subject(registry.url, f"{topic}-value", topic)


def test_a_v1_value_reads_under_v2_with_v2s_default(registry, subject):
    subject.register(1, PAYMENT_V1)
    v1 = subject.serialize(1, _payment(1))
    v2_id = subject.register(2, PAYMENT_V2)
    v2 = subject.serialize(2, _payment(2, currency="USD"))
    assert v1[1:5] != v2[1:5]  # two writer ids in the data
    column = avro_values.decode(_value_schema(registry.url, subject.subject, v2_id), [v1, v2, None],
                                [10, 11, 12], subject.topic, 0, _arrow_type(registry.url, v2_id))
    rows = column.to_pylist()
    assert [(r["id"], r["currency"]) for r in rows[:2]] == [("p1", "EUR"), ("p2", "USD")]
    assert rows[0]["amount"] == _payment(1)["amount"] and rows[1]["ts"] == _payment(2)["ts"]
    assert rows[2] is None  # a null value (a tombstone) is a null struct


def test_a_v2_value_reads_under_v1_without_the_new_field(registry, subject):
    v1_id = subject.register(1, PAYMENT_V1)
    subject.register(2, PAYMENT_V2)
    column = avro_values.decode(_value_schema(registry.url, subject.subject, v1_id),
                                [subject.serialize(2, _payment(3, currency="USD"))], [0], subject.topic, 0,
                                _arrow_type(registry.url, v1_id))
    assert column.to_pylist() == [{k: v for k, v in _payment(3).items()}]


def test_references_are_followed(registry, subject):
    money_subject = f"{subject.topic}.Money"
    money = {"type": "record", "name": "Money", "namespace": "shop",
             "fields": [{"name": "units", "type": "long"}, {"name": "currency", "type": "string"}]}
    subject.client.register_schema(money_subject, Schema(json.dumps(money), "AVRO"))
    order = {"type": "record", "name": "Order", "namespace": "shop",
             "fields": [{"name": "id", "type": "string"}, {"name": "total", "type": "shop.Money"}]}
    schema = Schema(json.dumps(order), "AVRO", [SchemaReference("shop.Money", money_subject, 1)])
    order_id = subject.client.register_schema(subject.subject, schema)
    serialize = AvroSerializer(subject.client, schema, conf={"auto.register.schemas": False,
                                                               "use.latest.version": True})
    value = {"id": "o1", "total": {"units": 1250, "currency": "EUR"}}
    column = avro_values.decode(_value_schema(registry.url, subject.subject, order_id),
                                [serialize(value, SerializationContext(subject.topic, MessageField.VALUE))], [0],
                                subject.topic, 0, _arrow_type(registry.url, order_id))
    assert column.to_pylist() == [value]


def test_each_plan_sees_the_subjects_latest_version(registry, subject):
    """A query planned again (a restart) takes the version registered since: nothing keeps the first answer."""
    v1_id = subject.register(1, PAYMENT_V1)
    first, field = avro_values.registered({"url": registry.url}, subject.subject)
    assert first.schema_id == v1_id and "currency" not in field.dataType.names
    v2_id = subject.register(2, PAYMENT_V2)
    again, field = avro_values.registered({"url": registry.url}, subject.subject)
    assert again.schema_id == v2_id and field.dataType.names[-1] == "currency"
    assert field.metadata == {"eoslog.schema.id": v2_id, "eoslog.subject": subject.subject}


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_malformed_values_fail_the_task_naming_the_offset_or_read_as_null_when_permissive(registry, subject):
    v1_id = subject.register(1, PAYMENT_V1)
    good = subject.serialize(1, _payment(4))
    unknown_id = b"\x00" + (10**6).to_bytes(4, "big") + good[5:]
    cases = {b"plain text": "not in the schema registry's wire format",
             unknown_id: "schema id 1000000 is not registered",
             good[:7]: "cannot be read"}
    arrow_type = _arrow_type(registry.url, v1_id)
    for raw, says in cases.items():
        with pytest.raises(MalformedValueError, match=f"{subject.topic}-3 offset 41: .*{says}"):
            avro_values.decode(_value_schema(registry.url, subject.subject, v1_id), [good, raw], [40, 41],
                               subject.topic, 3, arrow_type)
    permissive = avro_values.decode(_value_schema(registry.url, subject.subject, v1_id, PERMISSIVE),
                                    [good, *cases], [0, 1, 2, 3], subject.topic, 0, arrow_type)
    assert [None if r is None else r["id"] for r in permissive.to_pylist()] == ["p4", None, None, None]


def test_a_registry_that_cannot_be_reached_fails_even_when_permissive(registry, subject):
    subject.register(1, PAYMENT_V1)
    good = subject.serialize(1, _payment(5))
    nowhere = ValueSchema((("url", _dead_url()),), subject.subject, 1, PERMISSIVE)
    with pytest.raises(RegistryError, match="could not be asked"):
        avro_values.decode(nowhere, [good], [0], subject.topic, 0, pa.struct([]))


def test_encoded_values_are_read_by_confluents_deserializer(registry, subject):
    v2_id = subject.register(2, PAYMENT_V2)
    rows = [_payment(6, currency="CHF"), None]
    column = pa.array(rows, _arrow_type(registry.url, v2_id))
    encoded = avro_values.encode(_value_schema(registry.url, subject.subject, v2_id), column)
    assert encoded[1] is None and encoded[0][:5] == b"\x00" + v2_id.to_bytes(4, "big")
    deserialize = AvroDeserializer(subject.client)
    assert deserialize(encoded[0], SerializationContext(subject.topic, MessageField.VALUE)) == rows[0]
    with pytest.raises(MalformedValueError, match="row 0 of the batch does not fit subject"):
        avro_values.encode(_value_schema(registry.url, subject.subject, v2_id),
                           pa.array([{"id": None}], pa.struct([("id", pa.string())])))


def test_spark_reads_typed_columns_across_a_compatible_schema_change(spark, broker, kafka, registry, subject):
    kafka.create(subject.topic, partitions=2)
    subject.register(1, PAYMENT_V1)
    kafka.produce(subject.topic, [(None, subject.serialize(1, _payment(i)), None, i % 2) for i in range(20)])
    v2_id = subject.register(2, PAYMENT_V2)
    kafka.produce(subject.topic, [(None, subject.serialize(2, _payment(i, currency="USD")), None, i % 2)
                                  for i in range(20, 30)])
    df = (spark.read.format("eoslog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", subject.topic).option("schema.registry.url", registry.url).load())
    value = df.schema["value"]
    assert value.dataType.simpleString() == "struct<id:string,amount:decimal(12,2),ts:timestamp,currency:string>"
    assert value.metadata == {"eoslog.schema.id": v2_id, "eoslog.subject": subject.subject}
    rows = {r.id: r for r in df.select("value.*", "offset").collect()}
    assert sorted(rows) == sorted(f"p{i}" for i in range(30))
    assert {rows[f"p{i}"].currency for i in range(20)} == {"EUR"}  # v1 records get v2's default
    assert {rows[f"p{i}"].currency for i in range(20, 30)} == {"USD"}
    assert all(rows[f"p{i}"].amount == _payment(i)["amount"] for i in range(30))
    assert rows["p7"].ts.replace(tzinfo=None) == _payment(7)["ts"].astimezone().replace(tzinfo=None)
    # the librdkafka read path decodes the same way
    through_librdkafka = (spark.read.format("eoslog").option("kafka.bootstrap.servers", broker.bootstrap)
                          .option("subscribe", subject.topic).option("schema.registry.url", registry.url)
                          .option("eoslog.reader", "librdkafka").load())
    assert sorted(through_librdkafka.select("value.*", "offset").collect()) == sorted(rows.values())


def test_spark_writes_a_struct_value_column_in_the_wire_format(spark, broker, kafka, registry, subject):
    kafka.create(subject.topic)
    subject.register(1, PAYMENT_V1)
    kafka.produce(subject.topic, [(None, subject.serialize(1, _payment(i)), None, None) for i in range(10)])
    out = Subject(registry.url, f"{subject.topic}-out-value", f"{subject.topic}-out")
    kafka.create(out.topic)
    out_id = out.register(2, PAYMENT_V2)
    typed = (spark.read.format("eoslog").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", subject.topic).option("schema.registry.url", registry.url).load())
    # v1's columns written under the out subject's v2: the missing field takes its default
    (typed.select("value").write.format("eoslog").mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", out.topic).option("schema.registry.url", registry.url).save())
    deserialize = AvroDeserializer(out.client)
    messages = kafka.read_all(out.topic, expect=10)
    assert {m.value()[1:5] for m in messages} == {out_id.to_bytes(4, "big")}
    read = [deserialize(m.value(), SerializationContext(out.topic, MessageField.VALUE)) for m in messages]
    assert sorted(read, key=lambda v: v["id"]) == sorted((_payment(i, currency="EUR") for i in range(10)),
                                                         key=lambda v: v["id"])
