"""End-to-end Spark throughput and micro-batch latency through format("eoslog") on both sides.

    .venv/bin/python bench/pipeline_bench.py [--records 300000] [--sizes 100,1024] [--per-trigger 50000]
        [--writers eos-librdkafka,alo-librdkafka] [--rounds 1]

For each record size: a broker subprocess, RECORDS records pre-produced into a 2-partition topic, then a
streaming copy (eoslog source -> eoslog sink, exactly-once when the broker has transaction groups,
per-task transactions otherwise) run with trigger availableNow and maxOffsetsPerTrigger. A small
warm-up query runs first so Python worker start-up is not counted. Reports records/s over the whole
query (start to termination, commits included), records/s within the micro-batches (rows over the sum of
their triggerExecution: the steady rate, without query start and stop), the p50/p99 of triggerExecution,
and the CPU seconds each process kind spent during the query (broker, JVM, Spark's Python workers).

``--writers`` names sink variants, run in turn (``--rounds`` times, alternating) on the same input topic
in one broker and one Spark session, so their ratios come from one run: ``eos-<writer>`` is the
exactly-once sink (``eoslog.writer`` = native or librdkafka); ``alo-<writer>`` is the at-least-once
baseline ``eoslog.testing.at_least_once_sink``: the same rows written by the same kind of producer,
idempotent but without a transaction, with nothing to commit on the driver.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"v" * size
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, str(i).encode())
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def _descendants_cpu(broker_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of this process's descendants, by role."""
    tick = os.sysconf("SC_CLK_TCK")
    parents, cpu, role = {}, {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        pid = int(entry)
        parents[pid] = int(fields[1])
        # utime + stime, plus cutime + cstime: the CPU of children that exited and were waited for (Python
        # workers forked by pyspark's daemon come and go; without these their work would vanish).
        cpu[pid] = (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick
        role[pid] = ("broker" if pid == broker_pid else "jvm" if "java" in cmdline.split(" ", 1)[0]
                     else "driver" if pid == os.getpid() else "python workers")
    totals: dict[str, float] = {}
    for pid, seconds in cpu.items():
        ancestor = pid
        while ancestor not in (0, 1, os.getpid()) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == os.getpid() or pid == os.getpid():
            totals[role[pid]] = totals.get(role[pid], 0.0) + seconds
    return totals


def _copy(spark, bootstrap, source, target, per_trigger, require, variant="eos-librdkafka"):
    checkpoint = tempfile.mkdtemp(prefix="bench-ck-")
    guarantee, writer = variant.split("-", 1)
    query = (spark.readStream.format("eoslog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(per_trigger)).load().selectExpr("key", "value")
             .writeStream.format("eoslog" if guarantee == "eos" else "eoslog-alo")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", target)
             .option("requireExactlyOnce", require).option("eoslog.writer", writer)
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True))
    started = time.monotonic()
    q = query.start()
    q.awaitTermination()
    elapsed = time.monotonic() - started
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    return elapsed, batches


def run(records: int, size: int, per_trigger: int, conf: dict[str, str] | None = None,
        variants: list[str] = ("eos-librdkafka",), rounds: int = 1) -> list[dict]:
    from confluent_kafka.admin import AdminClient, NewTopic

    from eoslog.client.txn_groups import broker_supports_txn_groups
    from eoslog.pipeline.runner import spark_session
    from eoslog.testing.at_least_once_sink import AtLeastOnceSource
    from eoslog.testing.process import BrokerProcess

    results = []
    with BrokerProcess() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        outputs = [f"out-{r}-{v}" for r in range(rounds) for v in variants]
        warm = [f"warm-out-{v}" for v in variants]
        for topic in ("warm-in", "in", *warm, *outputs):
            admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        groups = broker_supports_txn_groups(broker.bootstrap)
        require = "true" if groups else "false"
        spark = spark_session("local[2]")
        spark.dataSource.register(AtLeastOnceSource)
        for name, value in (conf or {}).items():
            spark.conf.set(name, value)
        _produce(broker.bootstrap, "warm-in", 20_000, size)
        for variant, target in zip(variants, warm):
            _copy(spark, broker.bootstrap, "warm-in", target, per_trigger, require, variant)
        _produce(broker.bootstrap, "in", records, size)
        for round_ in range(rounds):
            for variant in variants:
                before = _descendants_cpu(broker.process.pid)
                elapsed, batches = _copy(spark, broker.bootstrap, "in", f"out-{round_}-{variant}", per_trigger,
                                         require, variant)
                after = _descendants_cpu(broker.process.pid)
                result = _result(size, elapsed, batches, before, after, variant, groups)
                print(json.dumps(result), flush=True)
                results.append(result)
        spark.stop()
    return results


def _result(size, elapsed, batches, before, after, variant, groups) -> dict:
    rows = sum(b["numInputRows"] for b in batches)
    durations = sorted(b["durationMs"]["triggerExecution"] for b in batches)
    phases = {name: sum(b["durationMs"].get(name, 0) for b in batches)
              for name in ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")}
    q = statistics.quantiles(durations, n=100, method="inclusive") if len(durations) > 1 else durations * 99
    mode = "transaction groups" if groups else "per-task transactions"
    return {"variant": variant, "record_bytes": size, "records": rows, "seconds": round(elapsed, 2),
            "records_per_s": round(rows / elapsed),
            "in_batches_records_per_s": round(rows * 1000 / max(sum(durations), 1)),
            "mb_per_s": round(rows * size / elapsed / 1e6, 1),
            "batches": len(batches), "batch_ms_total": sum(durations), "phase_ms_total": phases,
            "batch_p50_ms": round(q[49]), "batch_p99_ms": round(q[98]),
            "sink_mode": mode if variant.startswith("eos") else "at-least-once",
            "cpu_s": {k: round(after[k] - before.get(k, 0.0), 2) for k in sorted(after)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--per-trigger", type=int, default=50_000)
    parser.add_argument("--conf", action="append", default=[], help="a Spark SQL setting, name=value")
    parser.add_argument("--writers", default="eos-librdkafka",
                        help="comma-separated sink variants: eos-native, eos-librdkafka, alo-native, alo-librdkafka")
    parser.add_argument("--rounds", type=int, default=1, help="how many times to alternate the variants")
    args = parser.parse_args()
    conf = dict(item.split("=", 1) for item in args.conf)
    variants = args.writers.split(",")
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        results += run(args.records, size, args.per_trigger, conf, variants, args.rounds)
    print("\n| variant | record | records | records/s | in batches | MB/s | batches | batch p50 | batch p99 | CPU s "
          "(Python workers / JVM / broker) | sink |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in results:
        cpu = r["cpu_s"]
        print(f"| {r['variant']} | {r['record_bytes']} B | {r['records']:,} | {r['records_per_s']:,} | "
              f"{r['in_batches_records_per_s']:,} | {r['mb_per_s']} | {r['batches']} | {r['batch_p50_ms']} ms | "
              f"{r['batch_p99_ms']} ms | {cpu.get('python workers', 0)} / {cpu.get('jvm', 0)} / {cpu.get('broker', 0)} | "
              f"{r['sink_mode']} |")


if __name__ == "__main__":
    main()
