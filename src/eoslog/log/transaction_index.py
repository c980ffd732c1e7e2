"""The aborted-transaction index: Kafka's ``.txnindex`` files (format: docs/storage-format.md, ".txnindex").

A read_committed consumer receives the records of aborted transactions like any others and drops them
itself; the broker's part is to tell it, with each fetch, which aborted transactions overlap the fetched
range: (producer_id, first_offset) pairs. This module keeps those transactions, one entry per ABORT
marker, in a file beside the segment that holds the marker: ``<segment base offset>.txnindex``.

Contract of :class:`TransactionIndex` (one file)
  Owns one ``.txnindex`` file. Entries are appended in marker order, so ``last_offset`` strictly
  increases through the file. A file of a size that is not a multiple of the entry size has a torn
  tail (an append cut by a crash): the partial entry is cut off on open. An entry with an unknown
  version or out of order cannot come from a crash: the file is reported damaged
  (:class:`TransactionIndexError`) and the caller rebuilds it from the log.

Contract of :class:`AbortedTransactionIndex` (the files of one partition directory)
  Owned by the partition (cluster/partition.py), called on the event loop only. Entries at or past the
  newest producer-state snapshot are rebuilt at open by the producer-state replay; ``flush()`` runs
  before every snapshot is written, so entries below a snapshot are durable.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right
from typing import NamedTuple

log = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")  # version, producer_id, first_offset, last_offset, last_stable_offset
ENTRY_SIZE = ENTRY.size  # 34, as Kafka's AbortedTxn
ENTRY_VERSION = 0
OFFSET_DIGITS = 20


class TransactionIndexError(ValueError):
    """A ``.txnindex`` file holds something a crash cannot produce: rebuild it from the log."""


class AbortedTxn(NamedTuple):
    """One aborted transaction: its data from ``first_offset``, its ABORT marker at ``last_offset``,
    and the partition's last stable offset right after the marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(ENTRY_VERSION, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Whole entries of ``data`` (a torn tail ignored). Raises TransactionIndexError on damage."""
    entries: list[AbortedTxn] = []
    previous_last = -1
    for position in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, producer_id, first_offset, last_offset, lso = ENTRY.unpack_from(data, position)
        if version != ENTRY_VERSION:
            raise TransactionIndexError(f"entry at byte {position} has unknown version {version}")
        if not 0 <= first_offset <= last_offset or last_offset <= previous_last:
            raise TransactionIndexError(f"entry at byte {position} is out of order: "
                                        f"[{first_offset}, {last_offset}] after {previous_last}")
        entries.append(AbortedTxn(producer_id, first_offset, last_offset, lso))
        previous_last = last_offset
    return entries


def txn_index_file_name(base_offset: int) -> str:
    return f"{base_offset:0{OFFSET_DIGITS}d}{TXN_INDEX_SUFFIX}"


class TransactionIndex:
    """One ``.txnindex`` file; the entries are also kept in memory (34 bytes each on disk)."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._fd = -1
        self._dirty = False
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            self.entries = decode_entries(data)
            whole = len(self.entries) * ENTRY_SIZE
            if whole != len(data):
                log.warning("%s: cutting a torn tail of %d bytes", path, len(data) - whole)
                os.truncate(path, whole)

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    @property
    def last_offset(self) -> int:
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, entry: AbortedTxn) -> None:
        if entry.last_offset <= self.last_offset:
            raise ValueError(f"{self.path}: entry ending at {entry.last_offset} is not after {self.last_offset}")
        os.write(self._open(), entry.encode())
        self.entries.append(entry)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drops every entry whose marker is at or past ``offset``."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) == len(self.entries):
            return
        self.entries = keep
        os.truncate(self.path, len(keep) * ENTRY_SIZE)
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Entries overlapping [fetch_offset, upper_bound): marker at or past the fetch offset, data
        starting below the upper bound."""
        start = bisect_right([e.last_offset for e in self.entries], fetch_offset - 1)
        return [e for e in self.entries[start:] if e.first_offset < upper_bound]

    def flush(self) -> None:
        if self._dirty and self._fd >= 0:
            os.fsync(self._fd)
        self._dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class AbortedTransactionIndex:
    """The ``.txnindex`` files of one partition directory, by segment base offset."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._indexes: dict[int, TransactionIndex] = {}
        self.damaged = False  # a file had to be dropped: the caller must rebuild from the log start

    @classmethod
    def open(cls, directory: str, segment_bases: list[int]) -> AbortedTransactionIndex:
        """Loads the files of live segments; files of segments that are gone (retention) are removed,
        damaged ones are removed and ``damaged`` is set."""
        index = cls(directory)
        live = set(segment_bases)
        for name in sorted(os.listdir(directory)):
            if not name.endswith(TXN_INDEX_SUFFIX):
                continue
            stem = name[: -len(TXN_INDEX_SUFFIX)]
            path = os.path.join(directory, name)
            if len(stem) != OFFSET_DIGITS or not stem.isdigit() or int(stem) not in live:
                os.unlink(path)
                continue
            try:
                index._indexes[int(stem)] = TransactionIndex(path, int(stem))
            except TransactionIndexError as exc:
                log.warning("%s is damaged (%s): deleting it; the index is rebuilt from the log", path, exc)
                os.unlink(path)
                index.damaged = True
        return index

    def __len__(self) -> int:
        return sum(len(i.entries) for i in self._indexes.values())

    def append(self, segment_base: int, entry: AbortedTxn) -> None:
        index = self._indexes.get(segment_base)
        if index is None:
            index = TransactionIndex(os.path.join(self.directory, txn_index_file_name(segment_base)), segment_base)
            self._indexes[segment_base] = index
        index.append(entry)

    def truncate_to(self, offset: int) -> None:
        for base in sorted(self._indexes):
            index = self._indexes[base]
            index.truncate_to(offset)
            if not index.entries and base >= offset:
                index.delete()
                del self._indexes[base]

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), in marker order."""
        found: list[AbortedTxn] = []
        for base in sorted(self._indexes):
            found.extend(self._indexes[base].collect(fetch_offset, upper_bound))
        return found

    def all_entries(self) -> list[AbortedTxn]:
        return [e for base in sorted(self._indexes) for e in self._indexes[base].entries]

    def retain_segments(self, segment_bases: list[int]) -> None:
        """Deletes the files of segments that no longer exist (retention, DeleteRecords)."""
        live = set(segment_bases)
        for base in [b for b in self._indexes if b not in live]:
            self._indexes.pop(base).delete()

    def flush(self) -> None:
        for index in self._indexes.values():
            index.flush()

    def close(self) -> None:
        for index in self._indexes.values():
            index.flush()
            index.close()
