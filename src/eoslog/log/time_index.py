"""TimeIndex: the ``.timeindex`` file of a segment (Kafka's TimeIndex).

Each entry says "up to this offset, the largest timestamp in the segment is T": (timestamp int64,
relative offset int32). An entry is added only when the segment's max timestamp grows, so timestamps are
strictly increasing and offsets never decrease. The offsets are batch last offsets (we never decode
records). Layout and rebuild rule: docs/storage-format.md, ".timeindex". Contract: ``eoslog.log.index``.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from typing import NamedTuple

from eoslog.log.config import TIME_INDEX_ENTRY_SIZE
from eoslog.log.index import IndexFile
from eoslog.records.header import NO_TIMESTAMP

_ENTRY = struct.Struct(">qi")


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    entry_size = TIME_INDEX_ENTRY_SIZE

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        super().__init__(path, base_offset, max_entries)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Adds (timestamp, offset) if the timestamp is larger than the last entry's (Kafka's maybeAppend).

        ``skip_full_check`` lets the final entry at roll/close go into a full index, as Kafka does.
        """
        if not skip_full_check and self.is_full:
            return
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        if timestamp < 0:
            return
        relative = offset - self.base_offset
        if self._offsets and relative < self._offsets[-1]:
            raise ValueError(f"time index offset {offset} goes backwards in {self.path}")
        self._timestamps.append(timestamp)
        self._offsets.append(relative)

    def last_entry(self) -> TimestampOffset:
        """The segment's largest timestamp so far and the offset holding it; (-1, base) when empty."""
        if not self._timestamps:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[-1], self._offsets[-1] + self.base_offset)

    def lookup_before(self, timestamp: int) -> TimestampOffset:
        """The last entry with a timestamp strictly below ``timestamp``; (-1, base) when there is none.

        Every batch up to that entry's offset has a timestamp below ``timestamp``, so a search for the
        first batch with timestamp >= ``timestamp`` can start after it.
        """
        slot = bisect_left(self._timestamps, timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[slot], self._offsets[slot] + self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Drops every entry whose offset is >= ``offset``."""
        relative = offset - self.base_offset
        count = len(self._offsets)
        while count and self._offsets[count - 1] >= relative:
            count -= 1
        self.truncate_entries(count)

    def check(self, next_offset_bound: int | None) -> str | None:
        name = self.path
        previous_ts, previous_offset = None, 0
        for timestamp, relative in zip(self._timestamps, self._offsets):
            if relative < previous_offset or (previous_ts is not None and timestamp <= previous_ts):
                return f"{name}: entry ({timestamp}, {relative}) does not increase"
            if relative < 0:
                return f"{name}: negative relative offset {relative}"
            previous_ts, previous_offset = timestamp, relative
        if (
            next_offset_bound is not None
            and self._offsets
            and (self._offsets[-1] + self.base_offset >= next_offset_bound)
        ):
            return f"{name}: last offset is not below the next segment's base offset {next_offset_bound}"
        return None

    def _clear(self) -> None:
        del self._timestamps[:]
        del self._offsets[:]

    def _count(self) -> int:
        return len(self._offsets)

    def _load(self, raw: bytes) -> None:
        for timestamp, relative in _ENTRY.iter_unpack(raw):
            self._timestamps.append(timestamp)
            self._offsets.append(relative)

    def _encode(self, start: int, stop: int) -> bytes:
        return b"".join(_ENTRY.pack(self._timestamps[i], self._offsets[i]) for i in range(start, stop))

    def _truncate_count(self, count: int) -> None:
        del self._timestamps[count:]
        del self._offsets[count:]
