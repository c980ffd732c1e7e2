"""What the console remembers between page loads, without I/O: a short series of samples per chart
(a group's total lag and each of its partitions' lag, the cluster's high watermarks summed) and the
sparkline drawn from it.

The console keeps these in memory only: a chart starts when someone first opens the page, and is gone
when the console stops. Kafka brokers keep no history of lag either; a metrics system is the place for
anything longer.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import pairwise

MAX_POINTS = 120  # four minutes at the pages' 2 s refresh
PARTITION_POINTS = 60  # a partition's chart: two minutes, small enough for a page of 1,000 rows
# Every group's per-partition points together, at most (about 40 bytes each): groups shown least recently
# are forgotten first, so a console left open on many big groups stays within a few MiB.
MAX_PARTITION_VALUES = 200_000


class Series:
    """(monotonic seconds, value) samples, oldest first, the newest MAX_POINTS of them."""

    def __init__(self, max_points: int = MAX_POINTS) -> None:
        self.samples: deque[tuple[float, float]] = deque(maxlen=max_points)

    def add(self, at: float, value: float) -> None:
        if self.samples and at <= self.samples[-1][0]:
            return  # two pages rendered at once: one sample is enough
        self.samples.append((at, value))

    def values(self) -> list[float]:
        return [v for _, v in self.samples]

    def rates(self) -> list[float]:
        """Per-second change between consecutive samples (records/s from summed high watermarks); a
        counter that went down (records deleted, a topic removed) counts as no change."""
        return [max(b - a, 0) / (tb - ta) for (ta, a), (tb, b) in pairwise(self.samples)]


def sparkline(values: list[float], width: int = 240, height: int = 40, pad: int = 2, decimals: int = 1) -> str:
    """The ``points`` of an SVG polyline for ``values``, left to right, the largest at the top; a flat
    line at the bottom for all zeros, empty for fewer than two values. A point between two of the same
    value is left out (the line through it is the same): a steady lag, the common case, is two points,
    which keeps a group page of 1,000 partition charts small."""
    if len(values) < 2:
        return ""
    top = max(values) or 1
    step = (width - 2 * pad) / (len(values) - 1)
    usable = height - 2 * pad
    last = len(values) - 1
    return " ".join(f"{pad + i * step:.{decimals}f},{pad + usable - usable * v / top:.{decimals}f}"
                    for i, v in enumerate(values)
                    if i in (0, last) or not values[i - 1] == v == values[i + 1])


def level_line(values: list[float], **options) -> str:
    """:func:`sparkline` of a level (a lag), drawn from its first sample: one value is a flat line at its
    height, not an empty chart until the page polls again."""
    return sparkline(values * 2 if len(values) == 1 else values, **options)


class GroupLag:
    """One group's lag as this console sampled it: the total (MAX_POINTS) and each partition's own
    (PARTITION_POINTS). Only the partitions of the latest sample are kept: a partition the group no longer
    has an offset in takes its history with it."""

    def __init__(self, max_points: int = MAX_POINTS, partition_points: int = PARTITION_POINTS) -> None:
        self.total = Series(max_points)
        self.partition_points = partition_points
        self.partitions: dict[tuple[str, int], deque[int]] = {}

    def add(self, at: float, lags: dict[tuple[str, int], int | None]) -> None:
        """One sample: each partition's lag (None: nothing committed there, not drawn)."""
        if self.total.samples and at <= self.total.samples[-1][0]:
            return  # the page and its fragment rendered at once: one sample is enough
        self.total.add(at, sum(lag for lag in lags.values() if lag is not None))
        known = {tp: lag for tp, lag in lags.items() if lag is not None}
        self.partitions = {tp: self.partitions.get(tp) or deque(maxlen=self.partition_points) for tp in known}
        for tp, lag in known.items():
            self.partitions[tp].append(lag)

    def values(self, tp: tuple[str, int]) -> list[int]:
        return list(self.partitions.get(tp, ()))

    @property
    def capacity(self) -> int:
        """The most per-partition values this group can hold."""
        return self.partition_points * len(self.partitions)


class LagHistory:
    """Every group's GroupLag, the least recently sampled forgotten first once all of them together could
    hold more than ``max_values`` partition points (the group just sampled is always kept)."""

    def __init__(self, max_values: int = MAX_PARTITION_VALUES, **group_options) -> None:
        self.max_values = max_values
        self.group_options = group_options
        self.groups: OrderedDict[str, GroupLag] = OrderedDict()

    def add(self, group_id: str, at: float, lags: dict[tuple[str, int], int | None]) -> GroupLag:
        group = self.groups.pop(group_id, None) or GroupLag(**self.group_options)
        group.add(at, lags)
        self.groups[group_id] = group  # now the most recent
        while len(self.groups) > 1 and sum(g.capacity for g in self.groups.values()) > self.max_values:
            self.groups.popitem(last=False)
        return group
