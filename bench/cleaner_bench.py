"""Log cleaner: throughput, offset-map memory, and what a running cleaner does to produce latency.

    .venv/bin/python bench/cleaner_bench.py [--quick] [--dir DIR] [--latency-only] [--rounds N]

1. Throughput: one pass over a log of keyed updates (100-byte values, lz4 and uncompressed), in the child
   process (log.cleaner.process=true) and in the thread; MB of input per second of pass time (transaction
   scan + offset map + rewrite + fsyncs), and the longest time the pass kept the event loop from running
   (a 1 ms ticker on the same loop).
2. Offset-map memory: bytes per key measured with tracemalloc, against Kafka's 24 (MD5 + offset).
3. Produce latency: a broker subprocess; one confluent-kafka producer sends acks=all messages one at a
   time to an uncompacted topic and times each delivery, first with the cleaner off, then while the
   cleaner compacts a large dirty topic on the same broker (its passes overlap the whole measurement),
   in the thread and in the child process; the topic is dirtied again before each cleaner phase, and the
   phases alternate ``--rounds`` times.
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


async def _timed_pass(directory: str, log: Log, process: bool) -> tuple[object, float, float]:
    target = CleanerTarget(("bench", 0), log, lambda: log.log_end_offset)
    cleaner = LogCleaner(directory, lambda: [target], process=process)
    worst = 0.0
    done = False

    async def ticker():
        nonlocal worst
        while not done:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - before - 0.001)

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    result = await cleaner.clean(target)
    elapsed = time.perf_counter() - started
    done = True
    await task
    await cleaner.stop()
    return result, worst, elapsed


def throughput(base: Path, megabytes: int) -> list[str]:
    rows = []
    for name, codec in (("none", CompressionType.NONE), ("lz4", CompressionType.LZ4)):
        for mode, process in (("child process", True), ("thread", False)):
            directory = base / f"tp-{name}-{mode.split()[0]}"
            log = Log.open(str(directory / "bench-0"), LogConfig(segment_bytes=8 * MiB,
                                                                cleanup_policy=frozenset({"compact"}),
                                                                file_delete_delay_ms=0))
            fill(log, megabytes, keys=50_000, compression=codec)
            size = log.size
            result, worst_stall, elapsed = asyncio.run(_timed_pass(str(directory), log, process))
            stats = result.stats
            rows.append(
                f"| {name} | {mode} | {size / MiB:.0f} MB, {stats.records_read:,} records | {elapsed:.2f} s | "
                f"{stats.bytes_read / MiB / elapsed:.1f} MB/s | "
                f"{stats.records_read / elapsed / 1000:.0f}k | {result.size_after / MiB:.1f} MB | "
                f"{worst_stall * 1000:.1f} ms |"
            )
            log.close()
            shutil.rmtree(directory, ignore_errors=True)
    return rows


def memory() -> list[str]:
    return [f"| {k} B | {measured_bytes_per_entry(k):.0f} B | 24 B |" for k in (8, 16, 36, 64)]


def produce_latency(base: Path, dirty_mb: int, messages: int, rounds: int) -> list[str]:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    from eoslog.testing.process import BrokerProcess

    def latencies(bootstrap: str) -> tuple[list[float], float]:
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        out = []
        begun = time.perf_counter()
        for i in range(messages):
            started = time.perf_counter()
            producer.produce("plain", value=b"x" * 100)
            producer.flush(10)
            out.append(time.perf_counter() - started)
        return out[messages // 10 :], time.perf_counter() - begun  # the first ones include connecting

    def p99(values):
        return sorted(values)[int(len(values) * 0.99)]

    def summary(name, values, idle, note=""):
        values = sorted(values)
        p50 = values[len(values) // 2]
        return (f"| {name} | {p50 * 1000:.2f} ms | {p99(values) * 1000:.2f} ms | "
                f"{p99(values) / p99(idle):.1f}x | {statistics.mean(values) * 1000:.2f} ms | {note} |")

    def dirty(producer, seed):
        rnd = random.Random(seed)
        for i in range(dirty_mb * MiB // 130):
            while True:
                try:
                    producer.produce("dirty", key=f"key-{rnd.randrange(50_000):08d}".encode(),
                                     value=rnd.randbytes(100))
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(120)

    properties = {"log.cleaner.enable": "false", "log.cleaner.backoff.ms": "100"}
    rows = []
    with BrokerProcess(data_dir=base / "broker" / "data", properties=properties) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for name, config in (("plain", {}), ("dirty", {"cleanup.policy": "compact", "segment.bytes": str(MiB)})):
            admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)
        seed = 0
        for round_ in range(rounds):
            for mode, process in (("thread", "false"), ("child process", "true")):
                broker.properties["log.cleaner.enable"] = "false"
                broker.restart(hard=False)
                producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                                                     "batch.size": 256 * 1024})
                seed += 1
                dirty(producer, seed)
                del producer
                idle, _ = latencies(broker.bootstrap)
                rows.append(summary(f"cleaner off (round {round_ + 1})", idle, idle))
                broker.properties["log.cleaner.enable"] = "true"
                broker.properties["log.cleaner.process"] = process
                broker.restart(hard=False)
                cleaned_before = broker.log_tail(100_000).count("cleaned ")
                values, took = latencies(broker.bootstrap)
                tail = broker.log_tail(100_000)
                passes = tail.count("cleaned ") - cleaned_before
                deadline = time.monotonic() + 300
                while passes == 0 and time.monotonic() < deadline:  # the pass's own duration, for the note
                    time.sleep(0.2)
                    tail = broker.log_tail(100_000)
                    passes = tail.count("cleaned ") - cleaned_before
                first = [line for line in tail.splitlines() if "cleaned " in line][cleaned_before]
                pass_s = first.rsplit(",", 1)[-1].strip()
                rows.append(summary(f"cleaner in a {mode} (round {round_ + 1})", values, idle,
                                    f"{took:.1f} s of sends; the first pass took {pass_s}"))
                print(rows[-2], rows[-1], sep="\n", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dir")
    parser.add_argument("--latency-only", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cleaner-bench-", dir=args.dir))
    try:
        megabytes = 16 if args.quick else 64
        if not args.latency_only:
            print("## cleaner throughput (one pass)")
            print("| input codec | pass runs in | log | pass time | throughput | records/s | after | worst loop stall |")
            print("|---|---|---|---:|---:|---:|---:|---:|")
            for row in throughput(base, megabytes):
                print(row, flush=True)
            print("\n## offset map memory per key")
            print("| key size | eoslog (exact, full keys) | Kafka (MD5 digest + offset) |")
            print("|---|---:|---:|")
            for row in memory():
                print(row)
        print("\n## acks=all produce latency, one message at a time")
        print("| broker | p50 | p99 | p99 / idle p99 | mean | note |")
        print("|---|---:|---:|---:|---:|---|")
        rows = produce_latency(base, 32 if args.quick else 96, 1_000 if args.quick else 3_000, args.rounds)
        print("\n(all rows again)")
        for row in rows:
            print(row)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
