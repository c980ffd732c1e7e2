"""One verify run: start a broker behind the fault proxy, run worker processes (workload.py) while the
nemesis (faults.py) injects faults, heal, fence every transactional id, read every partition from the
start, check the history and plot it. With ``cluster`` = N, the broker is a cluster of N brokers on a
ZooKeeper the run starts, each behind its own fault proxy, and the nemesis is cluster_faults.py's; with
``net="namespaces"`` too, ZooKeeper, every broker and the clients run in network namespaces of their own
(faults/netns.py) and the nemesis is net_faults.py's, which cuts links by dropping packets.

Everything lands in ``out``: ``history.jsonl``, ``report.txt``, ``summary.json``, ``plot.png``,
``broker.log`` and ``clients.log`` (librdkafka's own logging), and the broker's data directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from eoslog.verify import runner
from eoslog.verify.checker import Report, check
from eoslog.verify.faults import (
    ALL_KINDS,
    CLIENT_KINDS,
    DROP_RATE,
    POWER_KINDS,
    REPLAY_KINDS,
    FaultWindow,
    Nemesis,
)
from eoslog.verify.history import HistoryWriter
from eoslog.verify.runner import WORKER_STOP_TIMEOUT_S
from eoslog.verify.workload import (
    CLIENT_TUNING,
    WATCHDOG_EXIT,
    decode_value,
    producer_config,
    skip_refused_batch,
)

FINAL_READ_TIMEOUT_S = 60.0


@dataclasses.dataclass
class VerifyOptions:
    duration: float = 60.0
    bootstrap: str | None = None  # an external broker: only client-side faults apply
    seed: int | None = None
    out: Path | None = None
    workers: int = 3
    partitions: int = 4
    abort_rate: float = 0.15
    think_ms: float = 5.0
    faults: tuple[str, ...] | None = None  # None: every kind that applies
    broker_properties: dict[str, str] = dataclasses.field(default_factory=dict)
    fault_seconds: tuple[float, float] = (1.0, 4.0)
    quiet_seconds: tuple[float, float] = (1.0, 3.0)
    drop_rate: float = DROP_RATE  # share of responses the proxy drops while proxy-drop holds
    cluster: int = 0  # N > 0: a cluster of N brokers on ZooKeeper instead of one broker
    # 2: the workers are workload_v2's KIP-890 part 2 producers (one broker only), and the default
    # faults include proxy-replay
    transaction_version: int = 1
    # With version 1: "eoslog" runs workload_v1's raw producer, which gives up on a request and goes on in
    # the same epoch (the known-bug check: it must find KAFKA-17754's late writes under proxy-replay)
    client: str = "confluent-kafka"
    net: str = "loopback"  # "namespaces": the cluster and the clients in network namespaces (cluster only)
    zookeeper_nodes: int = 1  # of the cluster's ZooKeeper: 1 or 3
    # Test-only: "late-end-txn", the known-bug check without chance (workload_v2.py and faults.py,
    # "forced"): one raw-client worker, one broker, faults ("proxy-replay-endtxn",); the run ends once
    # ``forced_replays`` replays each landed in an open transaction and that transaction ended.
    schedule: str | None = None
    forced_replays: int = 2


@dataclasses.dataclass
class VerifyResult:
    report: Report
    out: Path
    seed: int
    duration: float
    faults: dict[str, int]
    windows: list[FaultWindow]
    workers_started: int
    worker_exits: dict[str, int]
    final_read_complete: bool
    problems: list[str]  # what went wrong outside the history (nemesis, final read)
    plot_path: Path | None

    @property
    def valid(self) -> bool:
        return self.report.valid and not self.problems

    @property
    def history_path(self) -> Path:
        return self.out / "history.jsonl"

    def summary(self) -> dict:
        stats = self.report.stats
        return {
            "valid": self.valid, "seed": self.seed, "duration_s": round(self.duration, 1),
            "operations": stats["ops"], "committed": stats["committed"], "aborted": stats["aborted"],
            "indefinite": stats["indefinite"], "indefinite_seen_committed": stats["indefinite_visible"],
            "sends": stats["sends"], "values_read": stats["values_read"], "faults": self.faults,
            "faults_total": sum(self.faults.values()), "workers_started": self.workers_started,
            "worker_exits": self.worker_exits,
            "anomalies": self.report.anomalies, "errors": self.report.errors, "problems": self.problems,
            "final_read_complete": self.final_read_complete,
        }

    def render_text(self) -> str:
        faults = ", ".join(f"{kind} {count}" for kind, count in sorted(self.faults.items())) or "none"
        lines = [self.report.render_text(),
                 f"run: {self.duration:.0f} s, seed {self.seed}, faults {sum(self.faults.values())} ({faults})",
                 f"worker processes: started {self.workers_started}, ended "
                 + (", ".join(f"{how} {n}" for how, n in sorted(self.worker_exits.items())) or "-")]
        lines += [f"PROBLEM: {problem}" for problem in self.problems]
        lines.append(f"verdict: {'VALID' if self.valid else 'INVALID'}")
        return "\n".join(lines)


class WorkerPool:
    """The worker processes, one per slot, each reporting history lines on its stdout. A worker that
    dies is recorded as a crash (its transaction in flight becomes indefinite) and replaced, under a new
    process number, with the same slot and so the same transactional id. A workload's pool names its
    worker's command (``command``); queue_run.py's is one."""

    THREAD_PREFIX = "eoslog-verify-worker"

    def __init__(self, history: HistoryWriter, bootstrap: str, topic: str, options: VerifyOptions,
                 seed: int, clients_log: Path) -> None:
        self.history = history
        # Where a worker's ``schedule`` lines go (the forced schedule's nemesis), never into the history.
        self.on_schedule: Callable[[str, object], None] = lambda what, value: None
        self.bootstrap = bootstrap
        self.topic = topic
        self.options = options
        self.random = random.Random(seed)
        self.clients_log = clients_log
        self.next_process = 1
        self.slots: dict[int, tuple[int, subprocess.Popen, threading.Thread]] = {}
        self.stopping = False
        self.lock = threading.Lock()
        # How worker processes ended: "killed" (the nemesis), "watchdog" (a client call hung), "stopped"
        # (at the end of the run), "exit N" (anything else: a bug in the worker, see clients.log).
        self.exits: Counter[str] = Counter()

    @property
    def started(self) -> int:
        return self.next_process - 1

    def command(self, process: int, slot: int) -> list[str]:
        """The worker process for ``slot``, numbered ``process``: workload.py's."""
        command = [sys.executable, "-m", "eoslog.verify.workload", "--bootstrap", self.bootstrap,
                   "--process", str(process), "--slot", str(slot), "--topic", self.topic,
                   "--partitions", str(self.options.partitions), "--seed", str(self.random.getrandbits(32)),
                   "--abort-rate", str(self.options.abort_rate), "--think-ms", str(self.options.think_ms),
                   "--transaction-version", str(self.options.transaction_version), "--client", self.options.client]
        if self.options.schedule is not None:
            command += ["--schedule", self.options.schedule]
        return command

    def spawn(self, slot: int) -> None:
        process = self.next_process
        self.next_process += 1
        command = self.command(process, slot)
        with open(self.clients_log, "ab") as log:
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
        reader = threading.Thread(target=self._read, args=(process, child), daemon=True,
                                  name=f"{self.THREAD_PREFIX}-{process}")
        reader.start()
        self.slots[slot] = (process, child, reader)

    def _read(self, process: int, child: subprocess.Popen) -> None:
        assert child.stdout is not None
        for raw in child.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a line torn by SIGKILL: the worker had not acted on it yet
            if line["type"] == "schedule":
                self.on_schedule(line["f"], line.get("value"))
                continue
            self.history.record(process, line["type"], line["f"], line.get("value"), time=line.get("time"))
        code = child.wait()
        self.exits[{0: "stopped", -signal.SIGKILL: "killed", WATCHDOG_EXIT: "watchdog"}.get(code, f"exit {code}")] += 1
        if code != 0:
            self.history.record(process, "info", "crash")

    def supervise(self) -> None:
        """Replaces dead workers (called from the runner's loop)."""
        with self.lock:
            if self.stopping:
                return
            for slot in range(self.options.workers):
                entry = self.slots.get(slot)
                if entry is None:
                    self.spawn(slot)
                elif entry[1].poll() is not None:
                    entry[2].join(5)  # the crash line goes before the replacement's first line
                    self.spawn(slot)

    def kill_one(self) -> str | None:
        with self.lock:
            alive = [(slot, entry) for slot, entry in sorted(self.slots.items()) if entry[1].poll() is None]
            if not alive:
                return None
            slot, (process, child, _) = self.random.choice(alive)
            child.send_signal(signal.SIGKILL)
            return f"killed worker process {process} (slot {slot})"

    def stop(self, timeout: float = WORKER_STOP_TIMEOUT_S) -> int:
        """SIGTERM (finish the transaction in flight), then SIGKILL what is left; returns how many had
        to be killed."""
        with self.lock:
            self.stopping = True
        for _, child, _ in self.slots.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        killed = 0
        for _, child, reader in self.slots.values():
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                killed += 1
            reader.join(10)
        return killed


