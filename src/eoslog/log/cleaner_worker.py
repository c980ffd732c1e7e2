"""The CPU-heavy part of a cleaning pass in a child process, so the broker's interpreter never waits for it.

Run as ``python -m eoslog.log.cleaner_worker``; ``CleanerProcess`` (the parent side, on the event loop)
starts one per pass.

Contract:
- The child gets the pass's dup'ed segment descriptors by inheritance (``pass_fds``: same numbers, same
  open files, so a segment deleted or renamed meanwhile is still read as planned) and only reads them.
  It writes only the ``.cleaned`` files of the group it was asked for, fsync'ed, exactly as
  ``cleaner_pass.clean_group`` does in the thread; the swap stays on the parent's loop (cleaner_swap.py).
- Conversation over the child's stdin/stdout, one pickled tuple each way per step (parent and child are
  the same program, so pickle is safe here):
      ("prepare", plan)  ->  ("prepared", map_end, groups, stats, next_horizon_ms)
      ("clean", i)       ->  ("cleaned", CleanedGroup, stats, next_horizon_ms)
      either             ->  ("failed", "aborted" | "corrupt" | "error", message)
  then EOF on stdin ends the child.
- A child that dies (killed, crashed, out of memory) raises ``WorkerDied`` in the parent: the group being
  written is deleted and never swapped, the groups already swapped stay (each swap is whole), and the
  cleaner retries the log after its backoff. The child dies with the broker (PR_SET_PDEATHSIG), so an
  orphan never writes into a directory a restarted broker is recovering.
- The child runs at a lower CPU priority (``CHILD_NICENESS``): on a busy machine the loop's requests
  come first and the cleaner takes what is left, like any background job.
"""

from __future__ import annotations

import asyncio
import math
import os
import pickle
import subprocess
import sys
from typing import Any, BinaryIO

import eoslog
from eoslog.log import cleaner_pass
from eoslog.log.cleaner_pass import (
    CleanedGroup,
    CleanerStats,
    CleaningAborted,
    CleaningPlan,
    SegmentSource,
    remove_cleaned,
)
from eoslog.records import CorruptRecordError

CHILD_NICENESS = 10
WORKER_COMMAND = (sys.executable, "-m", "eoslog.log.cleaner_worker")
_PR_SET_PDEATHSIG = 1


class WorkerDied(Exception):
    """The cleaner's child process ended without answering; its unfinished output was deleted."""


class ProcessPass:
    """What ``LogCleaner.clean`` reads of a pass run in the child (the thread path's PassState fields)."""

    def __init__(self, map_end: int, groups: list[tuple[SegmentSource, ...]], stats: CleanerStats,
                 next_horizon_ms: int | None) -> None:
        self.map_end = map_end
        self.groups = groups
        self.stats = stats
        self.next_horizon_ms = next_horizon_ms


class CleanerProcess:
    """The parent side: one child for one pass. ``prepare`` then ``clean_group`` per group, then ``close``.

    Blocking pipe reads and writes run in ``executor`` (the cleaner's thread, which only waits there, so it
    holds no GIL while the child works); starting and killing the child happen on the caller's thread."""

    def __init__(self, plan: CleaningPlan, executor: Any, command: tuple[str, ...] = WORKER_COMMAND) -> None:
        self.plan = plan
        self._executor = executor
        # The child must import the same eoslog as this process, wherever it was found.
        env = dict(os.environ)
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(eoslog.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        self._child = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=[s.fd for s in plan.segments],
            env=env,
        )
        self._state: ProcessPass | None = None
        self._killed = False

    @property
    def pid(self) -> int:
        return self._child.pid

    async def prepare(self) -> ProcessPass:
        _, map_end, groups, stats, horizon = await self._ask(("prepare", self.plan), None)
        self._state = ProcessPass(map_end, groups, stats, horizon)
        return self._state

    async def clean_group(self, index: int) -> CleanedGroup:
        assert self._state is not None
        base = self._state.groups[index][0].base_offset
        _, cleaned, stats, horizon = await self._ask(("clean", index), base)
        self._state.stats, self._state.next_horizon_ms = stats, horizon
        return cleaned

    def kill(self) -> None:
        """Stops the child at once (the cleaner is stopping); the pass then ends with CleaningAborted."""
        self._killed = True
        if self._child.poll() is None:
            self._child.kill()

    def close(self) -> None:
        """Ends the child (killed if still working) and reaps it in the executor; never blocks the caller."""
        if self._child.poll() is None:
            self._child.kill()
        for pipe in (self._child.stdin, self._child.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self._executor.submit(self._child.wait)
        except RuntimeError:  # executor shut down
            self._child.wait()

    async def _ask(self, message: tuple, writing_base: int | None) -> tuple:
        loop = asyncio.get_running_loop()
        try:
            reply = await loop.run_in_executor(self._executor, _exchange, self._child.stdin, self._child.stdout,
                                               message)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            stopping = self._killed
            if self._child.poll() is None:
                self._child.kill()
            if writing_base is not None:
                # A group the child was writing when it died: never swapped, so its files just go.
                while self._child.poll() is None:  # killed: gone in moments; its open files are closed then
                    await asyncio.sleep(0.005)
                remove_cleaned(self.plan.directory, writing_base)
            if stopping:
                raise CleaningAborted("cleaner stopping") from exc
            raise WorkerDied(f"cleaner process {self._child.pid} ended ({exc!r}, exit {self._child.poll()})") from exc
        if reply[0] == "failed":
            kind, text = reply[1], reply[2]
            if kind == "aborted":
                raise CleaningAborted(text)
            if kind == "corrupt":
                raise CorruptRecordError(text)
            raise WorkerDied(f"cleaner process failed: {text}")
        return reply


def _exchange(stdin: BinaryIO, stdout: BinaryIO, message: tuple) -> tuple:
    pickle.dump(message, stdin, protocol=pickle.HIGHEST_PROTOCOL)
    stdin.flush()
    return pickle.load(stdout)


# ---- the child ----------------------------------------------------------------------------------------


def _die_with_parent() -> None:
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the per-batch parent check below still ends it
        pass


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before the death signal was armed
        return
    try:
        os.nice(CHILD_NICENESS)
    except OSError:
        pass
    # No other thread here: the pass need not hand the GIL over between batches.
    cleaner_pass.YIELD_EVERY_S = math.inf
    orphaned = lambda: os.getppid() != parent
    state = None
    while True:
        try:
            message = pickle.load(requests)
        except EOFError:
            return
        try:
            if message[0] == "prepare":
                state = cleaner_pass.prepare(message[1], orphaned)
                reply: tuple = ("prepared", state.map_end, state.groups, state.stats, state.next_horizon_ms)
            else:
                assert state is not None, "clean before prepare"
                cleaned = cleaner_pass.clean_group(state, state.groups[message[1]], orphaned)
                reply = ("cleaned", cleaned, state.stats, state.next_horizon_ms)
        except CleaningAborted as exc:
            reply = ("failed", "aborted", str(exc))
        except CorruptRecordError as exc:
            reply = ("failed", "corrupt", str(exc))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which logs it
            reply = ("failed", "error", f"{type(exc).__name__}: {exc}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


def main() -> None:
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the replies
    serve(requests, replies)


if __name__ == "__main__":
    main()
