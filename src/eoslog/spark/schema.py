"""The source's columns, the same as Spark's Kafka source, as a Spark schema and as an Arrow schema.

``read()`` yields Arrow record batches, and Spark refuses any batch whose schema is not *equal* to the
one it derives from the declared schema (nullability and the timestamp's unit and zone included), so
the Arrow schema is derived by Spark's own function rather than written out by hand.
"""

from __future__ import annotations

import functools
import json

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

_BASE_FIELDS = (
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
)

# Kafka's TimestampType ids as Spark's source reports them; librdkafka numbers them one higher
# (0 = not available, 1 = create time, 2 = log append time).
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1


def source_schema(include_headers: bool, value: StructField | None = None) -> StructType:
    """Spark's Kafka columns; ``value`` replaces the binary value column (typed values, avro_values.py)."""
    fields = list(_BASE_FIELDS)
    if value is not None:
        fields[1] = value
    if include_headers:
        fields.append(StructField("headers", ArrayType(HEADER_TYPE)))
    return StructType(fields)


@functools.lru_cache(maxsize=2)
def arrow_schema(include_headers: bool):
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(source_schema(include_headers), timezone="UTC")


@functools.lru_cache(maxsize=8)
def typed_arrow_schema(schema_json: str):
    """The Arrow schema of a declared source schema whose ``value`` is a struct (given as Spark's JSON)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(StructType.fromJson(json.loads(schema_json)), timezone="UTC")
