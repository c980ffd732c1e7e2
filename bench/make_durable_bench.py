"""``make_durable`` on many small files, one at a time against concurrently: what a new leader of many
partitions waits for before it takes writes (the leader-epoch checkpoint of each partition).

Each round writes a new version of a small file in each of N partition-like directories with
``replace_file`` (write and rename, no fsync), then times ``make_durable`` over them, alternating one thread
and ``--threads`` threads. Prints the medians and their ratio; the machine is shared, so only the ratio
within one run means much. Use a directory on the filesystem that holds the broker's data.

Usage: python bench/make_durable_bench.py [--files 333] [--rounds 10] [--threads 16] [--dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from eoslog.log.checkpoint import make_durable, replace_file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=333)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--dir", type=Path, default=None, help="default: a new directory under $TMPDIR")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        paths = []
        for i in range(args.files):
            directory = Path(root) / f"orders-{i}"
            directory.mkdir()
            paths.append(str(directory / "leader-epoch-checkpoint"))
        times: dict[int, list[float]] = {1: [], args.threads: []}
        for round_ in range(args.rounds):
            for threads in ((1, args.threads) if round_ % 2 == 0 else (args.threads, 1)):
                for i, path in enumerate(paths):
                    replace_file(path, f"0\n1\n{round_} {i * 1000 + threads}\n".encode())
                started = time.perf_counter()
                make_durable(paths, threads=threads)
                times[threads].append(time.perf_counter() - started)
        serial, parallel = statistics.median(times[1]), statistics.median(times[args.threads])
        print(f"{args.files} files, {args.rounds} rounds each: 1 thread {serial * 1000:.0f} ms, "
              f"{args.threads} threads {parallel * 1000:.0f} ms (medians); {serial / parallel:.1f}x faster")


if __name__ == "__main__":
    main()
