"""The disk's ceiling for fsync-before-ack at one partition: sequential writes with a sync every N MB.

    .venv/bin/python bench/sync_write_ceiling.py [--dir DIR] [--total-mb 2000] [--sync-every-mb 1,5]

An acks=all producer with fsync on ack (eoslog's single-node default) is acknowledged only after its bytes
are on disk, so one partition can never be produced faster than this machine writes and syncs one file,
however fast the broker is. This measures that rate with nothing but os.write (1 MiB each, like the
bench's 1 MB batches) and fdatasync or syncfs every N MB (an idempotent producer has at most 5 requests of
up to 1 MB in flight, so a sync round covers 1 to 5 MB), into a fresh file in DIR (default: a temporary
directory on the filesystem of the current directory). Compare it with `eoslog bench --partitions 1
--sizes 1024` (fsync on ack) and the mock's figure: a target above this ceiling cannot be met on this
disk by any broker that syncs before it acknowledges.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from eoslog.log import syncfs

MiB = 1024 * 1024


def run(directory: str, total_mb: int, every_mb: int, how: str) -> float:
    chunk = os.urandom(MiB)
    path = os.path.join(directory, f"ceiling-{how}-{every_mb}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        started = time.perf_counter()
        for i in range(1, total_mb + 1):
            os.write(fd, chunk)
            if i % every_mb == 0:
                if how == "syncfs":
                    syncfs.syncfs(dir_fd)
                else:
                    os.fdatasync(fd)
        os.fdatasync(fd)
        return total_mb * MiB / (time.perf_counter() - started) / 1e6
    finally:
        os.close(fd)
        os.close(dir_fd)
        os.unlink(path)  # each run starts with the page cache's dirty limits clear of the last one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--total-mb", type=int, default=2000)
    parser.add_argument("--sync-every-mb", default="1,5")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="sync-ceiling-") as directory:
        ways = ["fdatasync"] + (["syncfs"] if syncfs.available() else [])
        for every in (int(x) for x in args.sync_every_mb.split(",")):
            for how in ways:
                rates = sorted(run(directory, args.total_mb, every, how) for _ in range(args.repeat))
                runs = ", ".join(f"{r:.0f}" for r in rates)
                print(f"write 1 MiB x {args.total_mb}, {how} every {every} MiB: "
                      f"median {rates[len(rates) // 2]:.0f} MB/s (runs: {runs})", flush=True)


if __name__ == "__main__":
    main()
