"""What typed Spark values cost a task (issue 39): the executor-side decode and encode of spark/avro_values.py,
against an embedded broker and a registry in this process, everything in one run so ratios compare:

    PYTHONPATH=src .venv/bin/python bench/spark_typed_values_bench.py [--records 100000]

- ``binary``: the value column as a task hands it to Spark without typed values (``pyarrow.array`` of the
  bytes), the floor;
- ``decode, one writer``: every value written under the reader's own version (no resolution);
- ``decode, v1 and v2 writers``: half written under v1, read under v2 (fastavro resolves those: a default);
- ``encode``: the sink's direction, a struct column to wire-format bytes.

The registry is asked once per id and cached before the timed part, as a task's Python worker does after
its first batch. Single-threaded; the machine's other load shows in the spread of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import pyarrow as pa
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql.pandas.types import to_arrow_type

from eoslog.schema_registry.kafka_access import KafkaAccess
from eoslog.schema_registry.server import RegistryServer
from eoslog.server.embedded import EmbeddedBroker
from eoslog.spark import avro_types, avro_values

V1 = {"type": "record", "name": "Payment", "namespace": "bench", "fields": [
    {"name": "id", "type": "string"}, {"name": "from", "type": "string"}, {"name": "to", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "note", "type": ["null", "string"], "default": None}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "currency", "type": "string", "default": "EUR"}]}


def _payment(i: int, v2: bool) -> dict:
    value = {"id": f"tx-{i:09d}", "from": f"acc-{i % 1000:05d}", "to": f"acc-{(i * 7) % 1000:05d}",
             "amount": decimal.Decimal(i % 100_000) / 100,
             "ts": datetime.datetime(2026, 11, 29, tzinfo=datetime.UTC) + datetime.timedelta(milliseconds=i),
             "note": None if i % 3 else "rent"}
    if v2:
        value["currency"] = ("EUR", "USD", "CHF")[i % 3]
    return value


def _best(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n = args.records
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(data_dir=Path(tmp) / "data") as broker:
        server = RegistryServer(KafkaAccess(broker.bootstrap), "127.0.0.1:0").start()
        try:
            client = SchemaRegistryClient({"url": server.url})
            deadline = time.monotonic() + 60
            while True:
                try:
                    client.register_schema("bench-value", Schema(json.dumps(V1), "AVRO"))
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            v2_id = client.register_schema("bench-value", Schema(json.dumps(V2), "AVRO"))
            context = SerializationContext("bench", MessageField.VALUE)
            ser1 = AvroSerializer(client, json.dumps(V1), conf={"auto.register.schemas": False})
            ser2 = AvroSerializer(client, json.dumps(V2), conf={"auto.register.schemas": False})
            only_v2 = [ser2(_payment(i, True), context) for i in range(n)]
            mixed = [ser1(_payment(i, False), context) if i % 2 else only_v2[i] for i in range(n)]
            offsets = list(range(n))
            registry = (("url", server.url),)
            reader = avro_values.ValueSchema(registry, "bench-value", v2_id)
            arrow_type = to_arrow_type(avro_types.spark_type(avro_values.parsed_schema(registry, v2_id)).dataType,
                                       timezone="UTC")
            avro_values.decode(reader, mixed[:10], offsets, "bench", 0, arrow_type)  # both ids cached
            column = avro_values.decode(reader, only_v2, offsets, "bench", 0, arrow_type)
            rows = {
                "binary (no typed values)": lambda: pa.array(only_v2, pa.binary()),
                "decode, one writer": lambda: avro_values.decode(reader, only_v2, offsets, "bench", 0, arrow_type),
                "decode, v1 and v2 writers": lambda: avro_values.decode(reader, mixed, offsets, "bench", 0,
                                                                        arrow_type),
                "encode": lambda: avro_values.encode(reader, column),
            }
            size = statistics.mean(len(v) for v in only_v2)
            print(f"{n:,} values of about {size:.0f} bytes, best and median of {args.repeat}")
            print(f"{'':28} {'records/s':>12} {'µs/record':>10} {'median µs':>10}")
            for name, fn in rows.items():
                best, median = _best(fn, args.repeat)
                print(f"{name:28} {n / best:12,.0f} {best / n * 1e6:10.2f} {median / n * 1e6:10.2f}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
