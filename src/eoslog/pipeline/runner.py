"""Runs the whole pipeline: broker (unless given), topics, generator, Spark job, verification.

The generator produces in a background thread while the streaming query runs, so the live display
shows both moving. The query is stopped once it has taken in every generated payment; the verifier
then reads the outputs with read_committed.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from eoslog.pipeline import generator
from eoslog.pipeline.generator import Topics
from eoslog.pipeline.job import build_query
from eoslog.pipeline.verifier import Report, verify


@dataclass
class RunSettings:
    bootstrap: str | None = None
    transfers: int = 200_000
    accounts: int = 1_000
    seed: int = 7
    partitions: int = 2
    max_offsets_per_trigger: int = 50_000
    topic_prefix: str = ""
    master: str = "local[*]"
    workdir: Path | None = None
    timeout_s: float = 900.0


@dataclass
class RunResult:
    report: Report
    exactly_once_groups: bool
    bootstrap: str
    seconds: float
    batches: list[dict] = field(default_factory=list)  # Spark's progress of every micro-batch with input

    @property
    def input_rows(self) -> int:
        return sum(b["numInputRows"] for b in self.batches)

    def batch_latency_ms(self, q: float) -> float:
        durations = sorted(b["durationMs"]["triggerExecution"] for b in self.batches)
        if not durations:
            return 0.0
        if len(durations) == 1:
            return float(durations[0])
        return statistics.quantiles(durations, n=100, method="inclusive")[int(q * 100) - 1]


def spark_session(master: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import eoslog.spark

    spark = (SparkSession.builder.master(master).appName("eoslog-pipeline")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    eoslog.spark.register(spark)
    return spark


@contextlib.contextmanager
def _broker(bootstrap: str | None, workdir: Path):
    if bootstrap:
        yield bootstrap
        return
    from eoslog.testing.process import BrokerProcess

    with BrokerProcess(data_dir=workdir / "broker") as broker:
        yield broker.bootstrap


def _create_topics(bootstrap: str, topics: Topics, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    clash = [t for t in (topics.payments, topics.ledger, topics.rejected) if t in existing]
    if clash:
        raise click_error(f"topics {clash} already exist on {bootstrap}; pass --topic-prefix for a fresh run")
    wanted = [NewTopic(topics.payments, partitions, 1), NewTopic(topics.ledger, partitions, 1),
              NewTopic(topics.rejected, 1, 1)]
    for future in admin.create_topics(wanted).values():
        future.result(30)


def click_error(message: str) -> Exception:
    import click

    return click.ClickException(message)


def run(settings: RunSettings, display=None) -> RunResult:
    """``display(state: dict)`` is called about twice a second with the live figures."""
    from eoslog.spark.txn_group_client import broker_supports_txn_groups

    workdir = settings.workdir or Path(tempfile.mkdtemp(prefix="eoslog-pipeline-"))
    topics = Topics.with_prefix(settings.topic_prefix)
    started = time.monotonic()
    with _broker(settings.bootstrap, workdir) as bootstrap:
        _create_topics(bootstrap, topics, settings.partitions)
        groups = broker_supports_txn_groups(bootstrap)
        state = {"generated": 0, "processed": 0, "batches": 0, "total": settings.transfers, "phase": "starting Spark",
                 "rows_per_s": 0.0, "exactly_once_groups": groups}
        failure: list[BaseException] = []

        def generate() -> None:
            try:
                generator.produce(bootstrap, settings.transfers, settings.accounts, settings.seed,
                                  progress=lambda n: state.__setitem__("generated", n), topic=topics.payments)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                failure.append(exc)

        spark = spark_session(settings.master)
        producer_thread = threading.Thread(target=generate, name="payments-generator", daemon=True)
        producer_thread.start()
        query = build_query(spark, bootstrap, str(workdir / "checkpoint"), settings.max_offsets_per_trigger,
                            require_exactly_once=groups, topics=topics).start()
        state["phase"] = "streaming"
        batches: dict[int, dict] = {}
        deadline = time.monotonic() + settings.timeout_s
        try:
            while True:
                for progress in query.recentProgress:
                    if progress["numInputRows"]:
                        batches[progress["batchId"]] = progress
                state["processed"] = sum(b["numInputRows"] for b in batches.values())
                state["batches"] = len(batches)
                if batches:
                    last = batches[max(batches)]
                    state["rows_per_s"] = last.get("processedRowsPerSecond", 0.0)
                if display is not None:
                    display(state)
                if failure:
                    raise failure[0]
                if query.exception() is not None:
                    raise RuntimeError(f"the Spark query failed: {query.exception()}")
                if state["processed"] >= settings.transfers and not producer_thread.is_alive():
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"pipeline not done within {settings.timeout_s} s: {state}")
                time.sleep(0.5)
        finally:
            query.stop()
        state["phase"] = "verifying"
        if display is not None:
            display(state)
        report = verify(bootstrap, settings.transfers, settings.accounts, settings.seed, topics)
        return RunResult(report, groups, bootstrap, time.monotonic() - started,
                         [batches[k] for k in sorted(batches)])
