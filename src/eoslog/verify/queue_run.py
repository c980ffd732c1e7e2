"""One queue verify run (``eoslog verify --workload queue``, docs/verification.md "The queue workload"):
a broker (or ``--cluster N`` brokers on ZooKeeper, each behind a fault proxy), producer and share
consumer processes (queue_workload.py) under the same nemesis as the exactly-once workload, then healing,
a final drain by one more share consumer of the same group until the broker says every record is done,
and queue_checker.py's judgement of the history.

With ``transactional_consumers`` (a share of the consumers, half by default), some consumers are
work-queue workers (queue_workload.py's txn-consumer): each poll's records become one output each on the
output topic ``out`` and their ACCEPTs, in one transaction. After the drain the runner reads ``out`` with
read_committed and records what it saw (an ``outputs`` line), for queue_txn_checker.py.

On a cluster the nemesis's coordinator faults aim at the group's group coordinator (its
``__consumer_offsets`` partition) and at the share coordinators of its share partitions (their
``__share_group_state`` partitions), so share state moves between brokers during the run.
"""

from __future__ import annotations

import base64
import json
import math
import random
import sys
import time
import uuid
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from eoslog.protocol.coordinator_partition import partition_for
from eoslog.verify import runner
from eoslog.verify.checker import Report
from eoslog.verify.faults import ALL_KINDS, FaultWindow, Nemesis
from eoslog.verify.history import HistoryWriter
from eoslog.verify.queue_checker import check
from eoslog.verify.queue_workload import choose, consume_once, consumer_config
from eoslog.verify.run import VerifyOptions, VerifyResult, WorkerPool
from eoslog.verify.workload import CLIENT_TUNING

LOCK_MS = 2000  # share.record.lock.duration.ms of the run's group: locks run out within the run
DELIVERY_COUNT_LIMIT = 5  # Kafka's default, set explicitly so the history can name it
SESSION_TIMEOUT_MS = 3000  # share.session.timeout.ms: a killed member's partitions move on soon
FINAL_DRAIN_TIMEOUT_S = 300.0  # a backlog of poison records takes 5 deliveries each
# The drain's ShareFetch MaxWaitMs. librdkafka 2.16's share consumer seems to wait for one broker's fetch
# after the other (two idle brokers: a redelivery took about two MaxWaits), and a broker with nothing to
# hand out rightly waits MaxWaitMs (500 ms by default). At the end of a drain most partitions are done:
# a released poison record came back only after the other brokers' waits, 1.1-1.6 s a delivery (the
# broker throttles it to one record at its last two deliveries), so its last deliveries alone took
# 30-40 s of a cluster run. There is nothing new to wait for in a drain.
DRAIN_FETCH_WAIT_MS = 100
STATE_PARTITIONS = 4  # __share_group_state partitions of a cluster run
OFFSETS_PARTITIONS = 4  # EmbeddedCluster's offsets.topic.num.partitions
GROUP = "eoslog-verify-queue"
OUTPUT_TOPIC = "out"
OUTPUT_READ_TIMEOUT_S = 60.0
# of a transactional worker's transactions, those it dies in (SIGKILL, after its ACCEPTs, before EndTxn),
# beside the nemesis's client-kills, which land anywhere
TXN_CRASH_RATE = 0.005
BROKER_PROPERTIES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.session.timeout.ms": "2000",
    # a killed worker's transaction is aborted soon after its timeout (queue_workload.TXN_TIMEOUT_MS)
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
CLUSTER_PROPERTIES = {
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
}


class QueueResult(VerifyResult):
    def summary(self) -> dict:
        s = self.report.stats
        return {"valid": self.valid, "workload": "queue", "seed": self.seed, "duration_s": round(self.duration, 1),
                "produced": s["produced"], "produced_indefinite": s["produced_indefinite"],
                "deliveries": s["deliveries"], "acks": dict(s["acks"]), "finished": dict(s["finished"]),
                "final": s["final"], "faults": self.faults, "faults_total": sum(self.faults.values()),
                "workers_started": self.workers_started, "worker_exits": self.worker_exits,
                "anomalies": self.report.anomalies, "examples": self.report.examples, "problems": self.problems,
                "final_drain_complete": self.final_read_complete,
                "transactions": dict(s.get("transactions", {})), "outputs_visible": s.get("outputs_visible", 0),
                "outputs_read": s.get("outputs_read", False)}


