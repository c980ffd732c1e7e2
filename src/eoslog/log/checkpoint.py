"""Offset checkpoint files of a data directory (Kafka's OffsetCheckpointFile).

``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` each map topic-partitions to an
offset. Text format (docs/storage-format.md, "Checkpoint files")::

    0                 <- version
    2                 <- number of entries
    orders 0 1200     <- topic partition offset
    orders 1 987

Writes are atomic: a temp file is written and fsync'ed, renamed over the old file, and the directory is
fsync'ed, so a crash leaves either the old or the new file, never a mix. Contract: an instance owns its
path; ``write`` blocks on fsync (run it in a worker thread from asyncio); format/parse are pure.
``write_atomically`` is that write for every small file the broker replaces whole (topics.json,
meta.properties, ACLs, SCRAM credentials, the producer-id block), so those layers need not climb to
each other for it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from eoslog.log.errors import CorruptCheckpointError

logger = logging.getLogger("eoslog.log")

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
TEMP_SUFFIX = ".tmp"

TopicPartition = tuple[str, int]


def format_checkpoint(offsets: Mapping[TopicPartition, int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        if not topic or any(c.isspace() for c in topic):
            raise ValueError(f"topic name {topic!r} cannot be written to a checkpoint file")
        lines.append(f"{topic} {partition} {offset}")
    return ("\n".join(lines) + "\n").encode()


def parse_checkpoint(data: bytes, name: str = "checkpoint") -> dict[TopicPartition, int]:
    """Parses a checkpoint; raises CorruptCheckpointError naming the file and line on any deviation."""
    try:
        lines = data.decode().split("\n")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(f"{name}: not text: {exc}") from None
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{name}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError(f"{name}: unsupported version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpointError(f"{name}: line 2: bad entry count {lines[1]!r}") from None
    if count != len(lines) - 2:
        raise CorruptCheckpointError(f"{name}: says {count} entries but holds {len(lines) - 2}")
    offsets: dict[TopicPartition, int] = {}
    for number, line in enumerate(lines[2:], start=3):
        parts = line.split()
        try:
            topic, partition, offset = parts[0], int(parts[1]), int(parts[2])
            if len(parts) != 3 or partition < 0 or offset < 0:
                raise ValueError
        except (ValueError, IndexError):
            raise CorruptCheckpointError(f"{name}: line {number}: malformed entry {line!r}") from None
        offsets[(topic, partition)] = offset
    return offsets


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """``<path>.tmp`` written and fsync'ed, renamed over ``path``, the directory fsync'ed: after a crash
    the file is the old one or the new one (plus perhaps a stray ``.tmp`` the reader removes)."""
    path = os.fspath(path)
    temp = path + TEMP_SUFFIX
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def replace_file(path: str | os.PathLike, data: bytes) -> None:
    """``write_atomically`` without its fsyncs: ``<path>.tmp`` written and renamed over ``path``.
    Not durable until ``make_durable`` covers it; a crash before may leave the old file or a damaged one,
    so only for files whose readers treat damage as "nothing known" and whose callers wait for
    ``make_durable`` before relying on the new content."""
    path = os.fspath(path)
    temp = path + TEMP_SUFFIX
    with open(temp, "wb") as file:
        file.write(data)
    os.replace(temp, path)


# Concurrent fsyncs of many small files: ext4 commits them in a few shared journal transactions instead
# of one each (a new leader of 333 partitions spent about a second fsyncing them one after another).
DURABLE_THREADS = 8


def _fsync_with_directory(path: str | os.PathLike) -> None:
    for target, flags in ((path, os.O_RDONLY), (os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_DIRECTORY)):
        fd = os.open(target, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def make_durable(paths: list[str | os.PathLike], threads: int = DURABLE_THREADS) -> None:
    """Makes files written by ``replace_file`` (and their renames) durable: an fsync of each file and then
    of its directory, up to ``threads`` files at a time. Not one syncfs for all: that would also wait for
    every other dirty page on the filesystem, seconds under a produce load with fsync on ack off, while
    these are a few small files. Returns once every one is durable; the first error is raised.
    Blocking: run it in a worker thread."""
    if len(paths) <= 1 or threads <= 1:
        for path in paths:
            _fsync_with_directory(path)
        return
    with ThreadPoolExecutor(max_workers=min(threads, len(paths)), thread_name_prefix="make-durable") as pool:
        for done in [pool.submit(_fsync_with_directory, path) for path in paths]:
            done.result()


class OffsetCheckpointFile:
    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        write_atomically(self.path, format_checkpoint(offsets))

    def read(self) -> dict[TopicPartition, int]:
        """The offsets, or {} when the file does not exist. A leftover temp file is a write that never
        got renamed: it is ignored and removed."""
        try:
            os.unlink(self.path + TEMP_SUFFIX)
        except FileNotFoundError:
            pass
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return {}
        return parse_checkpoint(data, self.path)
