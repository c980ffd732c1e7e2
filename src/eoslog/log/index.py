"""What the two sparse index files of a segment share (Kafka's AbstractIndex).

Contract of an index object (``OffsetIndex``, ``TimeIndex``):
- It owns one file descriptor, opened O_APPEND; nobody else writes the file.
- The entries live in memory (compact ``array``s) and are the truth while the log is open; the file holds a
  prefix of them. ``write_pending`` appends the rest, ``flush`` also fsyncs. The file is therefore always
  a valid, possibly shorter, index: a sparse index that misses its last entries is still correct.
- Entries only grow at the end; ``truncate_to`` drops a suffix (file included).
- Called from the event-loop thread only; ``fd`` may be dup'ed for an fsync in a worker thread.
- Byte layouts: docs/storage-format.md (".index", ".timeindex").
"""

from __future__ import annotations

import os
import sys
from array import array


class IndexFile:
    """An append-only file of fixed-size big-endian entries, mirrored in memory."""

    entry_size: int = 0  # set by subclasses

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._written = 0  # entries already in the file
        self._synced = True  # nothing written since the last fsync

    # subclasses: _clear(), _count(), _load(raw bytes), _encode(start, stop) -> bytes, _truncate_count(n)

    @property
    def entries(self) -> int:
        return self._count()

    @property
    def is_full(self) -> bool:
        return self._count() >= self.max_entries

    def read_file(self) -> bytes:
        """The file's raw bytes (for loading and sanity checks)."""
        size = os.fstat(self.fd).st_size
        return os.pread(self.fd, size, 0) if size else b""

    def load(self) -> str | None:
        """Loads the entries from the file; returns why the file is unusable, or None when it loaded.

        Only the framing is checked here; ``check`` validates the values against the segment.
        """
        raw = self.read_file()
        self._clear()
        if len(raw) % self.entry_size:
            return f"{os.path.basename(self.path)}: size {len(raw)} is not a multiple of {self.entry_size}"
        self._load(raw)
        self._written = self._count()
        return None

    def reset(self) -> None:
        """Drops every entry, in memory and on disk (before a rebuild)."""
        self._clear()
        os.ftruncate(self.fd, 0)
        self._written = 0
        self._synced = False

    def truncate_entries(self, count: int) -> None:
        """Keeps only the first ``count`` entries."""
        if count >= self._count():
            return
        self._truncate_count(count)
        if self._written > count:
            os.ftruncate(self.fd, count * self.entry_size)
            self._written = count
            self._synced = False

    def write_pending(self) -> bool:
        """Appends entries not yet in the file; returns whether the file changed since the last fsync."""
        count = self._count()
        if self._written < count:
            data = self._encode(self._written, count)
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
            self._written = count
            self._synced = False
        return not self._synced

    def mark_synced(self) -> None:
        self._synced = True

    def flush(self) -> None:
        if self.write_pending():
            os.fsync(self.fd)
            self._synced = True

    def rename(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path

    def close(self) -> None:
        if self.fd >= 0:
            self.write_pending()
            os.close(self.fd)
            self.fd = -1

    def close_without_writing(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _clear(self) -> None:
        raise NotImplementedError

    def _count(self) -> int:
        raise NotImplementedError

    def _load(self, raw: bytes) -> None:
        raise NotImplementedError

    def _encode(self, start: int, stop: int) -> bytes:
        raise NotImplementedError

    def _truncate_count(self, count: int) -> None:
        raise NotImplementedError


def big_endian_array(typecode: str, raw: bytes | bytearray = b"") -> array:
    """An array of big-endian values from ``raw`` (arrays hold native byte order)."""
    values = array(typecode)
    values.frombytes(raw)
    if values.itemsize > 1 and sys.byteorder == "little":
        values.byteswap()
    return values


def to_big_endian(values: array) -> bytes:
    if values.itemsize > 1 and sys.byteorder == "little":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()
