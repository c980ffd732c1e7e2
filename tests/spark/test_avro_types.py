"""Avro schemas as Spark column types, and the value conversions around fastavro (spark/avro_types.py). Pure."""

from __future__ import annotations

import datetime
import decimal
import io
import re
import uuid

import pyarrow as pa
import pytest

fastavro = pytest.importorskip("fastavro")

from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from eoslog.spark import avro_types
from eoslog.spark.avro_types import UnsupportedAvroSchema, spark_type


def _field(avro_type) -> StructField:
    """The Spark field of a one-field record's field ``f``."""
    record = spark_type({"type": "record", "name": "R", "fields": [{"name": "f", "type": avro_type}]})
    return record.dataType["f"]


@pytest.mark.parametrize("avro_type, expected", [
    ("boolean", BooleanType()), ("int", IntegerType()), ("long", LongType()), ("float", FloatType()),
    ("double", DoubleType()), ("bytes", BinaryType()), ("string", StringType()),
    ({"type": "int", "logicalType": "date"}, DateType()),
    ({"type": "long", "logicalType": "timestamp-millis"}, TimestampType()),
    ({"type": "long", "logicalType": "timestamp-micros"}, TimestampType()),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, TimestampNTZType()),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, TimestampNTZType()),
    ({"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}, DecimalType(12, 2)),
    ({"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 18}, DecimalType(18, 0)),
    ({"type": "string", "logicalType": "uuid"}, StringType()),
    ({"type": "int", "logicalType": "time-millis"}, IntegerType()),
    ({"type": "long", "logicalType": "time-micros"}, LongType()),
    ({"type": "string", "logicalType": "no-such-logical-type"}, StringType()),  # ignored, as Avro readers do
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, StringType()),
    ({"type": "fixed", "name": "F", "size": 4}, BinaryType()),
    ({"type": "array", "items": "long"}, ArrayType(LongType(), False)),
    ({"type": "array", "items": ["null", "long"]}, ArrayType(LongType(), True)),
    ({"type": "map", "values": "string"}, MapType(StringType(), StringType(), False)),
    (["int", "long"], LongType()), (["float", "double"], DoubleType()),
])
def test_each_avro_type_has_sparks_column_type(avro_type, expected):
    field = _field(avro_type)
    assert field.dataType == expected
    assert field.nullable is False


@pytest.mark.parametrize("avro_type, expected", [
    (["null", "string"], StringType()), (["string", "null"], StringType()),
    (["null", "int", "long"], LongType()), (["null"], NullType()), ("null", NullType()),
])
def test_a_union_with_null_is_nullable(avro_type, expected):
    field = _field(avro_type)
    assert (field.dataType, field.nullable) == (expected, True)


def test_records_nest_and_named_types_are_written_out_where_used():
    schema = {"type": "record", "name": "Payment", "namespace": "shop", "fields": [
        {"name": "id", "type": "string"},
        {"name": "from", "type": {"type": "record", "name": "Account", "fields": [
            {"name": "number", "type": "long"}, {"name": "bank", "type": ["null", "string"], "default": None}]}},
        {"name": "to", "type": "Account"},
        {"name": "tags", "type": {"type": "map", "values": {"type": "array", "items": "shop.Account"}}},
    ]}
    account = StructType([StructField("number", LongType(), False), StructField("bank", StringType(), True)])
    assert spark_type(schema) == StructField("value", StructType([
        StructField("id", StringType(), False), StructField("from", account, False),
        StructField("to", account, False),
        StructField("tags", MapType(StringType(), ArrayType(account, False), False), False)]), False)


def test_named_types_of_references_resolve():
    money = fastavro.parse_schema({"type": "record", "name": "Money", "namespace": "shop",
                                   "fields": [{"name": "cents", "type": "long"}]}, named_schemas=(named := {}))
    assert money
    field = spark_type('{"type": "record", "name": "Order", "namespace": "shop", '
                       '"fields": [{"name": "total", "type": "Money"}]}', named)
    assert field.dataType["total"].dataType == StructType([StructField("cents", LongType(), False)])


@pytest.mark.parametrize("avro_type, says", [
    (["int", "string"], "value.f: a union of several types (int, string)"),
    (["null", "string", {"type": "record", "name": "X", "fields": []}], "(string, X)"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 0}, "wider than Spark's 38"),
])
def test_types_spark_cannot_hold_are_refused_by_field(avro_type, says):
    with pytest.raises(UnsupportedAvroSchema, match=re.escape(says)):
        _field(avro_type)


