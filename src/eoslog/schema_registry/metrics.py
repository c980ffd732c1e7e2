"""The registry's metrics, in Prometheus' text format at ``GET /metrics`` on the registry's own port
(behind its authentication, when that is on). Counters are kept per request; what the state holds is
read when scraped (``_StateCollector``), so serving a request costs two counter updates.

- ``eoslog_schema_registry_requests_total{method,route,status}``: requests answered, by route template;
- ``eoslog_schema_registry_request_seconds{method,route}``: how long they took (a histogram: lookup
  latency is ``route="/schemas/ids/{id:int}"``);
- ``eoslog_schema_registry_records_written_total``: records this instance appended to ``_schemas``;
- ``eoslog_schema_registry_subjects``, ``_schemas``: live subjects and distinct schema ids;
- ``eoslog_schema_registry_records_applied_total``, ``_records_skipped_total``: ``_schemas`` records read;
- ``eoslog_schema_registry_position``: the offset after the last record applied;
- ``eoslog_schema_registry_writer``: 1 on the elected writer; ``_ready``: 1 once ``_schemas`` was read.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

PREFIX = "eoslog_schema_registry"
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class RegistryMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(f"{PREFIX}_requests", "Requests answered.", ["method", "route", "status"],
                                registry=self.registry)
        self.latency = Histogram(f"{PREFIX}_request_seconds", "Time to answer a request.", ["method", "route"],
                                 buckets=BUCKETS, registry=self.registry)
        self.written = Counter(f"{PREFIX}_records_written", "Records this instance appended to _schemas.",
                               registry=self.registry)

    def watch(self, schema_registry) -> None:
        self.registry.register(_StateCollector(schema_registry))

    def records_written(self, count: int) -> None:
        self.written.inc(count)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector:
    def __init__(self, schema_registry) -> None:
        self.schema_registry = schema_registry

    def describe(self) -> list:
        return []  # built at scrape time

    def collect(self):
        store = self.schema_registry.store
        with store.lock:
            state = store.state
            subjects, schemas = len(state.subjects(False)), len(state.contents)
            applied, skipped, position = state.records_applied, state.records_skipped, store.position
        yield GaugeMetricFamily(f"{PREFIX}_subjects", "Live subjects.", value=subjects)
        yield GaugeMetricFamily(f"{PREFIX}_schemas", "Distinct schema ids.", value=schemas)
        yield CounterMetricFamily(f"{PREFIX}_records_applied", "_schemas records applied.", value=applied)
        yield CounterMetricFamily(f"{PREFIX}_records_skipped", "_schemas records skipped as unreadable.",
                                  value=skipped)
        yield GaugeMetricFamily(f"{PREFIX}_position", "The offset after the last _schemas record applied.",
                                value=position)
        yield GaugeMetricFamily(f"{PREFIX}_writer", "1 on the elected writer.",
                                value=1 if self.schema_registry.is_writer else 0)
        yield GaugeMetricFamily(f"{PREFIX}_ready", "1 once _schemas was read to its end.", value=int(store.ready))


class MetricsMiddleware:
    """ASGI middleware, innermost: times each request and labels it with the template of the route it
    matched (``unmatched`` for none), so subjects never become label values."""

    def __init__(self, app, metrics: RegistryMetrics, routes: list) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.routing import Match

        started = time.perf_counter()
        status = [500]

        async def sending(message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = next((r.path for r in self.routes if r.matches(scope)[0] is Match.FULL), "unmatched")
            self.metrics.observe(scope["method"], route, status[0], time.perf_counter() - started)
