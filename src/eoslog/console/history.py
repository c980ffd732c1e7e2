"""What the console remembers between page loads, without I/O: a short series of samples per chart
(a group's total lag, the cluster's high watermarks summed) and the sparkline drawn from it.

The console keeps these in memory only: a chart starts when someone first opens the page, and is gone
when the console stops. Kafka brokers keep no history of lag either; a metrics system is the place for
anything longer.
"""

from __future__ import annotations

from collections import deque
from itertools import pairwise

MAX_POINTS = 120  # four minutes at the pages' 2 s refresh


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


def sparkline(values: list[float], width: int = 240, height: int = 40, pad: int = 2) -> str:
    """The ``points`` of an SVG polyline for ``values``, left to right, the largest at the top; a flat
    line at the bottom for all zeros, empty for fewer than two values."""
    if len(values) < 2:
        return ""
    top = max(values) or 1
    step = (width - 2 * pad) / (len(values) - 1)
    usable = height - 2 * pad
    return " ".join(f"{pad + i * step:.1f},{pad + usable - usable * v / top:.1f}" for i, v in enumerate(values))
