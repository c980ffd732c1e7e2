"""Broker CPU per produced record: what a fixed produce workload costs an `eoslog serve` process, in CPU
seconds per million records and CPU microseconds per record batch, read from /proc before and after.
On a shared machine wall-clock throughput swings by ±40 %; the CPU a fixed workload costs the broker
moves much less, so this is the figure to compare code changes by (docs/benchmarks.md, "Broker CPU per
produced record").

    PYTHONPATH=src .venv/bin/python bench/produce_cpu.py --trees /work/main,. --rounds 2 \\
        --cases 1:1024,1:100,8:1024,8:100,1000:1024 [--fsync-on-ack false] [--profile /tmp/prof]

Each case is PARTITIONS:SIZE (records of SIZE bytes, random 8-byte keys so every partition is written).
Producers are confluent-kafka processes (idempotent, acks=all, linger.ms 5, batch.size 1,000,000, as in
`eoslog bench`); --producers sets how many (1,000-partition cases use --many-producers). Each tree's
broker runs that tree's code (PYTHONPATH=<tree>/src); trees take turns within a round and the order
reverses every round (A B, B A, ...). Batches are counted on disk (record batch headers), so "per batch"
is per partition per Produce request. --profile records py-spy (raw, --nonblocking) over each measured
window into that directory. --settle S waits S seconds before each case: on a virtual machine that hands
freed memory back to its host, the page cache a case writes costs several times more CPU when its pages
are fresh than when the previous case freed them a moment before (bench/page_cache_cost.py), so compare
trees with a settle of 20 s or more.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "cpu"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(stat_path: str) -> tuple[float, float]:
    """(utime, stime) of a process or thread in seconds, from /proc/<pid>[/task/<tid>]/stat."""
    with open(stat_path) as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def count_batches(data_dir: Path) -> int:
    """Record batches on disk: one per partition per Produce request (plus the warm-up's)."""
    total = 0
    for path in data_dir.glob(f"{TOPIC}-*/*.log"):
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            position = 0
            while position + 12 <= size:
                file.seek(position + 8)
                length = struct.unpack(">i", file.read(4))[0]
                if length <= 0 or position + 12 + length > size:
                    break
                total += 1
                position += 12 + length
    return total


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def producer_job(bootstrap: str, count: int, size: int, rate: float, ready, go, done) -> None:
    import confluent_kafka

    errors = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(err.str())

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2_000_000, "on_delivery": on_delivery})
    producer.list_topics(TOPIC, timeout=30)
    producer.produce(TOPIC, b"warm-up", b"warm-up", partition=0)
    if producer.flush(30) != 0:
        raise SystemExit("warm-up not delivered")
    payloads = [os.urandom(size) for _ in range(64)]
    keys = [os.urandom(8) for _ in range(4096)]
    ready.put(os.getpid())
    go.wait()
    produce, poll = producer.produce, producer.poll
    started = time.monotonic()
    for i in range(count):
        if rate:
            wait = started + i / rate - time.monotonic()
            if wait > 0:
                poll(wait)
        while True:
            try:
                produce(TOPIC, payloads[i & 63], keys[i & 4095])
                break
            except BufferError:
                poll(0.001)
    if producer.flush(120) != 0 or errors:
        raise SystemExit(f"not delivered: {errors[:1]}")
    done.put(count)


