"""What replication costs, and how long a leader failover takes, on a local 3-broker cluster.

    .venv/bin/python bench/cluster_bench.py [--messages N] [--runs 3] [--write]

In one run, against one cluster (real ZooKeeper, three `eoslog serve` processes, confluent-kafka):
- produce throughput, 1 KiB values, idempotent acks=all, 1 partition: RF=3 (min.insync.replicas=2) vs
  RF=1, medians of alternating runs, as a ratio;
- per-message produce latency p50/p99 at a modest fixed rate, RF=3 vs RF=1;
- leader failover: SIGKILL the leader of an RF=3 partition, time until ZooKeeper shows a new leader
  and until a producer's next acks=all write is acknowledged, against zookeeper.session.timeout.ms.
``--write`` appends a section to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from eoslog.testing.cluster import EmbeddedCluster

VALUE = b"x" * 1024
SESSION_TIMEOUT_MS = 4000


def create(cluster: EmbeddedCluster, topic: str, factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    configs = {"min.insync.replicas": "2"} if factor == 3 else {}
    admin.create_topics([NewTopic(topic, 1, factor, config=configs)])[topic].result(60)
    cluster.wait_for(lambda s: len(s.isr_of(topic, 0)) == factor, 60, f"{topic} in sync")


def throughput(bootstrap: str, topic: str, count: int) -> float:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                         "acks": "all", "linger.ms": 5, "batch.size": 1_000_000})
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(120) == 0
    return count * len(VALUE) / (time.perf_counter() - started) / 1e6


def latencies(bootstrap: str, topic: str, count: int, rate: int) -> tuple[float, float]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                         "acks": "all", "linger.ms": 0})
    producer.produce(topic, VALUE, partition=0)
    producer.flush(30)  # connections, metadata and the producer id first: not part of the latency
    samples: list[float] = []
    for _ in range(count):
        sent = time.perf_counter()
        producer.produce(topic, VALUE, partition=0,
                         on_delivery=lambda err, msg, sent=sent: samples.append(time.perf_counter() - sent))
        producer.poll(0)
        time.sleep(max(0.0, sent + 1 / rate - time.perf_counter()))
    producer.flush(60)
    samples.sort()
    return samples[len(samples) // 2] * 1000, samples[int(len(samples) * 0.99)] * 1000


def failover(cluster: EmbeddedCluster, topic: str) -> tuple[float, float]:
    state = cluster.state()
    victim, epoch = state.leader_of(topic, 0), state.epoch_of(topic, 0)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                         "acks": "all", "linger.ms": 0, "retry.backoff.ms": 20,
                                         "topic.metadata.refresh.interval.ms": 200})
    producer.produce(topic, b"warm", partition=0)
    producer.flush(30)
    cluster.broker(victim).kill()
    killed = time.perf_counter()
    cluster.wait_for(lambda s: s.epoch_of(topic, 0) > epoch and s.leader_of(topic, 0) not in (-1, victim), 60,
                     "new leader")
    elected = time.perf_counter() - killed
    done = []
    producer.produce(topic, b"after", partition=0, on_delivery=lambda err, msg: done.append(err))
    producer.flush(60)
    acked = time.perf_counter() - killed
    assert done == [None], done
    cluster.broker(victim).start()
    return elected, acked


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as base, EmbeddedCluster(
            Path(base), 3, session_timeout_ms=SESSION_TIMEOUT_MS) as cluster:
        create(cluster, "rf3", 3)
        create(cluster, "rf1", 1)
        throughput(cluster.bootstrap, "rf3", 5000)  # warm-up
        rf3, rf1 = [], []
        for _ in range(args.runs):
            rf1.append(throughput(cluster.bootstrap, "rf1", args.messages))
            rf3.append(throughput(cluster.bootstrap, "rf3", args.messages))
        lat3 = latencies(cluster.bootstrap, "rf3", 3000, 500)
        lat1 = latencies(cluster.bootstrap, "rf1", 3000, 500)
        failovers = [failover(cluster, "rf3") for _ in range(3)]
    m3, m1 = statistics.median(rf3), statistics.median(rf1)
    elected = statistics.median(f[0] for f in failovers)
    acked = statistics.median(f[1] for f in failovers)
    lines = [
        f"### Cluster: replication cost and failover ({date.today()}, {platform.node()}, "
        f"{platform.processor() or platform.machine()}, 3 brokers + 1 ZooKeeper on one 2-core machine)",
        "",
        f"`.venv/bin/python bench/cluster_bench.py --messages {args.messages} --runs {args.runs}`",
        "",
        "| measurement | RF=3, min.insync=2 | RF=1 | ratio |",
        "|---|---:|---:|---:|",
        f"| produce 1 KiB, idempotent acks=all, 1 partition (MB/s, median of {args.runs}) | {m3:.1f} | {m1:.1f} | "
        f"{m3 / m1:.2f}x |",
        f"| latency at 500 msg/s, p50 / p99 (ms) | {lat3[0]:.1f} / {lat3[1]:.1f} | {lat1[0]:.1f} / {lat1[1]:.1f} | |",
        "",
        f"Leader failover after SIGKILL (zookeeper.session.timeout.ms = {SESSION_TIMEOUT_MS}), median of 3: "
        f"new leader in ZooKeeper after {elected:.2f} s, next acks=all write acknowledged after {acked:.2f} s "
        f"({acked * 1000 / SESSION_TIMEOUT_MS:.2f}x the session timeout). Runs: "
        + ", ".join(f"{e:.2f}/{a:.2f} s" for e, a in failovers),
        "",
    ]
    print("\n".join(lines))
    if args.write:
        path = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
        with path.open("a") as out:
            out.write("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
