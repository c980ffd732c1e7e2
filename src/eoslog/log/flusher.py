"""GroupCommit: one fsync for every acks=all producer waiting on a log (asyncio).

Contract:
- ``flush`` is awaited from an event loop. The fsync system calls run in long-lived threads
  (``FsyncThread``, one per log, shared by several logs); everything touching the Log (``prepare_flush`` / ``complete_flush``) runs on the loop,
  so the Log stays single-threaded.
- Per log at most one fsync is in flight. A caller whose appends were written before the in-flight fsync
  started is covered by it and waits for it; a caller arriving later joins the *next* fsync, which starts
  as soon as the current one ends and covers everyone who joined meanwhile (one fsync for all of them).
- When ``flush`` returns, every offset below the log end offset seen at the call is durable and below
  ``log.recovery_point``. A failed fsync raises LogStorageError to every waiter and takes the log offline.

Why dedicated threads rather than a ThreadPoolExecutor: on a 2-core machine each hand-off costs more than the
bookkeeping suggests (a futex wake that lets the worker preempt the loop, the GIL going back and forth,
a concurrent Future chained to an asyncio one, a wake-up of the loop per fsync). The thread here takes
every round queued for it while it was busy, runs them back to back, and wakes the loop once for all of them;
while it is busy, a new round costs the loop one queue put and no wake-up.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from queue import Empty, SimpleQueue

from eoslog.log.errors import LogError
from eoslog.log.flush_task import FlushTask
from eoslog.log.log import Log

_Done = Callable[[BaseException | None], None]


class FsyncThread:
    """Runs FlushTasks handed over from event loops, in one daemon thread started on first use.

    ``submit`` may be called from any loop's thread; ``done(None)`` or ``done(exc)`` is called later on
    that same loop. Tasks run in submission order. ``close`` runs what is queued, then stops the thread.
    """

    def __init__(self, name: str = "eoslog-fsync") -> None:
        self._name = name
        self._queue: SimpleQueue = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, loop: asyncio.AbstractEventLoop, task: FlushTask, done: _Done) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
        self._queue.put((loop, task, done))

    def close(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _run(self) -> None:
        get, get_nowait = self._queue.get, self._queue.get_nowait
        stopping = False
        while not stopping:
            batch = [get()]
            while True:  # everything queued while the last round ran: this round
                try:
                    batch.append(get_nowait())
                except Empty:
                    break
            results: dict[asyncio.AbstractEventLoop, list[tuple[_Done, BaseException | None]]] = {}
            for item in batch:
                if item is None:
                    stopping = True
                    continue
                loop, task, done = item
                try:
                    task.run()
                    outcome = None
                except BaseException as exc:  # noqa: BLE001 - handed to the waiter, which raises it
                    outcome = exc
                results.setdefault(loop, []).append((done, outcome))
            for loop, outcomes in results.items():
                try:
                    loop.call_soon_threadsafe(_deliver, outcomes)
                except RuntimeError:  # the loop was closed meanwhile: nobody is left to tell
                    pass


def _deliver(outcomes: list[tuple[_Done, BaseException | None]]) -> None:
    for done, outcome in outcomes:
        done(outcome)


# fsyncs of different files that run at the same time share one journal commit (ext4, xfs), so with many
# partitions more threads sync more files per second: 1,000 files on this project's VM, 200 dirty per
# round, 2,500 fsyncs/s with 4 threads and 4,800 with 16 (docs/benchmarks.md, "Many partitions"). A
# thread blocked in fsync costs no CPU, and an FsyncThread starts only when a log is first given to it,
# so a broker with few partitions never starts more threads than it has logs.
FSYNC_THREADS = 16


@dataclass
class _LogState:
    thread: FsyncThread
    in_flight: FlushTask | None = None
    in_flight_done: asyncio.Future | None = None
    next_done: asyncio.Future | None = None  # joined by callers that arrived during the in-flight fsync
    fsyncs: int = 0  # fsync rounds started
    waiters: int = 0  # flush() calls that had to wait


class GroupCommit:
    def __init__(self, *, threads: int = FSYNC_THREADS) -> None:
        # Each log keeps one thread (round-robin as logs first flush): its rounds stay in order and batch
        # on that thread, while fsyncs of different logs can still overlap, which lets the filesystem
        # share journal commits between them.
        self._threads = [FsyncThread(f"eoslog-fsync-{i}") for i in range(max(1, threads))]
        self._next_thread = 0
        self._states: weakref.WeakKeyDictionary[Log, _LogState] = weakref.WeakKeyDictionary()

    async def flush(self, log: Log) -> None:
        """Returns once everything appended to ``log`` before this call is fsync'ed."""
        target = log.log_end_offset
        if log.recovery_point >= target:
            return
        state = self._states.get(log)
        if state is None:
            state = self._states[log] = _LogState(self._threads[self._next_thread % len(self._threads)])
            self._next_thread += 1
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
        state.thread.submit(waiter.get_loop(), task,
                            lambda exc: self._finished(log, state, task, waiter, exc))

    def _finished(
        self, log: Log, state: _LogState, task: FlushTask, waiter: asyncio.Future, exc: BaseException | None
    ) -> None:
        if exc is None:
            log.complete_flush(task)
            if not waiter.done():
                waiter.set_result(None)
        else:
            failure = log.fail_flush(task, exc)
            if not waiter.done():
                waiter.set_exception(failure)
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
        for thread in self._threads:
            thread.close()
