"""FlushTask: one round of fsyncs, prepared on the event loop and run in any thread.

``Log.prepare_flush`` builds it (dup'ed descriptors of every file written since the last round, and the
directory when segments were created or removed), ``run`` does the blocking system calls (in a worker
thread under asyncio), and ``Log.complete_flush`` applies the result on the loop. The task owns its
descriptors, so a segment deleted meanwhile cannot pull a file out from under the fsync.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from eoslog.log.telemetry import Histogram

# Kafka's LogFlushStats (kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs): every fsync round of
# every log, observed by Log.complete_flush on the event loop (never from the worker thread, so the
# histogram has a single writer).
LOG_FLUSH_TIME = Histogram()


@dataclass
class FlushTask:
    """One fsync round: built on the loop, run in any thread, completed on the loop."""

    up_to: int
    truncation_epoch: int
    fds: list[int]  # dup'ed; closed by run()
    directory: str | None  # fsync'ed when files were created, renamed or removed
    seconds: float = 0.0  # how long run() took, for LOG_FLUSH_TIME
    synced: bool = False  # whether run() had anything to fsync (an empty round is not an fsync)

    def run(self) -> None:
        started = time.perf_counter()
        self.synced = bool(self.fds) or self.directory is not None
        try:
            for fd in self.fds:
                os.fsync(fd)
            if self.directory is not None:
                fsync_directory(self.directory)
        finally:
            for fd in self.fds:
                os.close(fd)
            self.fds = []
            self.seconds = time.perf_counter() - started


def fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
