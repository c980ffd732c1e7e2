"""What an `eoslog bench` run was asked to do (:class:`BenchSettings`) and what it measured
(:class:`BenchReport`, per target and message size): plain values, printed and written as JSON by
bench.py and drawn by plot.py.
"""

from __future__ import annotations

import dataclasses
from array import array
from typing import Any

MOCK = "mock"
TANSU = "tansu"
CONSUMER_FETCH_WAIT_MS = 10


@dataclasses.dataclass(frozen=True)
class BenchSettings:
    """One workload; the same settings are used for every target of a run."""

    sizes: tuple[int, ...] = (100, 1024)
    messages: int = 500_000          # upper bound per throughput run
    seconds: float = 10.0            # time bound per throughput run (whichever comes first)
    acks: str = "all"
    idempotent: bool = True
    partitions: int = 4              # librdkafka's mock cluster always auto-creates 4
    linger_ms: float = 5.0
    batch_size: int = 1_000_000
    compression: str = "none"
    latency_rate: float = 1000.0     # msgs/s of the paced latency run (0 skips it)
    latency_messages: int = 2000
    latency_linger_ms: float = 0.0   # the paced run measures round trips, not linger
    timeout: float = 120.0           # hard limit for any one step (flush, consume, topic creation)
    repeat: int = 1                  # each figure is the median over this many runs
    topic_configs: tuple[tuple[str, str], ...] = ()  # sent with CreateTopics (the mock ignores them)
    isolation_level: str = "read_committed"  # of the consume run (librdkafka's default)

    def producer_config(self, bootstrap: str, linger_ms: float | None = None) -> dict[str, Any]:
        return {
            "bootstrap.servers": bootstrap,
            "acks": self.acks,
            "enable.idempotence": self.idempotent,
            "linger.ms": self.linger_ms if linger_ms is None else linger_ms,
            "batch.size": self.batch_size,
            "compression.type": self.compression,
            "log_level": 3,
        }

    def consumer_config(self, bootstrap: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": bootstrap, "group.id": "eoslog-bench", "enable.auto.commit": False,
            "isolation.level": self.isolation_level,
            # A long-poll Fetch left hanging at the end of a pass would delay the next pass by its full wait.
            "fetch.wait.max.ms": CONSUMER_FETCH_WAIT_MS,
            # librdkafka stops fetching once its pre-fetch queue (shared by all assigned partitions) holds
            # queued.min.messages (100,000) or queued.max.messages.kbytes (64 MiB), and then looks again
            # only after fetch.queue.backoff.ms, 1 s by default. A broker that delivers faster than this
            # process reads fills the queue within a pass, so with the default the run timed that idle
            # second (twice in a 500,000-message run), not the broker; the mock, which retains 5 MiB per
            # partition, rarely holds enough to fill it (docs/benchmarks.md, "Consume at 100 B: the
            # client's pre-fetch back-off"). Looking again every few ms keeps the queue topped up.
            "fetch.queue.backoff.ms": CONSUMER_FETCH_WAIT_MS,
            "log_level": 3,
        }


@dataclasses.dataclass
class LatencySummary:
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float

    @classmethod
    def of(cls, seconds: array | list[float]) -> LatencySummary:
        if not seconds:
            return cls(0, 0.0, 0.0, 0.0, 0.0)
        ordered = sorted(seconds)
        n = len(ordered)

        def rank(q: float) -> float:  # nearest-rank percentile: a value that was actually observed
            return ordered[min(n - 1, max(0, int(q * n + 0.999999) - 1))] * 1000

        return cls(n, rank(0.50), rank(0.99), ordered[-1] * 1000, sum(ordered) / n * 1000)


@dataclasses.dataclass
class ProduceResult:
    messages: int            # delivered without error
    bytes: int               # value bytes delivered
    seconds: float           # first produce() to last delivery report
    errors: int
    undelivered: int         # still queued when flush gave up
    latency: LatencySummary

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


@dataclasses.dataclass
class ConsumeResult:
    messages: int
    bytes: int
    seconds: float           # assign() to the last expected message
    produced: int            # what the produce run of the same repetition delivered
    retained: int            # sum over partitions of high watermark - low watermark (as the broker says)
    passes: int              # reads of the retained range (more than one only when retained < produced)
    errors: int

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


@dataclasses.dataclass
class SizeResult:
    size: int
    partitions: int
    produce: ProduceResult
    paced: ProduceResult | None
    consume: ConsumeResult


@dataclasses.dataclass
class TargetReport:
    name: str                # "eoslog (embedded)", "mock", or the bootstrap address
    bootstrap: str
    results: list[SizeResult]

    def for_size(self, size: int) -> SizeResult | None:
        return next((r for r in self.results if r.size == size), None)


@dataclasses.dataclass
class BenchReport:
    settings: BenchSettings
    targets: list[TargetReport]

    def reference(self, name: str) -> TargetReport | None:
        """The comparison target called ``name`` (MOCK or TANSU), when the run had it besides the target
        under test (which is always the first)."""
        return next((t for t in self.targets[1:] if t.name == name), None)

    def ratios(self, against: str = MOCK) -> list[dict[str, Any]]:
        """Target under test / ``against`` for each size, when the run had both."""
        reference = self.reference(against)
        if reference is None:
            return []
        rows = []
        for result in self.targets[0].results:
            ceiling = reference.for_size(result.size)
            if ceiling is None:
                continue
            rows.append({
                "size": result.size,
                "produce_mb_per_s": _ratio(result.produce.mb_per_s, ceiling.produce.mb_per_s),
                "consume_mb_per_s": _ratio(result.consume.mb_per_s, ceiling.consume.mb_per_s),
                "produce_p50_ms": _ratio(result.produce.latency.p50_ms, ceiling.produce.latency.p50_ms),
                "paced_p50_ms": _ratio(result.paced.latency.p50_ms, ceiling.paced.latency.p50_ms)
                if result.paced and ceiling.paced else None,
            })
        return rows

    def to_json(self) -> dict[str, Any]:
        def target(t: TargetReport) -> dict[str, Any]:
            return {"name": t.name, "bootstrap": t.bootstrap, "results": [
                {"size": r.size, "partitions": r.partitions,
                 "produce": _produce_json(r.produce),
                 "paced": _produce_json(r.paced) if r.paced else None,
                 "consume": {**dataclasses.asdict(r.consume), "msgs_per_s": r.consume.msgs_per_s,
                             "mb_per_s": r.consume.mb_per_s}}
                for r in t.results]}

        return {"settings": dataclasses.asdict(self.settings), "targets": [target(t) for t in self.targets],
                "ratios_vs_mock": self.ratios(MOCK), "ratios_vs_tansu": self.ratios(TANSU)}


def _produce_json(result: ProduceResult) -> dict[str, Any]:
    return {**dataclasses.asdict(result), "msgs_per_s": result.msgs_per_s, "mb_per_s": result.mb_per_s}


def _ratio(value: float, ceiling: float) -> float | None:
    return value / ceiling if ceiling > 0 else None
