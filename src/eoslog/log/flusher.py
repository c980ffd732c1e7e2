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
- With a ``directory`` whose filesystem has a trustworthy syncfs (log/syncfs.py), the logs in it share
  *one* round instead: at most one syncfs is in flight for the whole directory, it covers every log that
  asked before it started (each up to its log end offset at that moment), and logs asking meanwhile join
  the next round. Each waiter is still answered only after a round that covers its offsets succeeded. A
  failed syncfs cannot say whose data was lost, so its logs (and those waiting for the next round) are
  flushed again file by file, each answered by its own fsyncs, and the directory keeps per-file fsyncs
  from then on.

Why dedicated threads rather than a ThreadPoolExecutor: on a 2-core machine each hand-off costs more than the
bookkeeping suggests (a futex wake that lets the worker preempt the loop, the GIL going back and forth,
a concurrent Future chained to an asyncio one, a wake-up of the loop per fsync). The thread here takes
every round queued for it while it was busy, runs them back to back, and wakes the loop once for all of them;
while it is busy, a new round costs the loop one queue put and no wake-up.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING

from eoslog.log import syncfs as syncfs_call
from eoslog.log.eager_future import EagerFuture, batched
from eoslog.log.errors import LogError
from eoslog.log.flush_task import FlushTask

if TYPE_CHECKING:
    from eoslog.log.log import Log

logger = logging.getLogger("eoslog.log")

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


@batched  # the answers a round settles are written when it is delivered (eager_future.py)
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
    fsyncs: int = 0  # fsync rounds started (per-file fsyncs, or syncfs rounds that covered this log)
    waiters: int = 0  # flush() calls that had to wait
    on_directory_filesystem: bool = False  # the syncfs of the directory covers this log's files
    every_file: bool = False  # its next per-file round syncs every file (a syncfs failed meanwhile)


class _SyncfsRound:
    """One syncfs of the directory's filesystem, run by an FsyncThread (it has FlushTask's ``run``)."""

    def __init__(self, fd: int, tasks: dict[Log, tuple[FlushTask, asyncio.Future]]) -> None:
        self.fd = fd
        self.tasks = tasks  # every log this round covers: its prepared task and its waiters' future
        self.seconds = 0.0

    def run(self) -> None:
        started = time.perf_counter()
        try:
            syncfs_call.syncfs(self.fd)
        finally:
            self.seconds = time.perf_counter() - started


