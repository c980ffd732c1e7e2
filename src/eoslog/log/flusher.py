"""GroupCommit: one fsync for every acks=all producer waiting on a log (asyncio).

Contract:
- Lives on one event loop; ``flush`` is awaited from that loop only. The fsync system calls run in the
  worker threads of ``executor``; everything touching the Log (``prepare_flush`` / ``complete_flush``)
  runs on the loop, so the Log stays single-threaded.
- Per log at most one fsync is in flight. A caller whose appends were written before the in-flight fsync
  started is covered by it and waits for it; a caller arriving later joins the *next* fsync, which starts
  as soon as the current one ends and covers everyone who joined meanwhile (one fsync for all of them).
- When ``flush`` returns, every offset below the log end offset seen at the call is durable and below
  ``log.recovery_point``. A failed fsync raises LogStorageError to every waiter and takes the log offline.
"""

from __future__ import annotations

import asyncio
import weakref
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass

from eoslog.log.errors import LogError
from eoslog.log.flush_task import FlushTask
from eoslog.log.log import Log

# fsyncs of different files that run at the same time share one journal commit (ext4, xfs), so with many
# partitions more threads sync more files per second: 1,000 files on this project's VM, 200 dirty per
# round, 2,500 fsyncs/s with 4 threads and 4,800 with 16 (docs/benchmarks.md, "Many partitions"). A
# thread blocked in fsync costs no CPU, and ThreadPoolExecutor starts them only when needed, so few
# partitions never start more than they use.
FSYNC_THREADS = 16


@dataclass
class _LogState:
    in_flight: FlushTask | None = None
    in_flight_done: asyncio.Future | None = None
    next_done: asyncio.Future | None = None  # joined by callers that arrived during the in-flight fsync
    fsyncs: int = 0  # fsync rounds started
    waiters: int = 0  # flush() calls that had to wait


class GroupCommit:
    def __init__(self, executor: Executor | None = None, *, max_workers: int = FSYNC_THREADS) -> None:
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="eoslog-fsync"
        )
        self._states: weakref.WeakKeyDictionary[Log, _LogState] = weakref.WeakKeyDictionary()

    async def flush(self, log: Log) -> None:
        """Returns once everything appended to ``log`` before this call is fsync'ed."""
        target = log.log_end_offset
        if log.recovery_point >= target:
            return
        state = self._states.setdefault(log, _LogState())
        state.waiters += 1
        if state.in_flight is None:
            waiter = asyncio.get_running_loop().create_future()
            self._start(log, state, waiter)
        elif state.in_flight.up_to >= target:
            waiter = state.in_flight_done  # appended before the running fsync began: it covers us
        else:
            if state.next_done is None:
                state.next_done = asyncio.get_running_loop().create_future()
            waiter = state.next_done
        await asyncio.shield(waiter)

    def _start(self, log: Log, state: _LogState, waiter: asyncio.Future) -> None:
        try:
            task = log.prepare_flush()
        except LogError as exc:  # the log is closed or offline: nothing will ever flush it
            waiter.set_exception(exc)
            return
        state.in_flight, state.in_flight_done = task, waiter
        state.fsyncs += 1
        loop = asyncio.get_running_loop()
        run = loop.run_in_executor(self._executor, task.run)
        run.add_done_callback(lambda fut: self._finished(log, state, task, waiter, fut))

    def _finished(
        self, log: Log, state: _LogState, task: FlushTask, waiter: asyncio.Future, fut: asyncio.Future
    ) -> None:
        exc = asyncio.CancelledError() if fut.cancelled() else fut.exception()
        if exc is None:
            log.complete_flush(task)
            waiter.set_result(None)
        else:
            waiter.set_exception(log.fail_flush(task, exc))
        state.in_flight = state.in_flight_done = None
        following, state.next_done = state.next_done, None
        if following is not None:
            self._start(log, state, following)

    def fsync_count(self, log: Log) -> int:
        """How many fsync rounds ran for ``log`` (for benchmarks and tests)."""
        state = self._states.get(log)
        return state.fsyncs if state else 0

    def forget(self, log: Log) -> None:
        """Drops the bookkeeping of a closed log."""
        self._states.pop(log, None)

    def close(self) -> None:
        if self._own_executor:
            self._executor.shutdown(wait=True)