def fence_slots(bootstrap: str, slots: int, timeout: float = 60.0) -> list[str]:
    """InitProducerId for every worker's transactional id: aborts whatever transaction a killed worker
    left open, so the last stable offset reaches the high watermark before the final read."""
    problems = []
    for slot in range(slots):
        deadline = time.monotonic() + timeout
        while True:
            producer = Producer(producer_config(bootstrap, slot))
            try:
                producer.init_transactions(15)
                break
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    problems.append(f"could not fence transactional id of slot {slot}: {exc}")
                    break
                time.sleep(0.5)
            finally:
                producer.flush(0)
    return problems


def final_read(bootstrap: str, topic: str, partitions: int, history: HistoryWriter,
               timeout: float = FINAL_READ_TIMEOUT_S) -> tuple[bool, str]:
    """A fresh read_committed consumer reads every partition from offset 0 to its high watermark and
    records it as the final read. Returns (complete, description)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eoslog-verify-final-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **CLIENT_TUNING})
    try:
        ends = {}
        for p in range(partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
            ends[p] = high
        history.record("final", "invoke", "txn", [["poll"]], final=True)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        results: dict[str, list[list]] = {f"{topic}-{p}": [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        pending = {p for p, end in ends.items() if end > 0}
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.2):
                if message.error() is None:
                    results[f"{topic}-{message.partition()}"].append(
                        [message.offset(), decode_value(message.value())])
                else:
                    skip_refused_batch(consumer, topic, message)  # a bitflip's damaged batch
            positions = consumer.position([TopicPartition(topic, p) for p in sorted(pending)])
            pending -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
        history.record("final", "ok", "txn", [["poll", results]], final=True)
        read = sum(len(pairs) for pairs in results.values())
        if pending:
            return False, (f"final read stopped short of the high watermark on partitions {sorted(pending)} "
                           f"after {timeout:.0f} s (ends {ends}); {read} records read")
        return True, f"final read: {read} records up to high watermarks {ends}"
    finally:
        consumer.close()


def run_verify(options: VerifyOptions, log: Callable[[str], None] | None = None) -> VerifyResult:
    log = log or (lambda message: None)
    seed = options.seed if options.seed is not None else random.randrange(1 << 31)
    out = runner.prepare_out(options.out, "eoslog-verify-",
                      ("broker.log", "clients.log", "plot.png", "report.txt", "summary.json", "faults.json"))
    history_path = out / "history.jsonl"
    if options.schedule is not None and not (
            options.schedule == "late-end-txn" and options.workers == 1 and not options.cluster
            and options.bootstrap is None and options.faults == ("proxy-replay-endtxn",)
            and (options.transaction_version == 2 or options.client == "eoslog")):
        raise ValueError("schedule late-end-txn: one raw-client worker on one broker the run starts, "
                         "faults ('proxy-replay-endtxn',) alone")
    rng = random.Random(seed)
    began = time.monotonic()
    say = runner.stamped(log, began)
    broker = proxy = cluster = network = disk = None
    bootstrap = options.bootstrap  # an external broker's; the one the run starts once known
    inside = contextlib.ExitStack()  # the clients' namespace, for this thread and those it starts
    replication_factor, topic_config = 1, None
    disks: dict = {}  # broker id -> LazyMount, when a cluster run has power-loss kinds
    if options.cluster and options.net == "namespaces":
        from eoslog.faults.netns import Network
        from eoslog.tools.local.cluster import EmbeddedCluster
        from eoslog.verify.net_faults import default_kinds

        network = Network(options.zookeeper_nodes, options.cluster).create()
        inside.enter_context(network.entered(network.clients))
        cluster = EmbeddedCluster(out / "cluster", options.cluster, zookeeper_nodes=options.zookeeper_nodes,
                                  network=network, properties=options.broker_properties)
        kinds = options.faults if options.faults is not None else default_kinds(options.zookeeper_nodes)
        topic = "t"
        replication_factor, topic_config = runner.cluster_topic(options.cluster)
    elif options.cluster:
        from eoslog.tools.local.cluster import EmbeddedCluster
        from eoslog.verify.cluster_faults import CLUSTER_KINDS

        cluster = EmbeddedCluster(out / "cluster", options.cluster, proxied=True,
                                  zookeeper_nodes=options.zookeeper_nodes, properties=options.broker_properties)
        kinds = options.faults if options.faults is not None else CLUSTER_KINDS
        topic = "t"
        replication_factor, topic_config = runner.cluster_topic(options.cluster)
    elif options.bootstrap is None:
        default_kinds = ALL_KINDS + REPLAY_KINDS if options.transaction_version >= 2 else ALL_KINDS
        kinds = options.faults if options.faults is not None else default_kinds
        data_dir = out / "data"
        if set(kinds) & set(POWER_KINDS):
            # The broker's disk is LazyFS, which can lose what was not fsynced (faults/lazyfs.py); what
            # reached its "disk" is in out/disk, and the broker sees it through out/mnt.
            from eoslog.faults.lazyfs import LazyMount

            disk = LazyMount(out / "disk", out / "mnt").start()
            data_dir = out / "mnt" / "data"
        broker, proxy, bootstrap = runner.proxied_broker(data_dir, options.broker_properties, out / "broker.log",
                                                  proxy_seed=rng.getrandbits(32))
        topic = "t"
    else:
        kinds = options.faults if options.faults is not None else CLIENT_KINDS
        topic = f"eoslog-verify-{seed}-{int(time.time())}"
    problems: list[str] = []
    history = HistoryWriter(history_path)
    pool: WorkerPool | None = None
    nemesis: Nemesis | None = None
    final_complete = False
    try:
        if cluster is not None and set(kinds) & {"power-loss", "power-loss-all"}:
            # Each broker's data directory on a LazyFS of its own (what reached its "disk" is in
            # out/disks/broker-N); EmbeddedCluster puts it in cluster/broker-N/data.
            from eoslog.faults.lazyfs import LazyMount

            for broker_id in range(1, options.cluster + 1):
                disks[broker_id] = LazyMount(out / "disks" / f"broker-{broker_id}",
                                             out / "cluster" / f"broker-{broker_id}").start()
        bootstrap = runner.start_under_test(broker, cluster, options.cluster, bootstrap, say, namespaces=network is not None)
        runner.create_topic(bootstrap, topic, options.partitions, replication_factor, topic_config)
        pool = WorkerPool(history, bootstrap, topic, options, rng.getrandbits(32), out / "clients.log")
        common = runner.nemesis_options(pool, options, say)
        if cluster is not None:
            from eoslog.verify.cluster_faults import ClusterNemesis
            from eoslog.verify.net_faults import NetNemesis
            from eoslog.verify.workload import transactional_id

            nemesis = (NetNemesis if network is not None else ClusterNemesis)(kinds, seed=rng.getrandbits(32), cluster=cluster, topic=topic,
                                     transactional_ids=[transactional_id(s) for s in range(options.workers)],
                                     internal_partitions=int(cluster.properties["transaction.state.log.num.partitions"]),
                                     disks=disks, **common)
        else:
            nemesis = Nemesis(kinds, seed=rng.getrandbits(32), broker=broker, proxy=proxy, disk=disk, topic=topic,
                              forced_replays=options.forced_replays if options.schedule else None, **common)
            pool.on_schedule = nemesis.worker_said
        pool.supervise()
        say(f"{options.workers} workers on topic {topic} ({options.partitions} partitions); faults: "
            f"{', '.join(kinds) or 'none'}")
        problems += runner.fault_phase(pool, nemesis, options.duration, cluster, topic, options.partitions, say)
        problems += fence_slots(bootstrap, options.workers)
        final = final_read(bootstrap, topic, options.partitions, history)
        final_complete = final[0]
        problems += runner.checked(final, say)
    finally:
        problems += runner.stop_clients_and_broker(pool, history, broker, proxy)
        if disk is not None:
            disk.stop()
        if cluster is not None:
            cluster.stop()
        for mount in disks.values():
            mount.stop()
        inside.close()
        if network is not None:
            network.destroy()
    duration = time.monotonic() - began
    windows = list(nemesis.windows) if nemesis is not None else []
    damaged: dict[str, list[tuple[int, int]]] = {}
    for window in windows:
        for key, first, last in window.damaged:
            damaged.setdefault(key, []).append((first, last))
    report = check(history_path, damaged=damaged)
    plot_path: Path | None = out / "plot.png"
    try:
        from eoslog.verify.plot import plot

        plot(history_path, [w.as_tuple() for w in windows], plot_path,
             title=f"eoslog verify: seed {seed}, {duration:.0f} s")
    except ImportError:
        plot_path = None
        say("matplotlib is not installed: no plot")
    result = VerifyResult(report, out, seed, duration, dict(nemesis.counts) if nemesis else {}, windows,
                          pool.started if pool else 0, dict(pool.exits) if pool else {}, final_complete, problems, plot_path)
    runner.write_results(result, windows)
    return result


__all__ = ["VerifyOptions", "VerifyResult", "run_verify"]
