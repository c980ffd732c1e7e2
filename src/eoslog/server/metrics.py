"""The Prometheus endpoint (``--metrics-listen HOST:PORT`` / ``eoslog.metrics.listen``): wiring only.

The layers describe their own state as telemetry.Family values (the request path in
server/request_metrics.py, partitions in cluster/partition_metrics.py and cluster/replication_metrics.py,
coordinators in coordinator/*/metrics.py, the cleaner in log/cleaner_metrics.py); this module collects
them and serves them with prometheus_client's own HTTP server, which runs in its own thread.

Why a snapshot on the event loop: every value read here is owned by the loop's thread (dicts the loop
mutates, the producer-state table, group and transaction metadata), and iterating a dict while another
thread changes it can raise or see half an update. So a scrape hands one function to the loop with
``call_soon_threadsafe``, which builds every family in one go (one consistent moment, nothing else runs
meanwhile), and the metrics thread waits for it with a deadline. The loop pays for the scrape's
O(partitions + committed offsets) walk, a few milliseconds every scrape interval; the request path pays
only its counters. A loop too busy to answer within SNAPSHOT_TIMEOUT_S fails the scrape, which
Prometheus records as the target being down: the truth about a broker that stuck.

prometheus_client is imported only here, and this module only when the endpoint is configured.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from prometheus_client import start_http_server
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.utils import floatToGoString

from eoslog.cluster.partition_metrics import partition_families
from eoslog.log.checked_read import DAMAGED_BATCH_READS
from eoslog.log.flush_task import LOG_FLUSH_TIME
from eoslog.log.telemetry import COUNTER, GAUGE, HISTOGRAM, Family
from eoslog.server import gc_policy
from eoslog.server.request_metrics import RequestMetrics

if TYPE_CHECKING:
    from eoslog.server.broker import Broker

log = logging.getLogger(__name__)

SNAPSHOT_TIMEOUT_S = 5.0


class MetricsEndpoint:
    """Owns the HTTP server thread; built by the broker when ``eoslog.metrics.listen`` is set."""

    def __init__(self, broker: Broker, host: str, port: int) -> None:
        self.broker = broker
        self.host, self.port = host, port
        self.request_metrics = RequestMetrics()
        broker.dispatcher.request_metrics = self.request_metrics
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self.bound_port: int | None = None

    def start(self) -> None:
        """On the loop: binds HOST:PORT (port 0 picks one) and serves /metrics from a thread."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        gc_policy.install_pause_metrics()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        self._server, self._thread = start_http_server(self.port, addr=self.host, registry=registry)
        self.bound_port = self._server.server_port
        log.info("metrics on http://%s:%d/metrics", self.host, self.bound_port)

    async def stop(self) -> None:
        if self._server is not None:
            # shutdown() waits for the serving thread's next poll: off the loop, which a scrape may need.
            await asyncio.to_thread(self._server.shutdown)
            self._server.server_close()
            self._server = None

    def close(self) -> None:
        """A start that failed: stop serving at once (blocks up to the server's 0.5 s poll)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # ---- the snapshot, on the loop ------------------------------------------------------------------
    def snapshot(self) -> list[Family]:
        broker = self.broker
        now_ms = int(time.time() * 1000)
        families = self.request_metrics.families()
        connections = Family("kafka_server_socketservermetrics_connection_count", GAUGE,
                             "Open client connections, per listener", ("listener",))
        per_listener = dict.fromkeys((listener.name for listener in broker.listeners), 0)
        for connection in broker.dispatcher.connections:
            name = broker.listener_name_of(connection)
            per_listener[name] = per_listener.get(name, 0) + 1
        for name, count in per_listener.items():
            connections.add(count, name)
        flush = Family("kafka_log_logflushstats_logflushrateandtime_seconds", HISTOGRAM,
                       "fsync rounds of every log and how long each took (LogFlushRateAndTimeMs)")
        flush.add(LOG_FLUSH_TIME.value())
        damaged = Family("eoslog_log_damaged_batch_reads", COUNTER,
                         "Reads refused or cut short at a stored batch whose CRC fails, per log directory",
                         ("log",))
        for directory, count in list(DAMAGED_BATCH_READS.items()):
            damaged.add(count, os.path.basename(directory))
        families += [connections, flush, damaged, *_gc_families()]
        registry = broker.registry
        partitions = list(registry.partitions.values())
        families += partition_families(partitions, now_ms, broker.config.transaction_max_timeout_ms,
                                       self._coordinator_knows(), self._being_checked())
        if broker.coordinators is not None:
            from eoslog.coordinator.group.metrics import group_families

            def ends(topic: str, index: int) -> tuple[int, int] | None:
                partition = registry.partitions.get((topic, index))
                return None if partition is None else (partition.high_watermark, partition.last_stable_offset)

            families += group_families(broker.coordinators.groups.core, ends)
        if broker.share_partitions is not None:
            from eoslog.share.metrics import share_families

            def high_watermark(topic: str, index: int) -> int | None:
                partition = registry.partitions.get((topic, index))
                return None if partition is None else partition.high_watermark

            families += share_families(broker.share_partitions, high_watermark)
        if broker.coordinators is not None:
            from eoslog.coordinator.check_back.metrics import check_back_families
            from eoslog.coordinator.transaction.metrics import transaction_families

            families += transaction_families(broker.coordinators.transactions, now_ms)
            families += check_back_families(broker.coordinators.check_backs)
        if broker.log_cleaner is not None:
            from eoslog.log.cleaner_metrics import cleaner_families

            families += cleaner_families(broker.log_cleaner, now_ms)
        from eoslog.cluster.replication_metrics import replication_families, single_node_families

        families += single_node_families(len(partitions)) if broker.cluster is None else \
            replication_families(broker.cluster)
        return families

    def _coordinator_knows(self):
        """For hanging transactions: whether this broker's coordinator has a producer's transaction open
        over a partition; on a cluster a producer it does not know may belong to another coordinator."""
        coordinator = self.broker.coordinators.transactions if self.broker.coordinators is not None else None
        if coordinator is None:
            return lambda producer_id, topic, index: None
        from eoslog.coordinator.transaction.metrics import open_over

        open_txns = open_over(coordinator)
        unknown = None if self.broker.cluster is not None else False

        def knows(producer_id: int, topic: str, index: int) -> bool | None:
            over = open_txns.get(producer_id)
            return unknown if over is None else (topic, index) in over

        return knows

    def _being_checked(self):
        """For hanging transactions: producer ids whose check-back transaction this broker's coordinator is
        checking (another coordinator's are not known here)."""
        coordinator = self.broker.coordinators.transactions if self.broker.coordinators is not None else None
        if coordinator is None:
            return lambda producer_id: False
        from eoslog.coordinator.transaction.metrics import being_checked

        return being_checked(coordinator).__contains__

    def snapshot_from_any_thread(self) -> list[Family]:
        if threading.get_ident() == self._loop_thread:
            return self.snapshot()
        future: concurrent.futures.Future = concurrent.futures.Future()

        def take() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(self.snapshot())
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting scrape
                future.set_exception(exc)

        self._loop.call_soon_threadsafe(take)
        try:
            return future.result(timeout=SNAPSHOT_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            log.warning("metrics scrape: the event loop did not answer within %.0f s", SNAPSHOT_TIMEOUT_S)
            raise


def _gc_families() -> list[Family]:
    collections = Family("python_gc_collections", COUNTER,
                         "Collections of the cyclic garbage collector, per generation", ("generation",))
    pauses = Family("eoslog_gc_pause_seconds", HISTOGRAM,
                    "How long each collection stopped the process, per generation (server/gc_policy.py)",
                    ("generation",))
    for generation, stats in enumerate(gc.get_stats()):
        collections.add(stats["collections"], generation)
        pauses.add(gc_policy.PAUSES[generation].value(), generation)
    return [collections, pauses]


class _Collector:
    """prometheus_client's collector interface, called in the HTTP server's threads."""

    def __init__(self, endpoint: MetricsEndpoint) -> None:
        self.endpoint = endpoint

    def collect(self):
        for family in self.endpoint.snapshot_from_any_thread():
            yield _to_prometheus(family)


def _to_prometheus(family: Family):
    labels = list(family.labels)
    if family.kind == COUNTER:
        out = CounterMetricFamily(family.name, family.help, labels=labels)
    elif family.kind == GAUGE:
        out = GaugeMetricFamily(family.name, family.help, labels=labels)
    elif family.kind == HISTOGRAM:
        out = HistogramMetricFamily(family.name, family.help, labels=labels)
        for label_values, value in family.samples:
            out.add_metric([str(v) for v in label_values],
                           [(floatToGoString(bound), count) for bound, count in value.buckets], value.sum)
        return out
    else:
        raise ValueError(f"unknown metric kind {family.kind!r}")
    for label_values, value in family.samples:
        out.add_metric([str(v) for v in label_values], value)
    return out
