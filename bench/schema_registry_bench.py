"""The schema registry's latencies (issue 39), against an embedded broker and a registry in this process,
both on loopback; everything in one run, so ratios compare:

    PYTHONPATH=src .venv/bin/python bench/schema_registry_bench.py [--schemas 200] [--lookups 2000]

- registration: one new Avro schema per request (decide, one transaction on _schemas, read back), the
  median and p99 over ``--schemas`` registrations, through plain HTTP with keep-alive;
- lookup by id (``GET /schemas/ids/{id}``, what a deserializer asks once per id) over plain HTTP with
  keep-alive: median, p99, and requests a second from one client;
- the same lookup through confluent-kafka's SchemaRegistryClient, which caches: the first ask per id and
  the cached ones;
- the registry's start: from construction to the first registration answered (topic, reader, election,
  writer).
- Protobuf (``--protobuf N``): N registrations (each a protoc run), then a second registry instance started
  on the same topic: how long its background warm-up takes to parse the N stored schemas, and its first
  registration once warm (without the warm-up that registration would parse all N under the store's lock).

The broker and the registry share this process and its two cores with the clients, so absolute figures are
pessimistic; the registry's own work is what differs between the rows.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from eoslog.schema_registry.kafka_access import KafkaAccess
from eoslog.schema_registry.server import RegistryServer
from eoslog.server.embedded import EmbeddedBroker

HEADERS = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


def request(conn: http.client.HTTPConnection, method: str, path: str, body: object = None) -> tuple[int, object]:
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=HEADERS)
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def schema(i: int) -> dict:
    return {"schema": json.dumps({"type": "record", "name": f"Bench{i}", "namespace": "bench",
                                  "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}]})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schemas", type=int, default=200)
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("--protobuf", type=int, default=100)
    args = parser.parse_args()
    from confluent_kafka.schema_registry import SchemaRegistryClient

    with tempfile.TemporaryDirectory() as data, EmbeddedBroker(data_dir=Path(data)) as broker:
        started = time.perf_counter()
        server = RegistryServer(KafkaAccess(broker.bootstrap), "127.0.0.1:0", session_timeout_ms=6000).start()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        while True:
            status, body = request(conn, "POST", "/subjects/bench-0-value/versions", schema(0))
            if status == 200:
                break
            time.sleep(0.05)
        start_s = time.perf_counter() - started
        ids = [body["id"]]
        registrations = []
        for i in range(1, args.schemas):
            t0 = time.perf_counter()
            status, body = request(conn, "POST", f"/subjects/bench-{i}-value/versions", schema(i))
            registrations.append(time.perf_counter() - t0)
            assert status == 200, body
            ids.append(body["id"])
        lookups = []
        t_all = time.perf_counter()
        for i in range(args.lookups):
            t0 = time.perf_counter()
            status, _ = request(conn, "GET", f"/schemas/ids/{ids[i % len(ids)]}")
            lookups.append(time.perf_counter() - t0)
            assert status == 200
        lookup_rate = args.lookups / (time.perf_counter() - t_all)
        client = SchemaRegistryClient({"url": server.url})
        first, cached = [], []
        for schema_id in ids:
            t0 = time.perf_counter()
            client.get_schema(schema_id)
            first.append(time.perf_counter() - t0)
        for i in range(args.lookups):
            t0 = time.perf_counter()
            client.get_schema(ids[i % len(ids)])
            cached.append(time.perf_counter() - t0)
        proto_registrations = []
        for i in range(args.protobuf):
            body = {"schemaType": "PROTOBUF", "schema": f'syntax = "proto3"; message P{i} {{ int32 a = 1; }}'}
            t0 = time.perf_counter()
            status, answer = request(conn, "POST", f"/subjects/proto-{i}-value/versions", body)
            proto_registrations.append(time.perf_counter() - t0)
            assert status == 200, answer
        conn.close()
        server.stop()
        warm = warm_first = None
        if args.protobuf:
            second = RegistryServer(KafkaAccess(broker.bootstrap), "127.0.0.1:0", session_timeout_ms=6000).start()
            started = time.perf_counter()
            store = second.registry.store
            while not (store.ready and len(store.catalog._parsed) >= len(store.state.contents)):
                time.sleep(0.01)
            warm = time.perf_counter() - started
            conn = http.client.HTTPConnection("127.0.0.1", second.port, timeout=120)
            body = {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3"; message Fresh { int32 a = 1; }'}
            while True:
                t0 = time.perf_counter()
                status, answer = request(conn, "POST", "/subjects/fresh-value/versions", body)
                if status == 200:
                    warm_first = time.perf_counter() - t0
                    break
                time.sleep(0.05)  # no writer elected yet (50004): retried
            conn.close()
            second.stop()

    print(f"schema registry, {args.schemas} Avro schemas, {args.lookups} lookups, loopback, one process")
    print(f"  start to first registration answered      {ms(start_s)}")
    print(f"  registration        median {ms(statistics.median(registrations))}   p99 {ms(percentile(registrations, 0.99))}")
    print(f"  lookup by id (HTTP) median {ms(statistics.median(lookups))}   p99 {ms(percentile(lookups, 0.99))}"
          f"   {lookup_rate:7.0f} /s from one client")
    print(f"  SchemaRegistryClient first  median {ms(statistics.median(first))}   p99 {ms(percentile(first, 0.99))}")
    print(f"  SchemaRegistryClient cached median {ms(statistics.median(cached))}   p99 {ms(percentile(cached, 0.99))}")
    if args.protobuf:
        print(f"  Protobuf registration median {ms(statistics.median(proto_registrations))}   p99 "
              f"{ms(percentile(proto_registrations, 0.99))}")
        print(f"  a new instance: {len(ids) + args.protobuf} stored schemas parsed in the background in {ms(warm)}; "
              f"its first Protobuf registration {ms(warm_first)}")
    print(f"  ratio registration / lookup (medians)     {statistics.median(registrations) / statistics.median(lookups):8.1f}")


if __name__ == "__main__":
    main()