def test_a_recursive_record_is_refused():
    with pytest.raises(UnsupportedAvroSchema, match=r"value.next: the recursive type 'Node'"):
        spark_type({"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]})


ALL_KINDS = {"type": "record", "name": "All", "fields": [
    {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tu", "type": ["null", {"type": "long", "logicalType": "time-micros"}]},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "d", "type": {"type": "int", "logicalType": "date"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "ids", "type": {"type": "array", "items": {"type": "string", "logicalType": "uuid"}}},
    {"name": "m", "type": {"type": "map", "values": ["null", "long"]}},
    {"name": "n", "type": ["int", "long"]},
]}


def _round_trip(datum: dict) -> dict:
    """``datum`` written by fastavro, read back by fastavro, made fit for Arrow."""
    parsed = avro_types.parse(ALL_KINDS)
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, parsed, datum)
    buffer.seek(0)
    convert = avro_types.decoded_to_arrow(parsed)
    return convert(fastavro.schemaless_reader(buffer, parsed))


def test_decoded_values_become_the_mapped_arrow_type_and_back():
    the_id = uuid.uuid4()
    datum = {"u": str(the_id), "tm": datetime.time(1, 2, 3, 456000), "tu": datetime.time(0, 0, 1, 7),
             "ts": datetime.datetime(2026, 11, 29, 1, 2, 3, 4000, tzinfo=datetime.UTC),
             "lts": datetime.datetime(2026, 11, 29, 1, 2, 3, 5), "d": datetime.date(2026, 11, 29),
             "amount": decimal.Decimal("12.34"), "e": "B", "ids": [str(the_id)], "m": {"a": 1, "b": None},
             "n": 2**40}
    value = _round_trip(datum)
    assert value["u"] == str(the_id) and value["ids"] == [str(the_id)]
    assert value["tm"] == 3_723_456 and value["tu"] == 1_000_007  # Spark's counts: ms, µs since midnight
    arrow_type = to_arrow_type(spark_type(ALL_KINDS).dataType, timezone="UTC")
    array = pa.array([value, None], arrow_type)
    array.validate(full=True)
    row = array.to_pylist()[0]
    assert row["ts"] == datum["ts"] and row["lts"] == datum["lts"] and row["amount"] == decimal.Decimal("12.34")
    assert row["e"] == "B" and row["n"] == 2**40 and dict(row["m"]) == {"a": 1, "b": None}
    # and the sink's way back: what Arrow hands over encodes to the same Avro value
    encodable = avro_types.arrow_to_encodable(avro_types.parse(ALL_KINDS))(row)
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, avro_types.parse(ALL_KINDS), encodable)
    buffer.seek(0)
    again = avro_types.decoded_to_arrow(avro_types.parse(ALL_KINDS))(
        fastavro.schemaless_reader(buffer, avro_types.parse(ALL_KINDS)))
    assert again == value


def test_schemas_without_uuid_or_time_need_no_per_value_conversion():
    plain = {"type": "record", "name": "P", "fields": [
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "xs", "type": {"type": "array", "items": "long"}}]}
    assert avro_types.decoded_to_arrow(avro_types.parse(plain)) is None
    assert avro_types.arrow_to_encodable(avro_types.parse(plain)) is None
