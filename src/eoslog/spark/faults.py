"""Fault-injection points for the crash tests (tests/spark/test_crash.py). Inert unless the environment
variable ``EOSLOG_SPARK_FAULT`` is set, which only those tests do.

``EOSLOG_SPARK_FAULT=point:batch_id:directory``: when the sink reaches ``point`` (``task-write``,
``commit-before``, ``commit-after``) in micro-batch ``batch_id``, it creates ``directory/reached`` and
waits until ``directory/resume`` exists. The test meanwhile SIGKILLs the driver's process group (the
driver never resumes) or restarts the broker and then lets it resume. Waiting on a file, not sleeping,
keeps the interleaving exact.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "EOSLOG_SPARK_FAULT"


def active() -> bool:
    return bool(os.environ.get(ENV))


def reached(point: str, batch_id: int) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    want_point, want_batch, directory = spec.split(":", 2)
    if want_point != point or int(want_batch) != batch_id:
        return
    base = Path(directory)
    try:
        fd = os.open(base / "reached", os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # first task to get here only
    except FileExistsError:
        return
    os.write(fd, f"{point} {batch_id} pid {os.getpid()}\n".encode())
    os.close(fd)
    deadline = time.monotonic() + 300
    while not (base / "resume").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
