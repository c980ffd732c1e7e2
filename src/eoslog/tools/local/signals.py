"""Pausing a child process with SIGSTOP, and returning only once it is stopped.

``kill(pid, SIGSTOP)`` returns as soon as the signal is queued. The kernel wakes one thread of the
process to take it, and that thread then stops the others; until it is scheduled, the rest go on running.
On a busy machine that gap let a "paused" ZooKeeper answer a four-letter word after ``pause()`` had
returned. So a pause waits until every thread reads as stopped in ``/proc``."""

from __future__ import annotations

import os
import signal
import time

# Stopped (job control), traced and stopped, or dead (a zombie answers nothing either).
_STOPPED = frozenset("TtZX")


def thread_states(pid: int) -> list[str]:
    """The state letter of each thread of ``pid`` (``/proc/PID/task/TID/stat``); [] once it is gone."""
    states = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as stat:
                text = stat.read().decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError):
            continue  # that thread exited meanwhile
        # "tid (comm) S ...": comm may hold spaces and parentheses, so split after the last ")".
        states.append(text[text.rindex(")") + 2])
    return states


def stop_process(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOP ``pid`` and wait until all of its threads are stopped (a zombie or a gone process counts:
    it answers nothing either). TimeoutError if some thread is still running after ``timeout`` seconds."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = thread_states(pid)
        if all(state in _STOPPED for state in states):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} not stopped {timeout} s after SIGSTOP (thread states {states})")
        time.sleep(0.001)
