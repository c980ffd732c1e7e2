"""Log cleaner: throughput, offset-map memory, and what a running cleaner does to produce latency.

    .venv/bin/python bench/cleaner_bench.py [--quick] [--dir DIR]

1. Throughput: one in-process pass over a log of keyed updates (100-byte values, lz4 and uncompressed),
   MB of input per second of worker time (transaction scan + offset map + rewrite + fsyncs), and the
   longest time the pass kept the event loop from running (a 1 ms ticker on the same loop).
2. Offset-map memory: bytes per key measured with tracemalloc, against Kafka's 24 (MD5 + offset).
3. Produce latency: a broker subprocess; one confluent-kafka producer sends acks=all messages one at a
   time to an uncompacted topic and times each delivery, first with the cleaner off, then while the
   cleaner compacts a large dirty topic on the same broker (its passes overlap the whole measurement).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from eoslog.log import Log, LogConfig
from eoslog.log.cleaner import CleanerTarget, LogCleaner
from eoslog.log.cleaner_offset_map import measured_bytes_per_entry
from eoslog.records import CompressionType, SimpleRecord, build_batch

MiB = 1024 * 1024


def fill(log: Log, megabytes: int, keys: int, compression: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    value = bytes(90)
    while log.size < megabytes * MiB:
        records = [SimpleRecord(f"key-{rnd.randrange(keys):08d}".encode(), value + rnd.randbytes(10))
                   for _ in range(100)]
        log.append(build_batch(records, compression=compression))
    log.roll()


async def _timed_pass(directory: str, log: Log) -> tuple[object, float]:
    target = CleanerTarget(("bench", 0), log, lambda: log.log_end_offset)
    cleaner = LogCleaner(directory, lambda: [target])
    worst = 0.0
    done = False

    async def ticker():
        nonlocal worst
        while not done:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - before - 0.001)

    task = asyncio.create_task(ticker())
    result = await cleaner.clean(target)
    done = True
    await task
    await cleaner.stop()
    return result, worst


def throughput(base: Path, megabytes: int) -> list[str]:
    rows = []
    for name, codec in (("none", CompressionType.NONE), ("lz4", CompressionType.LZ4)):
        directory = base / f"tp-{name}"
        log = Log.open(str(directory / "bench-0"), LogConfig(segment_bytes=8 * MiB, cleanup_policy=frozenset({"compact"}),
                                                            file_delete_delay_ms=0))
        fill(log, megabytes, keys=50_000, compression=codec)
        size = log.size
        result, worst_stall = asyncio.run(_timed_pass(str(directory), log))
        stats = result.stats
        rows.append(
            f"| {name} | {size / MiB:.0f} MB, {stats.records_read:,} records | {stats.elapsed_s:.2f} s | "
            f"{stats.bytes_read / MiB / stats.elapsed_s:.1f} MB/s | "
            f"{stats.records_read / stats.elapsed_s / 1000:.0f}k | {result.size_after / MiB:.1f} MB | "
            f"{worst_stall * 1000:.1f} ms |"
        )
        log.close()
    return rows


def memory() -> list[str]:
    return [f"| {k} B | {measured_bytes_per_entry(k):.0f} B | 24 B |" for k in (8, 16, 36, 64)]


def produce_latency(base: Path, dirty_mb: int, messages: int) -> list[str]:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    from eoslog.testing.process import BrokerProcess

    def latencies(bootstrap: str) -> list[float]:
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        out = []
        for i in range(messages):
            started = time.perf_counter()
            producer.produce("plain", value=b"x" * 100)
            producer.flush(10)
            out.append(time.perf_counter() - started)
        return out[messages // 10 :]  # the first ones include connecting

    def summary(name, values, note=""):
        values = sorted(values)
        p50, p99 = values[len(values) // 2], values[int(len(values) * 0.99)]
        return f"| {name} | {p50 * 1000:.2f} ms | {p99 * 1000:.2f} ms | {statistics.mean(values) * 1000:.2f} ms | {note} |"

    properties = {"log.cleaner.enable": "false", "log.cleaner.backoff.ms": "100"}
    rows = []
    with BrokerProcess(data_dir=base / "broker" / "data", properties=properties) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for name, config in (("plain", {}), ("dirty", {"cleanup.policy": "compact", "segment.bytes": str(MiB)})):
            admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                                             "batch.size": 256 * 1024})
        rnd = random.Random(3)
        for i in range(dirty_mb * MiB // 130):
            while True:
                try:
                    producer.produce("dirty", key=f"key-{rnd.randrange(50_000):08d}".encode(), value=rnd.randbytes(100))
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(120)
        rows.append(summary("cleaner off", latencies(broker.bootstrap)))
        broker.properties["log.cleaner.enable"] = "true"
        broker.restart(hard=False)
        cleaned_before = broker.log_tail(100_000).count("cleaned ")
        values = latencies(broker.bootstrap)
        tail = broker.log_tail(100_000)
        passes = tail.count("cleaned ") - cleaned_before
        rows.append(summary("cleaner compacting a dirty topic", values,
                            f"{passes} cleaning pass(es) finished during the {messages:,} sends"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dir")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cleaner-bench-", dir=args.dir))
    try:
        megabytes = 16 if args.quick else 64
        print("## cleaner throughput (one pass, in-process)")
        print("| input codec | log | worker time | throughput | records/s | after | worst loop stall |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for row in throughput(base, megabytes):
            print(row, flush=True)
        print("\n## offset map memory per key")
        print("| key size | eoslog (exact, full keys) | Kafka (MD5 digest + offset) |")
        print("|---|---:|---:|")
        for row in memory():
            print(row)
        print("\n## acks=all produce latency, one message at a time")
        print("| broker | p50 | p99 | mean | note |")
        print("|---|---:|---:|---:|---|")
        for row in produce_latency(base, 32 if args.quick else 96, 1_000 if args.quick else 3_000):
            print(row, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
