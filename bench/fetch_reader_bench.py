"""The Spark source's direct read path (eoslog.spark.fetch_reader) outside Spark: one partition read
from offset 0 to its end with PartitionFetcher, CPU and wall time of the reading process.

    PYTHONPATH=src python bench/fetch_reader_bench.py [--records 200000] [--size 100] [--rounds 5]
        [--src DIR ...]

One `eoslog serve` subprocess; one topic of one partition filled once. Each round reads the whole
range once per ``--src`` tree (default: the tree this script is in), each in a fresh child process
whose PYTHONPATH is that tree, the trees' order alternating so a machine getting busier favours none:
two trees give a before/after of a change to the read path on the same data and broker.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "fetch-bench"
HERE = Path(__file__).resolve()


def fill(bootstrap: str, records: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, key=b"%d" % i, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def read_once(bootstrap: str, records: int) -> None:
    """The child: reads [0, records) and prints 'cpu_s wall_s rows'."""
    from eoslog.spark.fetch_reader import PartitionFetcher

    fetcher = PartitionFetcher(bootstrap, TOPIC, 0, 0, records, read_committed=False, fail_on_data_loss=True,
                               poll_timeout_ms=60_000)
    cpu, wall = time.process_time(), time.perf_counter()
    rows = sum(len(columns) for columns in fetcher.columns())
    print(f"{time.process_time() - cpu} {time.perf_counter() - wall} {rows}")


def child(src: Path, bootstrap: str, records: int) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, str(HERE), "--child", bootstrap, "--records", str(records)], env=env,
                         check=True, capture_output=True, text=True, timeout=600).stdout.split()
    cpu, wall, rows = float(out[0]), float(out[1]), int(out[2])
    assert rows == records, (rows, records)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--src", type=Path, action="append", help="a tree's src directory (repeatable)")
    parser.add_argument("--child", metavar="BOOTSTRAP", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        read_once(args.child, args.records)
        return
    from eoslog.testing.process import BrokerProcess

    trees = [p.resolve() for p in args.src or [HERE.parent.parent / "src"]]
    results: dict[Path, list[tuple[float, float]]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory(prefix="fetch-reader-bench-") as tmp, \
            BrokerProcess(data_dir=Path(tmp) / "data") as broker:
        fill(broker.bootstrap, args.records, args.size)
        child(trees[0], broker.bootstrap, args.records)  # warm the page cache and the broker
        for round_ in range(args.rounds):
            for tree in trees[::-1] if round_ % 2 else trees:
                results[tree].append(child(tree, broker.bootstrap, args.records))
    print(f"{args.records} records of {args.size} B, one partition, {args.rounds} reads per tree")
    for tree, runs in results.items():
        cpus, walls = [c for c, _ in runs], [w for _, w in runs]
        print(f"{tree}: CPU median {statistics.median(cpus):.3f} s (min {min(cpus):.3f}, "
              f"{statistics.median(cpus) / args.records * 1e6:.2f} us a record), wall median "
              f"{statistics.median(walls):.3f} s (min {min(walls):.3f})")


if __name__ == "__main__":
    main()
