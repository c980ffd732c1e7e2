"""What a test pays for a 3-broker EmbeddedCluster: ZooKeeper start, brokers ready with a controller, stop.

    .venv/bin/python bench/cluster_start_bench.py [--rounds N] [--tree NAME=SRC_DIR ...]

Each ``--tree`` is a source tree (``src`` of a checkout); rounds alternate between the trees, each round a
fresh interpreter whose brokers run that tree too (PYTHONPATH), so the figures compare as ratios within
one run on a shared machine. Without ``--tree`` the tree this script belongs to is measured alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ONE_ROUND = r"""
import json, tempfile, time
from pathlib import Path
from eoslog.testing.cluster import EmbeddedCluster
with tempfile.TemporaryDirectory(prefix="cluster-start-bench-") as d:
    cluster = EmbeddedCluster(Path(d), 3)
    t0 = time.monotonic()
    cluster.start()
    t1 = time.monotonic()
    cluster.stop()
    t2 = time.monotonic()
print(json.dumps({"start": t1 - t0, "stop": t2 - t1}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=SRC_DIR")
    args = parser.parse_args()
    trees = [t.split("=", 1) for t in args.tree] or [["this", str(Path(__file__).resolve().parent.parent / "src")]]
    results: dict[str, list[dict]] = {name: [] for name, _ in trees}
    for round_ in range(args.rounds):
        for name, src in trees if round_ % 2 == 0 else reversed(trees):
            env = {**os.environ, "PYTHONPATH": src}
            out = subprocess.run([sys.executable, "-c", ONE_ROUND], env=env, capture_output=True, text=True,
                                 check=True).stdout
            results[name].append(json.loads(out.strip().splitlines()[-1]))
    print(f"{'tree':<12} {'start median':>13} {'start min':>10} {'stop median':>12} {'start+stop':>11}  (s, {args.rounds} rounds)")
    for name, rows in results.items():
        start = [r["start"] for r in rows]
        stop = [r["stop"] for r in rows]
        print(f"{name:<12} {statistics.median(start):>13.2f} {min(start):>10.2f} {statistics.median(stop):>12.2f} "
              f"{statistics.median(s + t for s, t in zip(start, stop)):>11.2f}")


if __name__ == "__main__":
    main()
