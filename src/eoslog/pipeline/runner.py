"""Runs the whole pipeline: broker (unless given), topics, generator, Spark job, verification.

The generator produces in a background thread while the streaming query runs, so the live display
shows both moving. The query is stopped once it has taken in every generated payment; the verifier
then reads the outputs with read_committed.

Where it runs: one embedded broker by default; ``cluster=N`` starts N brokers on a real ZooKeeper
(testing/cluster.py) with every topic replicated min(3, N) times and ``min.insync.replicas`` 2, and
``kill_broker_at=f`` SIGKILLs the leader of the ledger's first partition once a fraction f of the
payments is processed, restarting it once its partitions have new leaders. ``spark_workers=N`` runs
the job on a standalone Spark Master with N Workers (testing/spark_standalone.py) instead of
``local[*]``, so the source and the sink run in executor processes of their own.
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
    cluster: int = 0  # brokers on ZooKeeper; 0: one embedded broker (or ``bootstrap``)
    kill_broker_at: float | None = None  # with ``cluster``: the fraction processed when a broker is killed
    spark_workers: int = 0  # a standalone Spark cluster with this many Workers; 0: ``master``


@dataclass
class RunResult:
    report: Report
    exactly_once_groups: bool
    bootstrap: str
    seconds: float
    batches: list[dict] = field(default_factory=list)  # Spark's progress of every micro-batch with input
    faults: list[str] = field(default_factory=list)  # what was done to the cluster, as it happened
    spark_master: str = "local[*]"

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


def spark_session(master: str, config: dict[str, str] | None = None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import eoslog.spark
    from eoslog.spark.daemon import SESSION_CONFIG

    builder = (SparkSession.builder.master(master).appName("eoslog-pipeline")
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    settings = {**SESSION_CONFIG, **(config or {})}
    path_key = "spark.executorEnv.PYTHONPATH"
    if settings[path_key] != SESSION_CONFIG[path_key]:  # the caller's own entries first, then eoslog's
        settings[path_key] = os.pathsep.join([settings[path_key], SESSION_CONFIG[path_key]])
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    eoslog.spark.register(spark)
    return spark


@contextlib.contextmanager
def _brokers(settings: RunSettings, workdir: Path):
    """Yields (bootstrap, cluster or None)."""
    if settings.bootstrap:
        yield settings.bootstrap, None
        return
    if settings.cluster:
        from eoslog.tools.local.cluster import embedded_cluster

        with embedded_cluster(settings.cluster, workdir / "cluster",
                              properties={"min.insync.replicas": str(min(2, settings.cluster))}) as cluster:
            yield cluster.bootstrap, cluster
        return
    from eoslog.tools.local.process import BrokerProcess

    with BrokerProcess(data_dir=workdir / "broker") as broker:
        yield broker.bootstrap, None


@contextlib.contextmanager
def _spark_master(settings: RunSettings, workdir: Path):
    """Yields (master URL, extra session config)."""
    if not settings.spark_workers:
        yield settings.master, {}
        return
    from eoslog.tools.local.spark_standalone import SparkStandalone

    with SparkStandalone(workdir / "spark", workers=settings.spark_workers) as standalone:
        yield standalone.master_url, standalone.session_config()


class BrokerKiller:
    """SIGKILLs the leader of the ledger's first partition once, when asked, and restarts it after its
    partitions have new leaders, in a thread of its own so the live display keeps moving."""

    def __init__(self, cluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.events: list[str] = []
        self.failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="broker-killer", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"the killed broker did not come back within {timeout} s: {self.events}")
        if self.failure is not None:
            raise self.failure

    def _run(self) -> None:
        try:
            state = self.cluster.state()
            victim = state.leader_of(self.topic, 0)
            led = sorted(f"{t}-{p}" for (t, p), s in state.partitions.items() if s.leader == victim)
            started = time.monotonic()
            self.cluster.broker(victim).kill()
            self.events.append(f"SIGKILL broker {victim} (leader of {', '.join(led)})")
            self.cluster.wait_for(lambda s: victim not in s.brokers and all(
                s.leader_of(t, p) not in (victim, -1, None) for (t, p), r in s.replicas.items()
                if len(r) > 1 and victim in r), 60, f"new leaders for broker {victim}'s partitions")
            self.events.append(f"new leaders elected in {time.monotonic() - started:.1f} s")
            self.cluster.broker(victim).start()
            self.cluster.wait_for(lambda s: all(len(s.isr_of(t, p)) == len(r) for (t, p), r in s.replicas.items()),
                                  120, f"broker {victim} back in every ISR")
            self.events.append(f"broker {victim} restarted and back in sync {time.monotonic() - started:.1f} s "
                               "after the kill")
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.failure = exc


def _create_topics(bootstrap: str, topics: Topics, partitions: int, replication: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    clash = [t for t in (topics.payments, topics.ledger, topics.rejected) if t in existing]
    if clash:
        raise click_error(f"topics {clash} already exist on {bootstrap}; pass --topic-prefix for a fresh run")
    wanted = [NewTopic(topics.payments, partitions, replication), NewTopic(topics.ledger, partitions, replication),
              NewTopic(topics.rejected, 1, replication)]
    for future in admin.create_topics(wanted).values():
        future.result(30)


def click_error(message: str) -> Exception:
    import click

    return click.ClickException(message)


def run(settings: RunSettings, display=None) -> RunResult:
    """``display(state: dict)`` is called about twice a second with the live figures."""
    from eoslog.client.txn_groups import broker_supports_txn_groups

    workdir = settings.workdir or Path(tempfile.mkdtemp(prefix="eoslog-pipeline-"))
    topics = Topics.with_prefix(settings.topic_prefix)
    started = time.monotonic()
    if settings.bootstrap and settings.cluster:
        raise click_error("--bootstrap names a running broker; --cluster starts a cluster: pass one of them")
    if settings.kill_broker_at is not None and not settings.cluster:
        raise click_error("killing a broker needs a cluster (--cluster N)")
    with _brokers(settings, workdir) as (bootstrap, cluster), _spark_master(settings, workdir) as (master, config):
        _create_topics(bootstrap, topics, settings.partitions, min(3, settings.cluster) if cluster else 1)
        killer = BrokerKiller(cluster, topics.ledger) if settings.kill_broker_at is not None else None
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

        spark = spark_session(master, config)
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
                if (killer is not None and not killer.started
                        and state["processed"] >= settings.kill_broker_at * settings.transfers):
                    state["phase"] = "streaming, a broker killed"
                    killer.start()
                if query.exception() is not None:
                    raise RuntimeError(f"the Spark query failed: {query.exception()}")
                if state["processed"] >= settings.transfers and not producer_thread.is_alive():
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"pipeline not done within {settings.timeout_s} s: {state}")
                time.sleep(0.5)
        finally:
            query.stop()
            if settings.spark_workers:
                spark.stop()  # its executors live on the standalone cluster, stopped next
        if killer is not None:
            killer.join(180)
        state["phase"] = "verifying"
        if display is not None:
            display(state)
        report = verify(bootstrap, settings.transfers, settings.accounts, settings.seed, topics)
        return RunResult(report, groups, bootstrap, time.monotonic() - started,
                         [batches[k] for k in sorted(batches)], killer.events if killer else [], master)
