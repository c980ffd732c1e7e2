"""Combining state batches, as Kafka's PersisterStateBatchCombiner does (pure).

A share partition's persisted state is a list of offset ranges, each in one delivery state with one
delivery count. A write brings ranges that may overlap the stored ones and each other; combining gives the
shortest sorted list of non-overlapping ranges that covers their union:

- every range below the start offset is dropped, and one that straddles it is cut at it (a start offset
  of -1 cuts nothing);
- where ranges overlap, each offset takes the range with the higher delivery count, and at an equal count
  the higher delivery state (Available 0 < Acknowledged 2 < Archived 4). It is not "the newest wins": a
  delivery count only grows and a finished record never becomes available again, so the record that went
  further wins whatever order the ranges came in;
- adjacent ranges with the same state and count become one.

So combining equals painting every range onto a per-offset map that keeps, per offset, the greater
(delivery count, delivery state), in any order (tests/coordinator/share/test_share_batches.py checks it).
A range whose last offset is below its first covers nothing and is dropped (Kafka's combiner has no such
case: its writers never send one, and the core refuses them).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from eoslog.coordinator.share.log_format import NO_START_OFFSET, StateBatch


def _priority(batch: StateBatch) -> tuple[int, int]:
    return batch.delivery_count, batch.delivery_state


def combine_state_batches(so_far: Iterable[StateBatch], new: Iterable[StateBatch],
                          start_offset: int = NO_START_OFFSET) -> tuple[StateBatch, ...]:
    """The stored ranges ``so_far`` combined with ``new``, cut at ``start_offset``."""
    ranges = []
    for batch in (*so_far, *new):
        if batch.last_offset < batch.first_offset:
            continue
        if start_offset != NO_START_OFFSET:
            if batch.last_offset < start_offset:
                continue
            if batch.first_offset < start_offset:
                batch = batch._replace(first_offset=start_offset)
        ranges.append(batch)
    if len(ranges) <= 1:
        return tuple(ranges)
    return _sweep(ranges)


def _sweep(ranges: list[StateBatch]) -> tuple[StateBatch, ...]:
    """One pass over the ranges' ends in offset order, keeping the best range that covers each stretch."""
    # (offset, 0 for an end / 1 for a start, priority): at one offset, ends are taken before starts.
    events = sorted([(b.first_offset, 1, _priority(b)) for b in ranges]
                    + [(b.last_offset + 1, 0, _priority(b)) for b in ranges])
    active: list[tuple[int, int]] = []  # max-heap of priorities (negated), ends removed lazily
    ended: dict[tuple[int, int], int] = {}
    out: list[StateBatch] = []
    since = 0  # where the stretch being covered began
    i = 0
    while i < len(events):
        offset = events[i][0]
        if active and offset > since:
            count, state = -active[0][0], -active[0][1]
            last = out[-1] if out else None
            if last is not None and last.last_offset + 1 == since and _priority(last) == (count, state):
                out[-1] = last._replace(last_offset=offset - 1)
            else:
                out.append(StateBatch(since, offset - 1, state, count))
        while i < len(events) and events[i][0] == offset:
            _, starts, priority = events[i]
            if starts:
                heapq.heappush(active, (-priority[0], -priority[1]))
            else:
                ended[priority] = ended.get(priority, 0) + 1
            i += 1
        while active and ended.get((-active[0][0], -active[0][1]), 0):
            top = (-active[0][0], -active[0][1])
            ended[top] -= 1
            heapq.heappop(active)
        since = offset
    return tuple(out)
