"""OffsetMap: the log cleaner's key -> latest offset map (Kafka's SkimpyOffsetMap, made exact).

Kafka's map keeps only an MD5 digest of each key (16 bytes + an 8-byte offset per slot), so two keys whose
digests collide share one slot and the older key's live value is deleted by the cleaner. This map keys on
the full key bytes, so no key can ever be lost to a collision: equality is decided by comparing bytes
(Python's dict hashes to find a slot and then compares the keys themselves).

The price is memory: about ``ENTRY_OVERHEAD + len(key)`` bytes per key instead of 24 (measured by
bench/cleaner_bench.py; docs/compaction.md has the figures). The cleaner bounds it with
``log.cleaner.dedupe.buffer.size``: once the estimate would pass the budget, ``put`` refuses new keys and
the cleaning pass stops at the last batch it fully mapped; the rest of the dirty section is cleaned in
the next pass, as Kafka does when its map fills up.

Contract: owned by one cleaning pass in one (worker) thread; no I/O.
"""

from __future__ import annotations

import sys

# Measured (bench/cleaner_bench.py, CPython 3.11, 64-bit): dict slot and index (~40 B at the dict's
# typical fill), the bytes object header (33 B) and the int offset (32 B): 117 B + the key. Rounded up.
ENTRY_OVERHEAD = 120
DEFAULT_BUFFER_SIZE = 128 * 1024 * 1024  # Kafka's log.cleaner.dedupe.buffer.size


class OffsetMap:
    """Exact map from record key to the offset of its latest version, within a memory budget."""

    __slots__ = ("_budget", "_offsets", "_used", "latest_offset")

    def __init__(self, budget_bytes: int = DEFAULT_BUFFER_SIZE) -> None:
        if budget_bytes <= 0:
            raise ValueError(f"offset map budget must be positive, got {budget_bytes}")
        self._offsets: dict[bytes, int] = {}
        self._budget = budget_bytes
        self._used = 0
        self.latest_offset = -1  # the largest offset put so far: records above it were not mapped

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def bytes_used(self) -> int:
        """The estimate the budget is checked against."""
        return self._used

    @property
    def budget(self) -> int:
        return self._budget

    def fits(self, keys: list[bytes]) -> bool:
        """Whether every one of ``keys`` could be put without passing the budget (a batch is mapped
        whole or not at all, so the pass can stop on a batch boundary)."""
        extra = 0
        offsets = self._offsets
        for key in keys:
            if key not in offsets:
                extra += ENTRY_OVERHEAD + len(key)
        return self._used + extra <= self._budget

    def put(self, key: bytes, offset: int) -> None:
        """Records ``offset`` as the latest for ``key``; offsets must be put in increasing order."""
        offsets = self._offsets
        if key not in offsets:
            self._used += ENTRY_OVERHEAD + len(key)
        offsets[key] = offset
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int | None:
        return self._offsets.get(key)

    def clear(self) -> None:
        self._offsets.clear()
        self._used = 0
        self.latest_offset = -1


def measured_bytes_per_entry(key_size: int, entries: int = 100_000) -> float:
    """Actual memory per entry for keys of ``key_size`` bytes (for the benchmark and a sanity test)."""
    import tracemalloc

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    offset_map = OffsetMap(budget_bytes=sys.maxsize)
    for i in range(entries):
        offset_map.put(i.to_bytes(8, "big").rjust(key_size, b"k"), 1_000_000_000 + i)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / entries