class QueueWorkerPool(WorkerPool):
    """Slots 0 .. producers-1 are producers, the next ``transactional`` slots transactional share consumers
    (one transactional id per slot), the rest plain share consumers of ``GROUP``."""

    THREAD_PREFIX = "eoslog-verify-queue"

    def __init__(self, *args, producers: int, transactional: int = 0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.producers = producers
        self.transactional = transactional
        self.spawned: set[int] = set()

    def command(self, process: int, slot: int) -> list[str]:
        """queue_workload.py in the slot's role."""
        role = ("producer" if slot < self.producers else "txn-consumer" if slot < self.producers + self.transactional
                else "consumer")
        command = [sys.executable, "-m", "eoslog.verify.queue_workload", "--bootstrap", self.bootstrap,
                   "--process", str(process), "--role", role, "--topic", self.topic,
                   "--partitions", str(self.options.partitions), "--group", GROUP,
                   "--seed", str(self.random.getrandbits(32)), "--think-ms", str(self.options.think_ms),
                   "--lock-ms", str(LOCK_MS)]
        if role == "txn-consumer":
            command += ["--output-topic", OUTPUT_TOPIC, "--transactional-id", f"eoslog-verify-queue-slot-{slot}",
                        "--abort-rate", str(self.options.abort_rate), "--crash-rate", str(TXN_CRASH_RATE)]
            if slot not in self.spawned:  # the first worker of each slot surely dies inside a transaction, early
                command += ["--crash-in", str(self.random.randint(10, 40))]
        self.spawned.add(slot)
        return command


def share_key(group: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group}:{base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip('=')}:{partition}"


def queue_nemesis_class():
    from eoslog.verify.cluster_faults import ClusterNemesis

    class QueueClusterNemesis(ClusterNemesis):
        """The cluster nemesis, its coordinator faults aimed at the share group's coordinators: the group
        coordinator, or the share coordinator of one of its share partitions."""

        def __init__(self, *args, share_keys: list[str], **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.share_keys = share_keys

        def _coordinator(self) -> tuple[int | None, str]:
            state = self._state()
            if self.random.random() < 0.3:
                leader = state.leader_of("__consumer_offsets", partition_for(GROUP, OFFSETS_PARTITIONS))
                what = f"group coordinator of {GROUP}"
            else:
                key = self.random.choice(self.share_keys)
                leader = state.leader_of("__share_group_state", partition_for(key, STATE_PARTITIONS))
                what = f"share coordinator of {key}"
            return (leader if leader is not None and leader > 0 else None), what

    return QueueClusterNemesis


def set_group_configs(bootstrap: str) -> None:
    configs = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS),
               "share.delivery.count.limit": str(DELIVERY_COUNT_LIMIT),
               "share.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
    resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_TUNING})
    admin.incremental_alter_configs([resource])[resource].result(30)


