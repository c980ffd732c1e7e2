"""Whether a log could sync faster by writing into blocks that already exist: what a 1 MiB write and its
sync cost when the write appends, when it lands on blocks written (zeros) long before, and when those
blocks are zero-filled by a thread running just ahead of the writes.

    .venv/bin/python bench/sync_into_written_blocks.py [--dir DIR] [--writes 300] [--pause-ms 2.5] [--repeat 2]

Why: with fsync on ack, an idempotent producer on one partition waits for every 1 MB request's sync
(librdkafka keeps one request in flight per partition), so the sync is ~half of each round trip
(docs/benchmarks.md, "Target 1 measured again on 2026-11-27"). On ext4 an append changes the file's size
and allocates blocks, and the sync that follows commits that to the journal; a write over blocks that
are already allocated and written changes no metadata, and the sync only writes the data. Databases
zero-fill their write-ahead log files for this reason. The question for a broker is whether the zeros
can be written at no cost to the produce path.

Cases, each WRITES x 1 MiB into a fresh file in DIR with a sync after every write:
- ``append``: plain appends, fdatasync (what eoslog does, with syncfs in its place; both cost the same);
- ``fallocated``: over blocks reserved with fallocate (unwritten extents), fdatasync;
- ``prewritten``: over zeros written and synced before the timing starts, fdatasync: the saving's upper
  bound;
- ``filler``: over zeros that a second thread writes (O_DIRECT, FILL_MB at a time, then fdatasync) while
  staying at most AHEAD_MB ahead of the writes: what a broker would have to do, since it cannot zero a
  whole segment (1 GiB by default) at creation;
- the same with PAUSE_MS between writes (``paced``), as a producer's turnaround leaves the disk idle
  between requests.
Reported per case: p50, p90 and mean milliseconds per write + sync. The mean is what a producer with one
request in flight feels.
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

MiB = 1024 * 1024


class ZeroFiller(threading.Thread):
    """Writes zeros (O_DIRECT, from one page-aligned buffer) ``fill_mb`` at a time, each followed by an
    fdatasync, keeping ``ahead_mb`` before the position the writer has reached."""

    def __init__(self, path: str, fill_mb: int, ahead_mb: int) -> None:
        super().__init__(daemon=True)
        self.fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        self.zeros = mmap.mmap(-1, fill_mb * MiB)  # anonymous memory: zeroed and page-aligned
        self.fill, self.ahead = fill_mb * MiB, ahead_mb * MiB
        self.zeroed, self.written = 0, 0
        self.changed = threading.Condition()
        self.stopping = False

    def run(self) -> None:
        while True:
            with self.changed:
                self.changed.wait_for(lambda: self.stopping or self.zeroed < self.written + self.ahead)
                if self.stopping:
                    return
            os.pwrite(self.fd, self.zeros, self.zeroed)
            os.fdatasync(self.fd)
            with self.changed:
                self.zeroed += self.fill
                self.changed.notify_all()

    def wrote(self, end: int) -> None:
        """The writer reached ``end``: the filler may go on up to ``ahead_mb`` past it."""
        with self.changed:
            self.written = end
            self.changed.notify_all()

    def wait_for(self, end: int) -> None:
        """Returns once zeros cover everything before ``end`` (the writer must never write where zeros
        may still land)."""
        with self.changed:
            self.changed.wait_for(lambda: self.zeroed >= end)

    def stop(self) -> None:
        with self.changed:
            self.stopping = True
            self.changed.notify_all()
        self.join()
        os.close(self.fd)


def run_case(directory: str, case: str, writes: int, pause: float, fill_mb: int, ahead_mb: int) -> list[float]:
    chunk = os.urandom(MiB)
    path = os.path.join(directory, f"sync-{case}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    filler = None
    try:
        if case == "fallocated":
            os.posix_fallocate(fd, 0, writes * MiB)
            os.fsync(fd)
        elif case == "prewritten":
            zeros = bytes(MiB)
            for i in range(writes):
                os.pwrite(fd, zeros, i * MiB)
            os.fsync(fd)
        elif case == "filler":
            filler = ZeroFiller(path, fill_mb, ahead_mb)
            filler.start()
        times = []
        for i in range(writes):
            started = time.perf_counter()
            if filler is not None:
                filler.wait_for((i + 1) * MiB)  # never write where zeros may still land
            os.pwrite(fd, chunk, i * MiB)
            os.fdatasync(fd)
            times.append(time.perf_counter() - started)
            if filler is not None:
                filler.wrote((i + 1) * MiB)
            if pause:
                time.sleep(pause)
        return times
    finally:
        if filler is not None:
            filler.stop()
        os.close(fd)
        os.unlink(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=None, help="where the files go (default: current directory)")
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--pause-ms", type=float, default=2.5, help="idle time between writes in the paced runs")
    parser.add_argument("--fill-mb", type=int, default=16)
    parser.add_argument("--ahead-mb", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    cases = ["append", "fallocated", "prewritten", "filler"]
    with tempfile.TemporaryDirectory(dir=args.dir or ".", prefix="sync-into-written-") as directory:
        for pause in (0.0, args.pause_ms / 1000):
            for _ in range(args.repeat):
                for case in cases:  # taking turns, so the disk's mood falls on every case alike
                    times = sorted(run_case(directory, case, args.writes, pause, args.fill_mb, args.ahead_mb))
                    label = f"{case} ({'paced' if pause else 'back to back'})"
                    print(f"{label:28s} p50 {1000 * times[len(times) // 2]:.2f} ms  "
                          f"p90 {1000 * times[int(0.9 * len(times))]:.2f} ms  "
                          f"mean {1000 * statistics.fmean(times):.2f} ms  max {1000 * times[-1]:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
