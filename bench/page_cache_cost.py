"""What one megabyte written into the page cache costs this machine's CPU, with fresh memory and with
memory freed a moment before.

    .venv/bin/python bench/page_cache_cost.py [--dir DIR] [--mb 1024] [--settle 20] [--repeat 3] [--drop-behind-mb N]

Why it matters: a broker that keeps its log in files copies every produced byte into the page cache
(one ``write``), and the kernel takes a free page for every 4 KiB of it. On a bare machine that copy runs
at several GB/s. Inside a virtual machine whose kernel hands freed memory back to the hypervisor (Linux's
free page reporting, ``page_reporting.page_reporting_order`` on the kernel command line, as on the
Firecracker VM of docs/benchmarks.md), a page the guest touches for the first time since it was handed
back faults into the host, and the copy slows several times over. A broker that keeps records in memory
it recycles (librdkafka's mock cluster keeps a few MB per partition) does not pay it; one that writes
files pays it on every new page, whatever its code.

Each round writes MB x 1 MiB into a fresh file in DIR (no sync: the copy is what is measured), then
deletes it, in two conditions taking turns:
- ``settled``: after SETTLE seconds idle, so memory freed earlier has been handed back (the state every
  benchmark run meets after the last one deleted its topics);
- ``warm``: at once after the last round's file was deleted, so the kernel reuses its pages.
It prints the process's CPU time per MB (user + system; the copy is system time) and the write rate.

``--drop-behind-mb N`` asks whether a writer can keep its memory warm itself: every MB is synced
(fdatasync, as with fsync on ack) and the page cache of what was written N MB before is dropped
(posix_fadvise DONTNEED), so the kernel hands those pages straight to the next writes instead of back to
the host. The settled rounds then run with and without it, taking turns, and the figure of interest is
the CPU time of the ``write`` calls alone (docs/benchmarks.md, "Two ways to take the sync or the fresh
pages off the produce path, tried and left out").
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

MiB = 1024 * 1024


def write_round(directory: str, mb: int) -> tuple[float, float]:
    """(CPU ms per MB, MB/s) of writing MB MiB into a new file, which is deleted afterwards."""
    chunk = os.urandom(MiB)
    path = os.path.join(directory, "page-cache-cost")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(mb):
            os.write(fd, chunk)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        os.close(fd)
        os.unlink(path)  # frees the pages: the next "warm" round takes them back
    return cpu * 1000 / mb, mb * MiB / wall / 1e6


def synced_round(directory: str, mb: int, drop_behind_mb: int | None) -> tuple[float, float]:
    """(CPU ms per MB of the write calls alone, MB/s with the syncs) of writing MB MiB, each synced;
    with ``drop_behind_mb`` the pages written that many MB before are dropped after each sync."""
    chunk = os.urandom(MiB)
    path = os.path.join(directory, "page-cache-cost")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_cpu, wall = 0.0, time.perf_counter()
        for i in range(mb):
            started = time.thread_time()
            os.write(fd, chunk)
            write_cpu += time.thread_time() - started
            os.fdatasync(fd)
            if drop_behind_mb is not None and i >= drop_behind_mb:
                os.posix_fadvise(fd, (i - drop_behind_mb) * MiB, MiB, os.POSIX_FADV_DONTNEED)
        wall = time.perf_counter() - wall
    finally:
        os.close(fd)
        os.unlink(path)
    return write_cpu * 1000 / mb, mb * MiB / wall / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=None, help="where the file goes (default: current directory)")
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--settle", type=float, default=20.0, help="idle seconds before a settled round")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--drop-behind-mb", type=int, default=None,
                        help="compare settled synced writes with and without dropping the pages N MB behind")
    args = parser.parse_args()
    if args.drop_behind_mb is not None:
        compare_drop_behind(args)
        return
    results: dict[str, list[tuple[float, float]]] = {"settled": [], "warm": []}
    with tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="page-cache-cost-") as directory:
        for _ in range(args.repeat):
            time.sleep(args.settle)
            results["settled"].append(write_round(directory, args.mb))
            results["warm"].append(write_round(directory, args.mb))
    for condition, rounds in results.items():
        cpu = statistics.median(r[0] for r in rounds)
        rate = statistics.median(r[1] for r in rounds)
        runs = ", ".join(f"{r[0]:.2f}" for r in rounds)
        print(f"{condition:8s} write {args.mb} x 1 MiB: {cpu:.2f} CPU ms per MB ({rate:.0f} MB/s), "
              f"medians of {len(rounds)} (CPU ms per MB: {runs})", flush=True)


def compare_drop_behind(args: argparse.Namespace) -> None:
    cases = {"keep every page": None, f"drop {args.drop_behind_mb} MB behind": args.drop_behind_mb}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    with tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="page-cache-cost-") as directory:
        for _ in range(args.repeat):
            for name, behind in cases.items():
                time.sleep(args.settle)
                results[name].append(synced_round(directory, args.mb, behind))
    for name, rounds in results.items():
        cpu = statistics.median(r[0] for r in rounds)
        rate = statistics.median(r[1] for r in rounds)
        print(f"settled, {args.mb} x 1 MiB each synced, {name}: write() {cpu:.2f} CPU ms per MB, "
              f"{rate:.0f} MB/s with the syncs, medians of {len(rounds)}", flush=True)


if __name__ == "__main__":
    main()