def share_start_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's share-partition start offsets, as its group coordinator reads them from the share
    coordinators (DescribeShareGroupOffsets); -1 where there is no state."""
    from eoslog.tools.brokers import GROUP as GROUP_KEY
    from eoslog.tools.brokers import Brokers
    from eoslog.tools.share_groups_cli import start_offsets

    brokers = Brokers(bootstrap, timeout=10)
    try:
        starts = start_offsets(brokers.coordinator(GROUP, GROUP_KEY).request, GROUP, {topic: list(range(partitions))})
    finally:
        brokers.close()
    return {p: starts.get((topic, p), (-1, -1))[0] for p in range(partitions)}


def final_drain(bootstrap: str, topic: str, partitions: int, history: HistoryWriter, seed: int,
                say: Callable[[str], None], timeout: float = FINAL_DRAIN_TIMEOUT_S) -> tuple[bool, str]:
    """One more member of the group, acknowledging as the workers do, until every share partition's start
    offset has reached its high watermark: the broker says every record is accepted or archived."""
    watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eoslog-verify-hw-{uuid.uuid4()}",
                           **CLIENT_TUNING})
    consumer = ShareConsumer({**consumer_config(bootstrap, GROUP), "fetch.wait.max.ms": DRAIN_FETCH_WAIT_MS})
    consumer.subscribe([topic])
    rng = random.Random(seed)

    def record(type_: str, f: str, value) -> None:
        history.record("final", type_, f, value, time=time.time())

    state: dict[int, tuple[int, int]] = {}
    try:
        ends = {p: watermarks.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        next_look = 0.0
        while time.monotonic() < deadline:
            # While records come there is work left: the start offsets (a client of its own, asking the
            # share coordinators) are looked at only after an empty poll, at most once a second.
            if consume_once(consumer, rng, choose_ack=choose, poll_s=0.3, record=record):
                continue
            if time.monotonic() < next_look:
                continue
            try:
                starts = share_start_offsets(bootstrap, topic, partitions)
            except Exception as exc:  # noqa: BLE001 - a coordinator still moving: look again
                say(f"final drain: start offsets not available yet ({exc})")
                continue
            finally:
                next_look = time.monotonic() + 1.0
            state = {p: (starts[p], ends[p]) for p in range(partitions)}
            if all(start >= end for start, end in state.values()):
                break
    finally:
        consumer.close()
        watermarks.close()
    history.record("runner", "ok", "final", {str(p): list(v) for p, v in state.items()}, time=time.time())
    done = bool(state) and all(start >= end for start, end in state.values())
    if done:
        return True, f"final drain: every share partition done (start offsets at the high watermarks {ends})"
    return False, f"final drain stopped after {timeout:.0f} s with (start, end) offsets {state}"


def read_outputs(bootstrap: str, partitions: int, history: HistoryWriter,
                 timeout: float = OUTPUT_READ_TIMEOUT_S) -> tuple[bool, str]:
    """The output topic from the start to its high watermark, read_committed (the position reaches the
    high watermark only once no transaction is open there); the ``outputs`` history line."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eoslog-verify-out-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, **CLIENT_TUNING})
    records: list[list] = []
    ends: dict[int, int] = {}
    done = False
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(OUTPUT_TOPIC, p), timeout=15)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(OUTPUT_TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not done:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                records.append([message.partition(), message.offset(), *json.loads(message.value())])
            positions = consumer.position([TopicPartition(OUTPUT_TOPIC, p) for p in range(partitions)])
            # (a partition without outputs has no position to reach)
            done = all(ends[tp.partition] == 0 or tp.offset >= ends[tp.partition] for tp in positions)
    finally:
        consumer.close()
    history.record("runner", "ok", "outputs", {"complete": done, "records": records}, time=time.time())
    if done:
        return True, f"output read: {len(records)} committed outputs up to the high watermarks {ends}"
    return False, f"output read stopped after {timeout:.0f} s short of the high watermarks {ends}"


def run_queue_verify(options: VerifyOptions, log: Callable[[str], None] | None = None, *,
                     transactional_consumers: float = 0.5) -> QueueResult:
    """``transactional_consumers``: the share of the consumers that are transactional workers (rounded up
    when positive)."""
    log = log or (lambda message: None)
    if options.bootstrap is not None or options.net != "loopback":
        raise ValueError("the queue workload starts its own broker or cluster on loopback")
    seed = options.seed if options.seed is not None else random.randrange(1 << 31)
    out = runner.prepare_out(options.out, "eoslog-verify-queue-",
                      ("broker.log", "clients.log", "report.txt", "summary.json", "faults.json"))
    history_path = out / "history.jsonl"
    rng = random.Random(seed)
    began = time.monotonic()
    say = runner.stamped(log, began)
    properties = {**BROKER_PROPERTIES, **options.broker_properties}
    broker = proxy = cluster = bootstrap = None
    topic, replication_factor, topic_config = "t", 1, None
    if options.cluster:
        from eoslog.tools.local.cluster import EmbeddedCluster
        from eoslog.verify.cluster_faults import CLUSTER_KINDS

        cluster = EmbeddedCluster(out / "cluster", options.cluster, proxied=True, zookeeper_nodes=options.zookeeper_nodes,
                                  properties={**CLUSTER_PROPERTIES, **properties} if options.cluster >= 3 else properties)
        kinds = options.faults if options.faults is not None else CLUSTER_KINDS
        replication_factor, topic_config = runner.cluster_topic(options.cluster)
    else:
        broker, proxy, bootstrap = runner.proxied_broker(out / "data", properties, out / "broker.log",
                                                  proxy_seed=rng.getrandbits(32))
        kinds = options.faults if options.faults is not None else ALL_KINDS
    problems: list[str] = []
    history = HistoryWriter(history_path)
    pool: QueueWorkerPool | None = None
    nemesis: Nemesis | None = None
    final_complete = False
    producers = max(1, options.workers // 3)
    consumers = max(0, options.workers - producers)
    transactional = min(consumers, math.ceil(consumers * transactional_consumers))
    try:
        bootstrap = runner.start_under_test(broker, cluster, options.cluster, bootstrap, say)
        runner.create_topic(bootstrap, topic, options.partitions, replication_factor, topic_config)
        if transactional:
            runner.create_topic(bootstrap, OUTPUT_TOPIC, options.partitions, replication_factor, topic_config)
        set_group_configs(bootstrap)
        history.record("runner", "ok", "config", {"delivery_count_limit": DELIVERY_COUNT_LIMIT,
                                                  "partitions": options.partitions, "lock_ms": LOCK_MS})
        pool = QueueWorkerPool(history, bootstrap, topic, options, rng.getrandbits(32), out / "clients.log",
                               producers=producers, transactional=transactional)
        common = runner.nemesis_options(pool, options, say)
        if cluster is not None:
            from eoslog.cluster.zk import layout

            data = cluster._client().get(layout.topic_path(topic))[0]
            topic_id = layout.TopicAssignment.decode(topic, data).topic_id
            nemesis = queue_nemesis_class()(
                kinds, seed=rng.getrandbits(32), cluster=cluster, topic=topic, transactional_ids=[GROUP],
                internal_partitions=OFFSETS_PARTITIONS,
                share_keys=[share_key(GROUP, topic_id, p) for p in range(options.partitions)], **common)
        else:
            nemesis = Nemesis(kinds, seed=rng.getrandbits(32), broker=broker, proxy=proxy, **common)
        pool.supervise()
        say(f"{producers} producer(s) and {consumers} share consumer(s) of group {GROUP}, {transactional} of them "
            f"transactional (output topic {OUTPUT_TOPIC}), on topic {topic} ({options.partitions} partitions); "
            f"faults: {', '.join(kinds) or 'none'}")
        problems += runner.fault_phase(pool, nemesis, options.duration, cluster, topic, options.partitions, say)
        drained = final_drain(bootstrap, topic, options.partitions, history, rng.getrandbits(32), say)
        final_complete = drained[0]
        problems += runner.checked(drained, say)
        if transactional:
            problems += runner.checked(read_outputs(bootstrap, options.partitions, history), say)
    finally:
        problems += runner.stop_clients_and_broker(pool, history, broker, proxy)
        if cluster is not None:
            cluster.stop()
    duration = time.monotonic() - began
    report: Report = check(history_path)
    windows: list[FaultWindow] = list(nemesis.windows) if nemesis is not None else []
    result = QueueResult(report, out, seed, duration, dict(nemesis.counts) if nemesis else {}, windows,
                         pool.started if pool else 0, dict(pool.exits) if pool else {}, final_complete, problems, None)
    runner.write_results(result, windows)
    return result


__all__ = ["QueueResult", "run_queue_verify"]
