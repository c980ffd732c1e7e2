"""Time-to-ready of an embedded broker (in this process) and of `eoslog serve` (a child process).

Ready means: accepting connections and answering a client's Metadata request. Prints medians of N runs.
Usage: python bench/startup_bench.py [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import BrokerProcess


def first_metadata(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=10)


def embedded_once() -> tuple[float, float]:
    started = time.perf_counter()
    with EmbeddedBroker() as broker:
        listening = time.perf_counter() - started
        first_metadata(broker.bootstrap)
        answered = time.perf_counter() - started
    return listening, answered


def process_once(data_dir: Path) -> tuple[float, float]:
    started = time.perf_counter()
    with BrokerProcess(data_dir=data_dir) as broker:
        listening = time.perf_counter() - started
        first_metadata(broker.bootstrap)
        answered = time.perf_counter() - started
    return listening, answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    embedded = [embedded_once() for _ in range(args.runs)]
    with tempfile.TemporaryDirectory() as tmp:
        process = [process_once(Path(tmp) / f"d{i}") for i in range(args.runs)]
    for name, runs in (("embedded (in-process thread)", embedded), ("eoslog serve (subprocess)", process)):
        listening = statistics.median(r[0] for r in runs) * 1000
        answered = statistics.median(r[1] for r in runs) * 1000
        print(f"{name:32s} listening after {listening:7.1f} ms   first Metadata answered after {answered:7.1f} ms "
              f"(median of {len(runs)})")


if __name__ == "__main__":
    main()
