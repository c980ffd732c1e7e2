"""What the broker's layers report to the metrics endpoint, as plain values (no exporter library here).

Each layer describes its own state as :class:`Family` objects (cluster/partition_metrics.py,
coordinator/*/metrics.py, log/cleaner.py, server/request_metrics.py); server/metrics.py turns them into
Prometheus families. Keeping this module free of prometheus_client means a broker without
``--metrics-listen`` never imports it, and the layers stay testable without an HTTP server.

Names follow the Prometheus JMX exporter's spelling of Kafka's MBeans (domain, type and name lower-cased
and joined by ``_``; a rate becomes a ``_total`` counter); eoslog's own metrics start with ``eoslog_``.
docs/operations.md "## Metrics" has the mapping table.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"

# Latency buckets in seconds: 0.1 ms .. 10 s, enough resolution for a fetch long poll and an fsync.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0)


@dataclass
class Family:
    """One metric: its name (without ``_total`` for counters), kind, help text and samples.

    A sample is (label values, value); for a histogram the value is a :class:`HistogramValue`."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...] = ()
    samples: list[tuple[tuple[object, ...], object]] = field(default_factory=list)

    def add(self, value: object, *labels: object) -> None:
        # Labels stay as given (ints, str): turning them into text is the exporter's job, done off the
        # event loop (server/metrics.py), since a scrape of many partitions adds thousands of samples.
        self.samples.append((labels, value))


@dataclass(frozen=True)
class HistogramValue:
    """Cumulative bucket counts (upper bound, count) ending with +Inf, and the sum of observations."""

    buckets: tuple[tuple[float, int], ...]
    sum: float


class Histogram:
    """Counts observations per bucket; ``observe`` is a bisect and two additions (cheap enough per request).

    Not thread-safe: one thread observes (the event loop), and readers take a :meth:`value` copy on that
    same thread (server/metrics.py explains why)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def value(self) -> HistogramValue:
        cumulative, running = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts):
            running += count
            cumulative.append((bound, running))
        return HistogramValue(tuple(cumulative), self.total)
