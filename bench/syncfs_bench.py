"""One syncfs(2) vs one fsync per file, for a round of many dirty files (issue 16, target 3).

    .venv/bin/python bench/syncfs_bench.py [--dir /tmp] [--files 1000] [--dirty 200] [--threads 16]
        [--seconds 3] [--repeat 3] [--writer-mb-s 0]

Each round appends 1,100 bytes to DIRTY of FILES files (random ones) and then makes them durable either
with one fsync per file spread over THREADS threads (what eoslog.log.flush.syncfs=false does) or with one
syncfs of the directory's filesystem (log/syncfs.py). Prints rounds/s and ms per round, alternating the
two. --writer-mb-s starts a second process that writes that many MB/s into the same directory without
ever syncing (a tenant whose dirty pages syncfs must write too, and fsync need not).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from eoslog.log import syncfs as syncfs_module


def _writer(directory: str, mb_per_s: float, stop) -> None:
    path = os.path.join(directory, "tenant.dat")
    chunk = os.urandom(1 << 20)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    started, written = time.perf_counter(), 0
    try:
        while not stop.is_set():
            os.write(fd, chunk)
            written += 1
            if written % 512 == 0:  # rewrite the first 512 MiB over and over
                os.lseek(fd, 0, os.SEEK_SET)
            ahead = written / mb_per_s - (time.perf_counter() - started)
            if ahead > 0:
                time.sleep(ahead)
    finally:
        os.close(fd)
        os.unlink(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--dirty", type=int, default=200)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--writer-mb-s", type=float, default=0.0)
    args = parser.parse_args()
    if not syncfs_module.available():
        sys.exit("syncfs is not available (or does not report errors) on this kernel")
    directory = tempfile.mkdtemp(prefix="syncfs-bench-", dir=args.dir)
    stop = mp.Event()
    writer = None
    if args.writer_mb_s > 0:
        writer = mp.Process(target=_writer, args=(directory, args.writer_mb_s, stop))
        writer.start()
    fds = [os.open(os.path.join(directory, f"f{i}"), os.O_CREAT | os.O_RDWR | os.O_APPEND) for i in range(args.files)]
    directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    os.sync()
    pool = ThreadPoolExecutor(args.threads)
    payload = b"x" * 1100
    rng = random.Random(1)

    def dirty() -> list[int]:
        chosen = rng.sample(fds, args.dirty)
        for fd in chosen:
            os.write(fd, payload)
        return chosen

    def per_file() -> None:
        list(pool.map(os.fsync, dirty()))

    def one_syncfs() -> None:
        dirty()
        syncfs_module.syncfs(directory_fd)

    print(f"{args.files} files, {args.dirty} dirty per round, {args.threads} fsync threads, "
          f"tenant writer {args.writer_mb_s:g} MB/s, in {directory}")
    try:
        for _ in range(args.repeat):
            for name, round_ in ((f"fsync x{args.dirty}", per_file), ("syncfs", one_syncfs)):
                started, rounds = time.perf_counter(), 0
                while time.perf_counter() - started < args.seconds:
                    round_()
                    rounds += 1
                elapsed = time.perf_counter() - started
                print(f"  {name:14} {rounds / elapsed:8.1f} rounds/s {1000 * elapsed / rounds:8.2f} ms/round", flush=True)
    finally:
        stop.set()
        if writer is not None:
            writer.join()
        for fd in fds:
            os.close(fd)
        os.close(directory_fd)
        pool.shutdown()
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