class GroupCommit:
    def __init__(self, *, threads: int = FSYNC_THREADS, directory: str | None = None, syncfs: bool = True) -> None:
        # Each log keeps one thread (round-robin as logs first flush): its rounds stay in order and batch
        # on that thread, while fsyncs of different logs can still overlap, which lets the filesystem
        # share journal commits between them.
        self._threads = [FsyncThread(f"eoslog-fsync-{i}") for i in range(max(1, threads))]
        self._next_thread = 0
        self._states: weakref.WeakKeyDictionary[Log, _LogState] = weakref.WeakKeyDictionary()
        # The directory's syncfs rounds (see the module docstring). The descriptor is opened here, before
        # any log of the directory is written, and kept: syncfs reports writeback errors since it opened.
        self._syncfs_fd: int | None = None
        self._syncfs_device = -1
        self._syncfs_thread = FsyncThread("eoslog-syncfs")
        self._round: _SyncfsRound | None = None  # in flight
        self._next_round: dict[Log, asyncio.Future] = {}  # logs that asked while it ran
        self._round_scheduled = False  # a round starts at the end of this pass of the loop
        self.syncfs_rounds = 0  # syncfs calls made (for benchmarks and tests)
        # Called on the loop after every round (syncfs or one log's fsyncs) that moved a recovery point:
        # the log directory writes its recovery-point checkpoint from it (manager.py, "after a sync").
        self.on_synced: Callable[[], None] | None = None
        if directory is not None and syncfs and syncfs_call.available() and syncfs_call.covers(directory):
            self._syncfs_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            self._syncfs_device = os.fstat(self._syncfs_fd).st_dev

    @property
    def uses_syncfs(self) -> bool:
        return self._syncfs_fd is not None

    async def flush(self, log: Log) -> None:
        """Returns once everything appended to ``log`` before this call is fsync'ed."""
        waiter = self.request(log)
        if waiter is not None:
            await asyncio.shield(waiter)

    def request(self, log: Log) -> EagerFuture | None:
        """``flush`` without a coroutine, for callers that chain a callback instead of awaiting (a
        partition's acks=all path: one task less per partition per round). Returns None when everything
        appended is already durable, else a future, shared with other waiters (never cancel it), that is
        done once an fsync or round covering the log end offset at this call has succeeded (its exception
        otherwise). Its ``on_settled`` callbacks run as the round completes (eager_future.py)."""
        target = log.log_end_offset
        if log.recovery_point >= target:
            return None
        state = self._states.get(log)
        if state is None:
            state = self._states[log] = _LogState(self._threads[self._next_thread % len(self._threads)])
            self._next_thread += 1
            if self._syncfs_fd is not None:
                try:
                    state.on_directory_filesystem = os.stat(log.directory).st_dev == self._syncfs_device
                except OSError:
                    state.on_directory_filesystem = False  # the per-file path reports what is wrong
        state.waiters += 1
        if state.on_directory_filesystem and self._syncfs_fd is not None:
            return self._join_round(log, target)
        if state.in_flight is None:
            waiter = EagerFuture()
            self._start(log, state, waiter)
        elif state.in_flight.up_to >= target:
            waiter = state.in_flight_done  # appended before the running fsync began: it covers us
        else:
            if state.next_done is None:
                state.next_done = EagerFuture()
            waiter = state.next_done
        return waiter

    # ---- one syncfs round for the directory -------------------------------------------------------------

    def _join_round(self, log: Log, target: int) -> asyncio.Future:
        current = self._round
        if current is not None:
            joined = current.tasks.get(log)
            if joined is not None and joined[0].up_to >= target:
                return joined[1]  # appended before the running round was prepared: it covers us
        waiter = self._next_round.get(log)
        if waiter is None:
            waiter = self._next_round[log] = EagerFuture()
        if current is None and not self._round_scheduled:
            # Not started here: this pass of the loop may append to more logs (the other partitions of a
            # Produce request, which the Java client and kafka-python fill with every partition bound
            # for this broker, or the other requests of the same read), and a round started at the
            # first would cover that log alone, the rest waiting for a second syncfs. Started once the
            # pass is over, it covers every log that asked in it (bench/multi_partition_sync.py).
            self._round_scheduled = True
            waiter.get_loop().call_soon(self._start_scheduled_round)
        return waiter

    def _start_scheduled_round(self) -> None:
        self._round_scheduled = False
        if self._round is not None:
            return  # one is in flight: when it ends it starts the next, with these logs in it
        if self._syncfs_fd is None:  # closed meanwhile: the per-file path answers them
            asked, self._next_round = self._next_round, {}
            for log, waiter in asked.items():
                self._refile(log, waiter, every_file=False)
            return
        self._start_round()

    def _start_round(self) -> None:
        """Prepares every log that asked (on the loop) and hands one syncfs to the thread."""
        asked, self._next_round = self._next_round, {}
        tasks: dict[Log, tuple[FlushTask, asyncio.Future]] = {}
        for log, waiter in asked.items():
            try:
                tasks[log] = (log.prepare_flush(descriptors=False), waiter)
            except LogError as exc:  # closed or offline meanwhile: nothing will ever flush it
                waiter.set_exception(exc)
        if not tasks:
            return
        self._round = current = _SyncfsRound(self._syncfs_fd, tasks)
        self.syncfs_rounds += 1
        loop = next(iter(tasks.values()))[1].get_loop()
        self._syncfs_thread.submit(loop, current, lambda exc: self._round_finished(current, exc))

    def _round_finished(self, current: _SyncfsRound, exc: BaseException | None) -> None:
        self._round = None
        if exc is None:
            for log, (task, _) in current.tasks.items():
                task.synced, task.seconds = True, current.seconds
                state = self._states.get(log)
                if state is not None:
                    state.fsyncs += 1
                log.complete_flush(task)
            if self.on_synced is not None:
                self.on_synced()
            if self._next_round:
                self._start_round()
            # Settled last: a waiter's on_settled callback (a partition's) may ask for the next flush at
            # once, which must find this round done and the next one, if any, already in flight.
            for _, waiter in current.tasks.values():
                if not waiter.done():
                    waiter.set_result(None)
            return
        # Whose data the error belongs to, syncfs cannot say (log/syncfs.py): from now on this directory
        # uses per-file fsyncs, and every log this round marked synced fsyncs all its files again.
        logger.error("syncfs of %s failed (%s); using per-file fsyncs from now on to find the logs affected",
                     self._directory_name(), exc)
        self._stop_syncfs()
        for log, (_, waiter) in current.tasks.items():
            self._refile(log, waiter, every_file=True)
        asked, self._next_round = self._next_round, {}
        for log, waiter in asked.items():
            self._refile(log, waiter, every_file=log in current.tasks)

    def _refile(self, log: Log, waiter: asyncio.Future, *, every_file: bool) -> None:
        """Moves a syncfs waiter to the per-file path."""
        state = self._states.get(log)
        if state is None:  # the log was forgotten (deleted) meanwhile
            waiter.set_exception(LogError(f"{log.directory} is closed"))
            return
        state.every_file = state.every_file or every_file
        if state.in_flight is None:
            self._start(log, state, waiter)
        else:  # cannot happen while syncfs served this log, but joining the next round is always safe
            following = state.next_done
            if following is None:
                state.next_done = waiter
            else:
                following.add_done_callback(lambda f: _copy_outcome(f, waiter))

    def _directory_name(self) -> str:
        try:
            return os.readlink(f"/proc/self/fd/{self._syncfs_fd}")
        except OSError:
            return "the data directory"

    def _stop_syncfs(self) -> None:
        fd, self._syncfs_fd = self._syncfs_fd, None
        if fd is not None:
            os.close(fd)

    # ---- per-file fsyncs of one log ----------------------------------------------------------------------

    def _start(self, log: Log, state: _LogState, waiter: asyncio.Future) -> None:
        try:
            task = log.prepare_flush(every_file=state.every_file)
            state.every_file = False
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
            if task.synced and self.on_synced is not None:
                self.on_synced()
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
        self._syncfs_thread.close()
        self._stop_syncfs()


def _copy_outcome(source: asyncio.Future, target: asyncio.Future) -> None:
    if target.done():
        return
    if source.exception() is not None:
        target.set_exception(source.exception())
    else:
        target.set_result(None)
