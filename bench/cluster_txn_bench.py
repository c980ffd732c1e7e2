"""What exactly-once costs on a cluster, and how long transactions stop when their coordinator dies.

    .venv/bin/python bench/cluster_txn_bench.py [--transactions N] [--runs 3] [--write]

In one run, with confluent-kafka transactional producers (1 KiB values, 3 partitions, 1,000 records a
transaction, acks=all):
- transactional produce throughput on a 3-broker cluster (real ZooKeeper) into an RF=3 topic
  (min.insync.replicas=2) and into an RF=1 topic, and on the single-node broker (no ZooKeeper), each
  the median of alternating runs, as ratios. On the cluster ``__transaction_state`` is RF=3 for both
  topics: the RF=1 row isolates what replicating the data costs;
- coordinator failover: a producer commits small transactions back to back; SIGKILL the leader of its
  ``__transaction_state`` partition; time until ZooKeeper shows a new leader, and until the producer's
  next transaction is committed (aborting, or starting a new producer instance, as librdkafka asks).
``--write`` appends a section to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path

import confluent_kafka
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from eoslog.protocol.coordinator_partition import partition_for
from eoslog.testing.cluster import EmbeddedCluster
from eoslog.testing.process import BrokerProcess

VALUE = b"x" * 1024
PARTITIONS = 3
PER_TXN = 1000
SESSION_TIMEOUT_MS = 4000
STATE_PARTITIONS = 4  # transaction.state.log.num.partitions of the embedded cluster


def create(bootstrap: str, topic: str, factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"min.insync.replicas": "2"} if factor == 3 else {}
    admin.create_topics([NewTopic(topic, PARTITIONS, factor, config=configs)])[topic].result(60)


def producer(bootstrap: str, tid: str) -> confluent_kafka.Producer:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "acks": "all",
                                  "linger.ms": 5, "batch.size": 1_000_000, "retry.backoff.ms": 20,
                                  "topic.metadata.refresh.interval.ms": 500})
    p.init_transactions(120)
    return p


def throughput(bootstrap: str, topic: str, transactions: int, tid: str) -> float:
    """MB/s of committed 1 KiB records."""
    p = producer(bootstrap, tid)
    started = time.perf_counter()
    for _ in range(transactions):
        p.begin_transaction()
        for i in range(PER_TXN):
            while True:
                try:
                    p.produce(topic, VALUE, partition=i % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.01)
            p.poll(0)
        p.commit_transaction(60)
    seconds = time.perf_counter() - started
    return transactions * PER_TXN * len(VALUE) / seconds / 1e6


def commit_one(p: confluent_kafka.Producer, topic: str) -> None:
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, VALUE, partition=i % PARTITIONS)
    p.commit_transaction(10)


def coordinator_failover(cluster: EmbeddedCluster, topic: str, tid: str) -> tuple[float, float, int]:
    """Seconds from SIGKILL to a new leader in ZooKeeper and to the next committed transaction, and how
    many new producer instances it took."""
    p = producer(cluster.bootstrap, tid)
    commit_one(p, topic)
    index = partition_for(tid, STATE_PARTITIONS)
    state = cluster.state()
    victim, epoch = state.leader_of("__transaction_state", index), state.epoch_of("__transaction_state", index)
    elected: list[float] = []

    def watch_election() -> None:  # ZooKeeper polled beside the producer, which blocks in its calls
        cluster.wait_for(lambda s: s.epoch_of("__transaction_state", index) > epoch, 60, "new leader")
        elected.append(time.perf_counter() - killed)

    watcher = threading.Thread(target=watch_election, daemon=True)
    cluster.broker(victim).kill()
    killed = time.perf_counter()
    watcher.start()
    instances = 0
    while True:
        try:
            commit_one(p, topic)
            break
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort() or error.retriable():
                try:
                    p.abort_transaction(10)
                    continue
                except KafkaException:
                    pass
            instances += 1  # fatal, or the abort failed too: a new instance
            while True:
                try:
                    p = producer(cluster.bootstrap, tid)
                    break
                except KafkaException:
                    continue
    committed = time.perf_counter() - killed
    watcher.join(60)
    p.flush(10)
    cluster.broker(victim).start()
    cluster.wait_for(lambda s: victim in s.brokers and all(
        len(s.isr_of(t, i)) == len(r) for (t, i), r in s.replicas.items()), 120, "back in sync")
    return elected[0], committed, instances


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=40, help=f"per run, {PER_TXN} records each")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    results: dict[str, list[float]] = {"rf3": [], "rf1": [], "single": []}
    with tempfile.TemporaryDirectory() as base, EmbeddedCluster(
            Path(base) / "cluster", 3, session_timeout_ms=SESSION_TIMEOUT_MS) as cluster, BrokerProcess(
            data_dir=Path(base) / "single") as single:
        create(cluster.bootstrap, "rf3", 3)
        create(cluster.bootstrap, "rf1", 1)
        create(single.bootstrap, "single", 1)
        cluster.wait_for(lambda s: all(len(s.isr_of("rf3", i)) == 3 for i in range(PARTITIONS)), 60, "rf3 in sync")
        for target, bootstrap in (("rf3", cluster.bootstrap), ("single", single.bootstrap)):
            throughput(bootstrap, target, 5, f"warm-{target}")
        for run in range(args.runs):
            for target, bootstrap in (("rf1", cluster.bootstrap), ("rf3", cluster.bootstrap),
                                      ("single", single.bootstrap)):
                results[target].append(throughput(bootstrap, target, args.transactions, f"bench-{target}-{run}"))
                print(f"run {run}: {target} {results[target][-1]:.1f} MB/s", flush=True)
        failovers = []
        for n in range(3):
            failovers.append(coordinator_failover(cluster, "rf3", f"failover-{n}"))
            print(f"failover {n}: {failovers[-1]}", flush=True)
    m = {k: statistics.median(v) for k, v in results.items()}
    txns = {k: v * 1e6 / (PER_TXN * len(VALUE)) for k, v in m.items()}
    elected = statistics.median(f[0] for f in failovers)
    committed = statistics.median(f[1] for f in failovers)
    lines = [
        f"### Cluster: exactly-once cost and coordinator failover ({date.today()}, {platform.node()}, "
        f"{platform.processor() or platform.machine()}, 3 brokers + 1 ZooKeeper + 1 single-node broker on one "
        "2-core machine)",
        "",
        f"`.venv/bin/python bench/cluster_txn_bench.py --transactions {args.transactions} --runs {args.runs}`",
        "",
        f"Transactional produce, confluent-kafka, 1 KiB values, {PER_TXN} records a transaction over "
        f"{PARTITIONS} partitions, acks=all; median of {args.runs} alternating runs of {args.transactions} "
        "transactions:",
        "",
        "| where | MB/s | transactions/s | vs cluster RF=1 | vs single node |",
        "|---|---:|---:|---:|---:|",
        f"| cluster, topic RF=3, min.insync.replicas=2 | {m['rf3']:.1f} | {txns['rf3']:.1f} | "
        f"{m['rf3'] / m['rf1']:.2f}x | {m['rf3'] / m['single']:.2f}x |",
        f"| cluster, topic RF=1 (`__transaction_state` still RF=3) | {m['rf1']:.1f} | {txns['rf1']:.1f} | 1.00x | "
        f"{m['rf1'] / m['single']:.2f}x |",
        f"| single node, no ZooKeeper | {m['single']:.1f} | {txns['single']:.1f} | | 1.00x |",
        "",
        f"Coordinator failover (SIGKILL of the `__transaction_state` leader of the producer's id, "
        f"zookeeper.session.timeout.ms = {SESSION_TIMEOUT_MS}), median of 3: new leader in ZooKeeper after "
        f"{elected:.2f} s, next transaction committed after {committed:.2f} s "
        f"({committed * 1000 / SESSION_TIMEOUT_MS:.2f}x the session timeout). Runs (elected / committed / new "
        "producer instances): " + ", ".join(f"{e:.2f} / {c:.2f} s / {i}" for e, c, i in failovers),
        "",
    ]
    print("\n".join(lines))
    if args.write:
        path = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
        with path.open("a") as out:
            out.write("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
