"""The group commit's hand-off alone: what one acks=all flush costs the event loop when the fsync is free.

FlushTask.run is replaced by one that only closes its descriptors, so the figures are the append, the
round trip to the fsync thread and back, and the bookkeeping on the loop: wall time per flush, CPU of the
loop thread per flush, and CPU of the whole process per flush (loop and fsync thread). Sequential
flushes on 1 log and on 8 logs at once, on uvloop when installed.

    PYTHONPATH=src .venv/bin/python bench/group_commit_handoff.py [--flushes 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "log"))
from log_batches import make_batch

from eoslog.log import Log, LogConfig, flush_task
from eoslog.log.flusher import GroupCommit


def _close_only(task: flush_task.FlushTask) -> None:
    for fd in task.fds:
        os.close(fd)
    task.fds = []


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def measure(root: str, logs: int, flushes: int) -> tuple[float, float, float]:
    """(wall µs, loop-thread CPU µs, process CPU µs) per flush."""
    opened = [Log.open(os.path.join(root, f"handoff-{logs}-{i}"), LogConfig()) for i in range(logs)]
    commit = GroupCommit()
    batch = make_batch([b"x" * 100])
    per_log = max(1, flushes // logs)

    async def writer(log: Log) -> None:
        for _ in range(per_log):
            log.append(batch)
            await commit.flush(log)

    async def main() -> None:
        await asyncio.gather(*(writer(log) for log in opened))

    loop = _new_loop()
    wall, cpu, process = time.perf_counter(), time.thread_time(), time.process_time()
    loop.run_until_complete(main())
    wall, cpu, process = (time.perf_counter() - wall, time.thread_time() - cpu, time.process_time() - process)
    loop.close()
    commit.close()
    for log in opened:
        log.close()
    total = per_log * logs
    return 1e6 * wall / total, 1e6 * cpu / total, 1e6 * process / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flushes", type=int, default=4000)
    args = parser.parse_args()
    flush_task.FlushTask.run = _close_only
    root = tempfile.mkdtemp(prefix="eoslog-handoff-")
    try:
        print("| logs | wall µs/flush | loop CPU µs/flush | process CPU µs/flush |")
        print("|---:|---:|---:|---:|")
        for logs in (1, 8):
            wall, cpu, process = measure(root, logs, args.flushes)
            print(f"| {logs} | {wall:.0f} | {cpu:.0f} | {process:.0f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
