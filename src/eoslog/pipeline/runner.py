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

``avro=True`` runs a schema registry beside the broker (in this process, as ``eoslog schema-registry``
does) and produces the payments in Avro under ``<payments>-value``: the first half with version 1, and the
job reads them as typed columns. Once the first half is produced and the job has processed some of it,
the schema changes compatibly mid-run, in the order BACKWARD compatibility is for (readers first): the
query is stopped, version 2 (``currency`` added with a default) is registered, the query restarts from its
checkpoint with v2's columns, so the v1 payments it had not processed yet read under v2 with the default,
and then the second half is produced with v2. The verifier checks every ledger entry's currency too.
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
    avro: bool = False  # payments in Avro through a schema registry, with a schema change mid-run


@dataclass
class RunResult:
    report: Report
    exactly_once_groups: bool
    bootstrap: str
    seconds: float
    batches: list[dict] = field(default_factory=list)  # Spark's progress of every micro-batch with input
    faults: list[str] = field(default_factory=list)  # what was done to the cluster, as it happened
    spark_master: str = "local[*]"
    schema_events: list[str] = field(default_factory=list)  # the Avro run's schema change, as it happened
    v1_read_under_v2: int = 0  # v1 payments the query read after restarting with v2's columns

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


class AvroPayments:
    """The Avro run's registry (in this process, in front of the pipeline's broker) and serializers."""

    WAIT_S = 60.0

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        from eoslog.schema_registry.kafka_access import KafkaAccess
        from eoslog.schema_registry.server import RegistryServer

        self.topic, self.subject = topic, f"{topic}-value"
        self.server = RegistryServer(KafkaAccess(bootstrap), "127.0.0.1:0").start()
        self.url = self.server.url
        self.client = SchemaRegistryClient({"url": self.url})
        self.ids: dict[int, int] = {}

    def register(self, version: int, schema: dict) -> int:
        """Registers ``schema``, retrying while the registry has not elected its writer yet (50004)."""
        import json

        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        deadline = time.monotonic() + self.WAIT_S
        while True:
            try:
                self.ids[version] = self.client.register_schema(self.subject, Schema(json.dumps(schema), "AVRO"))
                return self.ids[version]
            except SchemaRegistryError as exc:
                if exc.error_code != 50004 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def serializer(self, schema: dict):
        import json

        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        serialize = AvroSerializer(self.client, json.dumps(schema), conf={"auto.register.schemas": False})
        context = SerializationContext(self.topic, MessageField.VALUE)
        return lambda t: serialize(generator.avro_value(t), context)

    def stop(self) -> None:
        self.server.stop()


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

        avro = AvroPayments(bootstrap, topics.payments) if settings.avro else None
        half = settings.transfers // 2 if avro is not None else None
        schema_events: list[str] = []
        v1_read_under_v2 = 0

        def generate(first: int = 0, count: int = settings.transfers, serialize=None) -> None:
            try:
                generator.produce(bootstrap, count, settings.accounts, settings.seed,
                                  progress=lambda n: state.__setitem__("generated", n), topic=topics.payments,
                                  first=first, serialize=serialize, v2_from=half)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                failure.append(exc)

        def start_query():
            return build_query(spark, bootstrap, str(workdir / "checkpoint"), settings.max_offsets_per_trigger,
                               require_exactly_once=groups, topics=topics,
                               registry_url=avro.url if avro is not None else None).start()

        if avro is not None:
            avro.register(1, generator.TRANSFER_V1)
            producer_thread = threading.Thread(target=generate, args=(0, half, avro.serializer(generator.TRANSFER_V1)),
                                               name="payments-generator-v1", daemon=True)
        else:
            producer_thread = threading.Thread(target=generate, name="payments-generator", daemon=True)
        spark = spark_session(master, config)
        producer_thread.start()
        query = start_query()
        state["phase"] = "streaming"
        batches: dict[int, dict] = {}
        deadline = time.monotonic() + settings.timeout_s

        def collect(q) -> None:
            for progress in q.recentProgress:
                if progress["numInputRows"]:
                    batches[progress["batchId"]] = progress

        try:
            while True:
                collect(query)
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
                if (avro is not None and 2 not in avro.ids and not producer_thread.is_alive()
                        and state["processed"] > 0):
                    # the schema change, readers first: stop, register v2, restart from the checkpoint
                    query.stop()
                    collect(query)
                    processed = sum(b["numInputRows"] for b in batches.values())
                    schema_events.append(_register_v2(avro, processed, half))
                    v1_read_under_v2 = half - processed
                    query = start_query()
                    state["phase"] = "streaming, schema v2"
                    producer_thread = threading.Thread(target=generate,
                                                       args=(half, settings.transfers,
                                                             avro.serializer(generator.TRANSFER_V2)),
                                                       name="payments-generator-v2", daemon=True)
                    producer_thread.start()
                if state["processed"] >= settings.transfers and not producer_thread.is_alive():
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"pipeline not done within {settings.timeout_s} s: {state}")
                time.sleep(0.5)
        finally:
            query.stop()
            if settings.spark_workers:
                spark.stop()  # its executors live on the standalone cluster, stopped next
            if avro is not None:
                avro.stop()
        if killer is not None:
            killer.join(180)
        state["phase"] = "verifying"
        if display is not None:
            display(state)
        report = verify(bootstrap, settings.transfers, settings.accounts, settings.seed, topics, v2_from=half)
        return RunResult(report, groups, bootstrap, time.monotonic() - started,
                         [batches[k] for k in sorted(batches)], killer.events if killer else [], master,
                         schema_events, v1_read_under_v2)


def _register_v2(avro: AvroPayments, processed: int, half: int) -> str:
    v2 = avro.register(2, generator.TRANSFER_V2)
    return (f"{avro.subject} v2 (id {v2}: currency added, default {generator.DEFAULT_CURRENCY!r}) registered "
            f"after {processed:,} of {half:,} v1 payments were processed; the query restarted from its "
            f"checkpoint with v2's columns, so the other {half - processed:,} v1 payments read under v2")
