"""OffsetIndex: the ``.index`` file of a segment (Kafka's OffsetIndex).

A sparse map from offset to file position: one entry per ``index.interval.bytes`` of log data, each
naming a batch by its *last* offset and its start position. Entries are strictly increasing in both.
Layout and rebuild rule: docs/storage-format.md, ".index". Contract: see ``eoslog.log.index``.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from typing import NamedTuple

from eoslog.log.config import OFFSET_INDEX_ENTRY_SIZE
from eoslog.log.index import IndexFile, big_endian_array, to_big_endian


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    entry_size = OFFSET_INDEX_ENTRY_SIZE  # relative offset int32 + position int32

    def __init__(self, path: str, base_offset: int, max_entries: int) -> None:
        self._offsets = array("i")  # relative to base_offset
        self._positions = array("i")
        super().__init__(path, base_offset, max_entries)

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if self._offsets and (relative <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(
                f"index entry ({offset}, {position}) does not follow "
                f"({self._offsets[-1] + self.base_offset}, {self._positions[-1]}) in {self.path}"
            )
        self._offsets.append(relative)
        self._positions.append(position)

    def lookup(self, offset: int) -> OffsetPosition:
        """The last entry with an offset <= ``offset``, or (base_offset, 0) when there is none."""
        slot = bisect_right(self._offsets, offset - self.base_offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self._offsets[slot] + self.base_offset, self._positions[slot])

    def lookup_position(self, position: int) -> int:
        """The largest indexed batch start <= ``position`` (0 when there is none)."""
        slot = bisect_right(self._positions, position) - 1
        return self._positions[slot] if slot >= 0 else 0

    def last_entry(self) -> OffsetPosition:
        if not self._offsets:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self._offsets[-1] + self.base_offset, self._positions[-1])

    def truncate_to(self, offset: int) -> None:
        """Drops every entry whose offset is >= ``offset``."""
        self.truncate_entries(bisect_right(self._offsets, offset - self.base_offset - 1))

    def check(self, log_size: int, next_offset_bound: int | None) -> str | None:
        """Why the loaded entries cannot describe a log of ``log_size`` bytes, or None when they can.

        ``next_offset_bound`` is the first offset of the next segment when known.
        """
        name = self.path
        previous_offset, previous_position = -1, 0
        for relative, position in zip(self._offsets, self._positions):
            if relative <= previous_offset or position <= previous_position:
                return f"{name}: entry ({relative}, {position}) does not increase"
            if position >= log_size:
                return f"{name}: position {position} is past the end of the log ({log_size} bytes)"
            previous_offset, previous_position = relative, position
        if (
            next_offset_bound is not None
            and self._offsets
            and (self._offsets[-1] + self.base_offset >= next_offset_bound)
        ):
            return f"{name}: last offset is not below the next segment's base offset {next_offset_bound}"
        return None

    def _clear(self) -> None:
        del self._offsets[:]
        del self._positions[:]

    def _count(self) -> int:
        return len(self._offsets)

    def _load(self, raw: bytes) -> None:
        values = big_endian_array("i", raw)
        self._offsets = values[0::2]
        self._positions = values[1::2]

    def _encode(self, start: int, stop: int) -> bytes:
        values = array("i", bytes(8 * (stop - start)))
        values[0::2] = self._offsets[start:stop]
        values[1::2] = self._positions[start:stop]
        return to_big_endian(values)

    def _truncate_count(self, count: int) -> None:
        del self._offsets[count:]
        del self._positions[count:]
