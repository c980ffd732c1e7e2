"""Syncfs rounds and latency of Produce requests that write several partitions, fsync on ack.

    PYTHONPATH=src .venv/bin/python bench/multi_partition_sync.py [--trees /work/main,.] [--requests 300]
        [--partitions 8] [--runs 2]

A producer (idempotent, acks=all, linger 2 ms) sends one 1 KiB record to each of PARTITIONS partitions
and waits for them (``flush``), REQUESTS times, against an embedded broker with its default fsync
before every acknowledgement. It prints the median and p90 of that wait and how many syncfs rounds the
broker's group commit ran per wait (``GroupCommit.syncfs_rounds``). The producer is kafka-python, which
puts every partition bound for a broker into one ProduceRequest, as the Java client does
(librdkafka sends one request per partition). Each tree's broker runs in its own process with that
tree's code; trees take turns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "multi"


def measure(requests: int, partitions: int) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaProducer

    from eoslog.testing.embedded import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="eoslog-multi-") as data_dir, \
            EmbeddedBroker(data_dir=Path(data_dir)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(60)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=2)
        value = os.urandom(1024)

        def one_request() -> float:
            started = time.perf_counter()
            sent = [producer.send(TOPIC, value, partition=partition) for partition in range(partitions)]
            producer.flush(30)
            for future in sent:
                future.get(0)  # raises if a record was not delivered
            return time.perf_counter() - started

        one_request()  # connections, producer id, metadata
        commit = broker.broker.registry.log_directory.group_commit
        rounds_before = commit.syncfs_rounds
        waits = [one_request() for _ in range(requests)]
        rounds = commit.syncfs_rounds - rounds_before
        producer.close()
    return {"p50_ms": statistics.median(waits) * 1e3, "p90_ms": statistics.quantiles(waits, n=10)[8] * 1e3,
            "rounds_per_request": rounds / requests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default=".", help="comma-separated repository roots")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.requests, args.partitions)))
        return
    trees = [Path(tree).resolve() for tree in args.trees.split(",")]
    results: dict[Path, list[dict]] = {tree: [] for tree in trees}
    for run in range(args.runs):
        for tree in trees if run % 2 == 0 else trees[::-1]:
            env = {**os.environ, "PYTHONPATH": str(tree / "src")}
            output = subprocess.run([sys.executable, __file__, "--child", "--requests", str(args.requests),
                                     "--partitions", str(args.partitions)],
                                    env=env, check=True, capture_output=True, text=True).stdout
            result = json.loads(output.strip().splitlines()[-1])
            results[tree].append(result)
            print(f"{tree.name:16s} run {run}: p50 {result['p50_ms']:.2f} ms, p90 {result['p90_ms']:.2f} ms, "
                  f"{result['rounds_per_request']:.2f} syncfs rounds per request", flush=True)
    for tree, rows in results.items():
        print(f"{tree.name:16s} medians: p50 {statistics.median(r['p50_ms'] for r in rows):.2f} ms, "
              f"p90 {statistics.median(r['p90_ms'] for r in rows):.2f} ms, "
              f"{statistics.median(r['rounds_per_request'] for r in rows):.2f} rounds per request")


if __name__ == "__main__":
    main()
