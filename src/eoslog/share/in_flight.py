"""The values a share partition is made of, and the arithmetic on runs of in-flight offsets.

Offsets ranges are inclusive at both ends, Kafka's convention (FirstOffset / LastOffset on the wire).
An :class:`InFlightBatch` is a run of consecutive offsets with one state, delivery count, owner and lock
deadline; the share partition keeps its in-flight offsets as a tuple of such runs that covers
[start offset, end offset) with no gap. Runs with equal attributes that touch are merged, so a batch
acquired together stays one run until an acknowledgement, a release or a lock expiry splits it.

Everything here is a pure function of its arguments.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from eoslog.share.record_state import AcknowledgeType, RecordState


class OffsetRange(NamedTuple):
    """A record batch read from the log (base to last offset), or any inclusive range of offsets."""

    first_offset: int
    last_offset: int

    @property
    def offset_count(self) -> int:
        return self.last_offset - self.first_offset + 1


class AcquiredRecords(NamedTuple):
    """ShareFetchResponse's AcquiredRecords: a range handed to the member, with its delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


class AcknowledgementBatch(NamedTuple):
    """ShareFetch / ShareAcknowledge's AcknowledgementBatch: one type for the range, or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int | AcknowledgeType, ...]


class StateBatch(NamedTuple):
    """The share coordinator's StateBatch (ShareSnapshotValue / ShareUpdateValue, WriteShareGroupState)."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState  # never ACQUIRED: see RecordState.persisted
    delivery_count: int


class PersistedState(NamedTuple):
    """What the share coordinator keeps for a share partition: a snapshot has every state batch of the
    in-flight records, an update only those that changed (WriteShareGroupState's StartOffset, StateEpoch,
    StateBatches). Offsets below ``start_offset`` are done; offsets at or above it that no batch names
    were never delivered."""

    start_offset: int
    state_epoch: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class InFlightBatch:
    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None  # the owner, set exactly when ACQUIRED
    lock_deadline_ms: int | None = None  # when the acquisition lock runs out, set exactly when ACQUIRED

    @property
    def offset_count(self) -> int:
        return self.last_offset - self.first_offset + 1

    def attributes(self) -> tuple:
        return self.state, self.delivery_count, self.member_id, self.lock_deadline_ms

    def part(self, first_offset: int, last_offset: int) -> InFlightBatch:
        return replace(self, first_offset=first_offset, last_offset=last_offset)

    def as_range(self) -> OffsetRange:
        return OffsetRange(self.first_offset, self.last_offset)


def check_ranges(ranges: Sequence[OffsetRange], what: str) -> None:
    """Ranges in ascending order, none empty, none overlapping; anything else is the caller's bug."""
    previous_last = None
    for first, last in ranges:
        if first > last or (previous_last is not None and first <= previous_last):
            raise ValueError(f"{what} must be ascending, non-empty and not overlapping: {list(ranges)}")
        previous_last = last


def cut(runs: Iterable[InFlightBatch], first: int, last: int
        ) -> tuple[list[InFlightBatch], list[InFlightBatch], list[InFlightBatch]]:
    """The runs below ``first``, within [first, last] and above ``last``, split at both edges."""
    below, inside, above = [], [], []
    for run in runs:
        if run.last_offset < first:
            below.append(run)
        elif run.first_offset > last:
            above.append(run)
        else:
            if run.first_offset < first:
                below.append(run.part(run.first_offset, first - 1))
            inside.append(run.part(max(run.first_offset, first), min(run.last_offset, last)))
            if run.last_offset > last:
                above.append(run.part(last + 1, run.last_offset))
    return below, inside, above


def normalize(end_offset: int, runs: Iterable[InFlightBatch]) -> tuple[int, tuple[InFlightBatch, ...]]:
    """Merge touching runs with equal attributes, then let the start offset pass the done runs in front.

    ``runs`` must be contiguous; returns (start offset, runs). Nothing is in flight when the start offset
    reaches the end offset."""
    merged: list[InFlightBatch] = []
    for run in runs:
        if merged and merged[-1].attributes() == run.attributes() and merged[-1].last_offset + 1 == run.first_offset:
            merged[-1] = merged[-1].part(merged[-1].first_offset, run.last_offset)
        else:
            merged.append(run)
    first_open = 0
    while first_open < len(merged) and merged[first_open].state.is_done:
        first_open += 1
    kept = tuple(merged[first_open:])
    return (kept[0].first_offset if kept else end_offset), kept


def merge_ranges(ranges: Iterable[OffsetRange]) -> tuple[OffsetRange, ...]:
    """The union of ``ranges``, as ascending ranges that neither overlap nor touch."""
    out: list[OffsetRange] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1].last_offset + 1:
            out[-1] = OffsetRange(out[-1].first_offset, max(last, out[-1].last_offset))
        else:
            out.append(OffsetRange(first, last))
    return tuple(out)


def split_by(first: int, last: int, ranges: Sequence[OffsetRange]) -> Iterator[tuple[int, int, bool]]:
    """[first, last] in consecutive pieces, each saying whether it lies inside ``ranges`` (ascending)."""
    offset = first
    for range_first, range_last in ranges:
        if range_last < offset:
            continue
        if range_first > last:
            break
        if range_first > offset:
            yield offset, range_first - 1, False
            offset = range_first
        piece_last = min(range_last, last)
        yield offset, piece_last, True
        offset = piece_last + 1
        if offset > last:
            return
    if offset <= last:
        yield offset, last, False


def batch_end(batches: Sequence[OffsetRange], offset: int) -> int:
    """The last offset of the log batch holding ``offset``, or ``offset`` if no batch holds it."""
    index = bisect_right(batches, offset, key=lambda batch: batch.first_offset) - 1
    if index >= 0 and batches[index].last_offset >= offset:
        return batches[index].last_offset
    return offset


def persisted_runs(runs: Iterable[InFlightBatch]) -> tuple[StateBatch, ...]:
    """The runs as the share coordinator stores them: Acquired written as Available, equal neighbours merged."""
    out: list[StateBatch] = []
    for run in runs:
        state = run.state.persisted
        if (out and out[-1].last_offset + 1 == run.first_offset
                and (out[-1].delivery_state, out[-1].delivery_count) == (state, run.delivery_count)):
            out[-1] = out[-1]._replace(last_offset=run.last_offset)
        else:
            out.append(StateBatch(run.first_offset, run.last_offset, state, run.delivery_count))
    return tuple(out)


def persisted_within(runs: Sequence[InFlightBatch], ranges: Iterable[OffsetRange]) -> tuple[StateBatch, ...]:
    """The persisted form of ``runs`` at the offsets of ``ranges``: what an update writes for them."""
    pieces: list[InFlightBatch] = []
    for first, last in merge_ranges(ranges):
        pieces += cut(runs, first, last)[1]
    return persisted_runs(pieces)
