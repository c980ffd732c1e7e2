"""Avro schemas as Spark types, and the few value conversions between fastavro's Python values and Arrow's.

Pure: a schema in, a type or a function out. The mapping is the one Spark's own ``from_avro`` uses
(``SchemaConverters``), so a job moving from Spark's Avro functions sees the same columns:

| Avro | Spark |
|---|---|
| boolean, int, long, float, double, bytes, string | BooleanType, IntegerType, LongType, FloatType, DoubleType, BinaryType, StringType |
| int ``date`` | DateType |
| long ``timestamp-millis`` / ``-micros`` | TimestampType |
| long ``local-timestamp-millis`` / ``-micros`` | TimestampNTZType |
| bytes / fixed ``decimal`` | DecimalType(precision, scale), precision at most 38 |
| string ``uuid`` | StringType |
| int ``time-millis``, long ``time-micros`` | IntegerType, LongType (the raw count, as Spark's) |
| enum | StringType (the symbol) |
| fixed | BinaryType |
| record | StructType, one field per Avro field, in order |
| array, map | ArrayType, MapType(StringType, ...) |
| union with null | the other branch, nullable |
| [int, long], [float, double] (± null) | LongType, DoubleType |

Any other union of several types, and recursive records, have no column type: :class:`UnsupportedAvroSchema`
names the field. A field is nullable exactly when its Avro type admits null.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
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

_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "bytes": BinaryType(), "string": StringType(), "null": NullType(),
}
_MAX_DECIMAL_PRECISION = 38  # Spark's DecimalType.MAX_PRECISION


class UnsupportedAvroSchema(ValueError):
    """An Avro schema with no Spark type; the message names the field path."""


def parse(schema: str | dict | list, named_schemas: dict | None = None) -> dict | list | str:
    """The schema with every named type written out in place (fastavro's ``expand``), so the mapping
    below never resolves a name; a name left as a string afterwards can only be a recursive reference."""
    import json

    import fastavro

    if isinstance(schema, str):
        schema = json.loads(schema)
    return fastavro.parse_schema(schema, named_schemas=dict(named_schemas or {}), expand=True)


def spark_type(schema: str | dict | list, named_schemas: dict | None = None) -> StructField:
    """The Spark field for a whole Avro schema (its name is ``value``; nullable when the schema admits null)."""
    data_type, nullable = _convert(parse(schema, named_schemas), "value")
    return StructField("value", data_type, nullable)


def _convert(schema, path: str) -> tuple[DataType, bool]:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema], schema == "null"
        raise UnsupportedAvroSchema(f"{path}: the recursive type {schema!r} has no Spark column type")
    if isinstance(schema, list):
        return _union(schema, path)
    kind, logical = schema["type"], schema.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _convert(kind, path)  # {"type": {...}}: a type wrapped once more
    if logical is not None:
        mapped = _logical(kind, logical, schema, path)
        if mapped is not None:
            return mapped, False
    if kind == "record" or kind == "error":
        fields = []
        for f in schema["fields"]:
            field_type, nullable = _convert(f["type"], f"{path}.{f['name']}")
            fields.append(StructField(f["name"], field_type, nullable))
        return StructType(fields), False
    if kind == "enum":
        return StringType(), False
    if kind == "fixed":
        return BinaryType(), False
    if kind == "array":
        items, nullable = _convert(schema["items"], f"{path}[]")
        return ArrayType(items, nullable), False
    if kind == "map":
        values, nullable = _convert(schema["values"], f"{path}{{}}")
        return MapType(StringType(), values, nullable), False
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind], kind == "null"
    raise UnsupportedAvroSchema(f"{path}: unknown Avro type {kind!r}")


def _logical(kind: str, logical: str, schema: dict, path: str) -> DataType | None:
    """The Spark type of a logical type, or None for one Avro readers ignore (the underlying type then)."""
    if kind == "int" and logical == "date":
        return DateType()
    if kind == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        return TimestampType()
    if kind == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return TimestampNTZType()
    if kind in ("bytes", "fixed") and logical == "decimal":
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        if precision > _MAX_DECIMAL_PRECISION:
            raise UnsupportedAvroSchema(f"{path}: decimal({precision}, {scale}) is wider than Spark's "
                                        f"{_MAX_DECIMAL_PRECISION} digits")
        return DecimalType(precision, scale)
    return None


def _union(branches: list, path: str) -> tuple[DataType, bool]:
    nullable = "null" in branches
    rest = [b for b in branches if b != "null"]
    if not rest:
        return NullType(), True
    if len(rest) == 1:
        data_type, _ = _convert(rest[0], path)
        return data_type, nullable
    if sorted(map(str, rest)) == ["int", "long"]:
        return LongType(), nullable
    if sorted(map(str, rest)) == ["double", "float"]:
        return DoubleType(), nullable
    raise UnsupportedAvroSchema(f"{path}: a union of several types ({_names(rest)}) has no Spark column type; "
                                "only a type or null, [int, long] and [float, double] do")


def _names(branches: list) -> str:
    return ", ".join(b if isinstance(b, str) else str(b.get("name") or b.get("type")) for b in branches)


# ---- values --------------------------------------------------------------------------------------------------
# fastavro hands back Python values Arrow takes as they are for every type but three: uuid (a UUID object
# for a string column) and the times (datetime.time for Spark's int and long counts). Arrow hands the sink
# maps as lists of pairs, where fastavro wants dicts. Converters are built once per schema, and only where
# a value needs one, so a schema without those types decodes with no per-value Python step at all.

Converter = Callable[[object], object]


def _time_millis(t: datetime.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1000 + t.microsecond // 1000


def _time_micros(t: datetime.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def decoded_to_arrow(schema) -> Converter | None:
    """A function making one fastavro-decoded value of ``schema`` (parsed by :func:`parse`) acceptable to
    ``pyarrow.array`` under the mapped type; None when every value already is."""
    if isinstance(schema, str):
        return None
    if isinstance(schema, list):
        converters = [c for c in (decoded_to_arrow(b) for b in schema) if c is not None]
        if not converters:
            return None
        only = converters[0]  # _union admits at most one non-null branch that is not a plain number
        return lambda v: None if v is None else only(v)
    kind, logical = schema["type"], schema.get("logicalType")
    if isinstance(kind, (dict, list)):
        return decoded_to_arrow(kind)
    if kind == "string" and logical == "uuid":
        return lambda v: v if isinstance(v, str) else str(v)
    if kind == "int" and logical == "time-millis":
        return lambda v: v if isinstance(v, int) else _time_millis(v)
    if kind == "long" and logical == "time-micros":
        return lambda v: v if isinstance(v, int) else _time_micros(v)
    if kind in ("record", "error"):
        fields = [(f["name"], decoded_to_arrow(f["type"])) for f in schema["fields"]]
        fields = [(name, c) for name, c in fields if c is not None]
        if not fields:
            return None

        def record(v, fields=fields):
            if v is None:
                return None
            for name, convert in fields:
                if v.get(name) is not None:
                    v[name] = convert(v[name])
            return v

        return record
    if kind == "array":
        item = decoded_to_arrow(schema["items"])
        return None if item is None else (lambda v: None if v is None else [item(x) for x in v])
    if kind == "map":
        value = decoded_to_arrow(schema["values"])
        return None if value is None else (lambda v: None if v is None else {k: value(x) for k, x in v.items()})
    return None


def arrow_to_encodable(schema) -> Converter | None:
    """The sink's direction: a function making one value of ``pyarrow.Array.to_pylist()`` under the mapped
    type acceptable to fastavro's writer; None when every value already is (maps are the one case)."""
    if isinstance(schema, str):
        return None
    if isinstance(schema, list):
        converters = [c for c in (arrow_to_encodable(b) for b in schema) if c is not None]
        if not converters:
            return None
        only = converters[0]
        return lambda v: None if v is None else only(v)
    kind = schema["type"]
    if isinstance(kind, (dict, list)):
        return arrow_to_encodable(kind)
    if kind in ("record", "error"):
        fields = [(f["name"], arrow_to_encodable(f["type"])) for f in schema["fields"]]
        fields = [(name, c) for name, c in fields if c is not None]
        if not fields:
            return None

        def record(v, fields=fields):
            if v is None:
                return None
            for name, convert in fields:
                if v.get(name) is not None:
                    v[name] = convert(v[name])
            return v

        return record
    if kind == "array":
        item = arrow_to_encodable(schema["items"])
        return None if item is None else (lambda v: None if v is None else [item(x) for x in v])
    if kind == "map":
        value = arrow_to_encodable(schema["values"]) or (lambda x: x)
        return lambda v: None if v is None else {k: value(x) for k, x in (v.items() if isinstance(v, dict) else v)}
    return None
