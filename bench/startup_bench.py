"""Time-to-ready of an embedded broker (in this process) and of `eoslog serve` (a child process), and the
child's resident memory once ready.

Ready means: accepting connections and answering a client's Metadata request. Prints medians of N runs.
RSS is VmRSS from /proc/<pid>/status right after the first Metadata answer (an idle, empty broker).

`--baseline-src DIR` also starts `eoslog serve` from another source tree (e.g. `git archive <rev> src | tar -x
-C DIR`), alternating with this one run by run, and prints the ratio: the machine is shared, so only a
comparison within one run means much.

Both trees are byte-compiled first (as `pip install` does), so the figures do not depend on whether this
shell sets PYTHONDONTWRITEBYTECODE; without .pyc files Python compiles eoslog's ~100 modules on every start.

Usage: python bench/startup_bench.py [--runs 10] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import compileall
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

import eoslog
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import BrokerProcess


def first_metadata(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=10)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def embedded_once() -> tuple[float, float, float]:
    started = time.perf_counter()
    with EmbeddedBroker() as broker:
        listening = time.perf_counter() - started
        first_metadata(broker.bootstrap)
        answered = time.perf_counter() - started
    return listening, answered, float("nan")


def process_once(data_dir: Path, src: str | None) -> tuple[float, float, float]:
    saved = os.environ.get("PYTHONPATH")
    if src is not None:
        os.environ["PYTHONPATH"] = src
    try:
        started = time.perf_counter()
        with BrokerProcess(data_dir=data_dir) as broker:
            listening = time.perf_counter() - started
            first_metadata(broker.bootstrap)
            answered = time.perf_counter() - started
            rss = rss_mib(broker.process.pid)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return listening, answered, rss


def report(name: str, runs: list[tuple[float, float, float]]) -> tuple[float, float]:
    listening = statistics.median(r[0] for r in runs) * 1000
    answered = statistics.median(r[1] for r in runs) * 1000
    rss = statistics.median(r[2] for r in runs)
    memory = "" if math.isnan(rss) else f"   idle RSS {rss:6.1f} MiB"
    print(f"{name:32s} listening after {listening:7.1f} ms   first Metadata answered after {answered:7.1f} ms"
          f"{memory} (median of {len(runs)})")
    return listening, answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline-src", default=None, metavar="DIR",
                        help="a source tree (the directory holding eoslog/) to compare `eoslog serve` against")
    args = parser.parse_args()
    current_src = str(Path(eoslog.__file__).resolve().parent.parent)
    for src in filter(None, (current_src, args.baseline_src)):
        compileall.compile_dir(str(Path(src) / "eoslog"), quiet=1)
    embedded = [embedded_once() for _ in range(args.runs)]
    current, baseline = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            current.append(process_once(Path(tmp) / f"c{i}", current_src))
            if args.baseline_src:
                baseline.append(process_once(Path(tmp) / f"b{i}", args.baseline_src))
    report("embedded (in-process thread)", embedded)
    now = report("eoslog serve (subprocess)", current)
    if baseline:
        before = report("eoslog serve, baseline tree", baseline)
        print(f"{'ratio this / baseline':32s} listening {now[0] / before[0]:.2f}x   answered {now[1] / before[1]:.2f}x")


if __name__ == "__main__":
    main()