def run_case(tree: Path, partitions: int, size: int, records: int, producers: int, rate: float, fsync: str,
             profile: Path | None, label: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix="eoslog-cpu-"))
    port = free_port()
    port_file = work / "port"
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    command = [sys.executable, "-m", "eoslog", "serve", "--data-dir", str(work / "data"), "--listen",
               f"127.0.0.1:{port}", "--port-file", str(port_file), "--set", f"log.eoslog.fsync.on.ack={fsync}"]
    with open(work / "broker.log", "wb") as broker_log:
        broker = subprocess.Popen(command, env=env, stdout=broker_log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if broker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"broker did not start: {(work / 'broker.log').read_text()[-2000:]}")
            time.sleep(0.05)
        bootstrap = f"127.0.0.1:{port}"
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(180)
        del admin
        context = multiprocessing.get_context("spawn")
        ready, done, go = context.Queue(), context.Queue(), context.Event()
        share = records // producers
        workers = [context.Process(target=producer_job, args=(bootstrap, share, size, rate / producers, ready, go, done))
                   for _ in range(producers)]
        for worker in workers:
            worker.start()
        for _ in workers:
            ready.get(timeout=120)
        batches_before = count_batches(work / "data")
        stat, loop_stat = f"/proc/{broker.pid}/stat", f"/proc/{broker.pid}/task/{broker.pid}/stat"
        cpu_before, loop_before, started = cpu_seconds(stat), cpu_seconds(loop_stat), time.monotonic()
        spy = None
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
            spy = subprocess.Popen([py_spy, "record", "-p", str(broker.pid), "-r", "200", "-f", "raw",
                                    "-o", str(profile / f"{label}.raw"), "--threads",
                                    *(os.environ.get("PY_SPY_ARGS", "--nonblocking").split())],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        go.set()
        for _ in workers:
            done.get(timeout=600)
        cpu_after, loop_after, wall = cpu_seconds(stat), cpu_seconds(loop_stat), time.monotonic() - started
        if spy is not None:
            spy.send_signal(2)
            spy.wait(30)
        for worker in workers:
            worker.join(30)
        batches = count_batches(work / "data") - batches_before
    finally:
        broker.terminate()
        broker.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    sent = share * producers
    user, system = cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1]
    cpu, loop = user + system, sum(loop_after) - sum(loop_before)
    return {"records": sent, "wall": wall, "cpu": cpu, "loop": loop, "batches": batches,
            "cpu_per_m": cpu / sent * 1e6, "loop_per_m": loop / sent * 1e6, "sys_per_m": system / sent * 1e6,
            "us_per_batch": cpu / max(batches, 1) * 1e6, "rate": sent / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default=".", help="comma-separated repository roots; each broker runs <tree>/src")
    parser.add_argument("--cases", default="1:1024,1:100,8:1024,8:100,1000:1024")
    parser.add_argument("--records", type=int, default=400_000, help="records per case (1 and 8 partitions)")
    parser.add_argument("--many-records", type=int, default=24_000, help="records per case at >= 100 partitions")
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--many-producers", type=int, default=10, help="producers at >= 100 partitions")
    parser.add_argument("--many-rate", type=float, default=3000.0,
                        help="records/s in all at >= 100 partitions (paced, so each request carries about one "
                             "record whatever the broker's speed; 0: as fast as possible)")
    parser.add_argument("--fsync-on-ack", default="false", choices=["true", "false"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--settle", type=float, default=0.0,
                        help="idle seconds before each case, so every case meets memory in the same state "
                             "(bench/page_cache_cost.py: on a VM that hands freed pages back to its host, a "
                             "case that starts right after another reuses that one's pages, warm)")
    args = parser.parse_args()
    trees = [Path(tree).resolve() for tree in args.trees.split(",")]
    cases = [tuple(int(x) for x in case.split(":")) for case in args.cases.split(",")]
    results: dict[tuple, list[dict]] = {}
    print(f"fsync.on.ack={args.fsync_on_ack}; {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    for round_number in range(args.rounds):
        for partitions, size in cases:
            many = partitions >= 100
            order = trees if round_number % 2 == 0 else trees[::-1]
            for tree in order:
                label = f"{tree.name}-{partitions}p-{size}B-r{round_number}"
                time.sleep(args.settle)
                result = run_case(tree, partitions, size, args.many_records if many else args.records,
                                  args.many_producers if many else args.producers,
                                  args.many_rate if many else 0.0, args.fsync_on_ack,
                                  args.profile, label)
                results.setdefault((partitions, size, tree), []).append(result)
                print(f"{label:40s} {result['rate']:9.0f} rec/s  broker CPU {result['cpu_per_m']:6.2f} s/M "
                      f"(loop thread {result['loop_per_m']:6.2f}, kernel {result['sys_per_m']:6.2f})  {result['us_per_batch']:7.0f} us/batch  "
                      f"{result['records'] / max(result['batches'], 1):7.1f} rec/batch", flush=True)
    print(f"\nmedians; {time.strftime('%H:%M:%S', time.gmtime())} UTC")
    print(f"{'case':14s} {'tree':24s} {'CPU s/M rec':>11s} {'loop s/M':>9s} {'kernel':>7s} {'us/batch':>9s} {'rec/s':>9s}")
    for partitions, size in cases:
        for tree in trees:
            rows = results[(partitions, size, tree)]
            med = {k: statistics.median(r[k] for r in rows) for k in ("cpu_per_m", "loop_per_m", "sys_per_m", "us_per_batch", "rate")}
            print(f"{partitions:>5d} p {size:>5d} B {tree.name!s:24s} {med['cpu_per_m']:11.2f} {med['loop_per_m']:9.2f} {med['sys_per_m']:7.2f} "
                  f"{med['us_per_batch']:9.0f} {med['rate']:9.0f}")


if __name__ == "__main__":
    main()
