"""Many partitions and many clients: 1,000 partitions vs 8, 50 producers + 50 consumers (issue 16, target 3).

    .venv/bin/python bench/many_partitions_bench.py [--quick] [--rounds 1] [--size 1024]
        [--seconds 5] [--paced-rate 2000] [--procs 5] [--per-proc 10] [--set NAME=VALUE]
        [--producer NAME=VALUE] [--keys random|none] [--bootstrap HOST:PORT --broker-pid PID] [--tansu]

One `eoslog serve` subprocess (unless --bootstrap names a running one) and, per round, a fresh topic with
1,000 partitions and one with 8. Per topic, with the same client counts, the rounds alternating the order
(8 then 1000, then 1000 then 8, ...):

1. produce: PROCS worker processes x PER_PROC confluent-kafka producers (idempotent, acks=all) produce as
   fast as they can for SECONDS: msgs/s and MB/s. With ``--keys random`` (the default) every message has a
   random key, so a producer's messages spread over every partition at once; with ``--keys none`` they have
   none, and librdkafka's sticky partitioner (Kafka's default for keyless records, KIP-480; the
   OpenMessaging Benchmark's default key distribution) fills one partition's batch at a time, moving on
   every ``sticky.partitioning.linger.ms``;
2. consume: PROCS x PER_PROC consumers in one fresh group (read_committed, auto commit) drain that backlog:
   msgs/s from the first to the last message received (group joining not counted; it is printed apart);
3. paced: with the consumers caught up, the producers send PACED_RATE msgs/s in total for SECONDS:
   produce-to-delivery p50/p99 and end-to-end (send time in the value to receive time) p50/p99, and the
   broker's own Produce time (decoded to answered, from its Prometheus histogram: the upper bound of the
   bucket holding p50/p99), which tells the broker's share of a delivery latency from the clients', and
   likewise its log flushes (fsync or syncfs rounds, per log covered).

The broker's CPU seconds, the seconds its garbage collector stopped it (eoslog_gc_pause_seconds, over the
three phases) and its peak RSS are read for each topic's phases. Prints one table and the 1000/8 ratios.
librdkafka does its I/O in its own threads, so one Python process drives many clients.

``--tansu`` runs the same against Tansu with in-memory storage (the Rust broker `eoslog bench
--compare-tansu` uses) instead of eoslog: what 1,000 partitions cost these clients on a broker that
neither writes files nor runs Python (librdkafka's mock cluster would be the other candidate, but it does
not take CreateTopics).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import resource
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

HEADER = struct.Struct(">qB")  # send time (ns since the epoch), 1 if from the paced phase
TICK = os.sysconf("SC_CLK_TCK")


# ---- worker processes (spawned: librdkafka threads and fork do not mix) ----------------------------------

def _producer_worker(bootstrap, topic, count, size, seconds, rate, paced, out, overrides, keyed):
    from confluent_kafka import Producer

    delivered = [0]
    failed = [0]
    latencies: list[float] = []
    last = [0.0]

    def on_delivery(err, msg, sent=None):
        if err is not None:
            failed[0] += 1
            return
        delivered[0] += 1
        now = time.perf_counter()
        last[0] = now
        if sent is not None:
            latencies.append(now - sent)

    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
              "linger.ms": 5, "queue.buffering.max.kbytes": 4096, "on_delivery": on_delivery}
    config.update(overrides)
    producers = [Producer(config) for _ in range(count)]
    rng = random.Random(os.getpid())
    key = (lambda: b"%d" % rng.getrandbits(48)) if keyed else (lambda: None)
    pad = b"v" * max(size - HEADER.size, 0)
    flag = 1 if paced else 0
    for p in producers:  # metadata first, so start-up is not measured
        p.list_topics(topic, timeout=30)
    out.put(("ready", None))
    started = time.perf_counter()
    end = started + seconds
    sent_count = 0
    if paced:
        interval = count / rate if rate > 0 else 0  # each producer sends rate/count msgs/s
        next_at = started
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            if now < next_at:
                time.sleep(min(next_at - now, 0.002))
                for p in producers:
                    p.poll(0)
                continue
            next_at += interval
            for p in producers:
                sent = time.perf_counter()
                value = HEADER.pack(time.time_ns(), flag) + pad
                p.produce(topic, value, key(),
                          on_delivery=lambda err, msg, sent=sent: on_delivery(err, msg, sent))
                sent_count += 1
                p.poll(0)
    else:
        while time.perf_counter() < end:
            for p in producers:
                for _ in range(50):
                    value = HEADER.pack(time.time_ns(), flag) + pad
                    try:
                        p.produce(topic, value, key())
                        sent_count += 1
                    except BufferError:
                        p.poll(0.005)
                        break
                p.poll(0)
    for p in producers:
        p.flush(120)
    out.put(("done", {"delivered": delivered[0], "failed": failed[0], "started": started, "last": last[0],
                      "latencies": latencies, "sent": sent_count}))


def _consumer_worker(bootstrap, topic, group, count, counter, first, last, stop, out):
    from confluent_kafka import Consumer

    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest", "enable.auto.commit": True,
                           "auto.commit.interval.ms": 1000, "session.timeout.ms": 30000,
                           "enable.partition.eof": False}) for _ in range(count)]
    for c in consumers:
        c.subscribe([topic])
    e2e: list[float] = []
    seen = 0
    first_at = 0.0
    while not stop.is_set():
        got = 0
        for c in consumers:
            for msg in c.consume(num_messages=500, timeout=0):
                if msg.error() is not None:
                    continue
                got += 1
                sent_ns, paced = HEADER.unpack_from(msg.value())
                if paced:
                    e2e.append((time.time_ns() - sent_ns) / 1e9)
        if got:
            now = time.perf_counter()
            if not first_at:
                first_at = now
                first.value = now
            seen += got
            counter.value = seen
            last.value = now
        else:
            time.sleep(0.002)
    for c in consumers:
        c.close()
    out.put(e2e)


# ---- broker measurements ---------------------------------------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class BrokerWatch:
    """CPU seconds and peak RSS of the broker over one `with` block (RSS sampled every 100 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self):
        self.cpu0 = _cpu_seconds(self.pid)
        self.t0 = time.perf_counter()
        self.peak = _rss_mib(self.pid)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(0.1):
            self.peak = max(self.peak, _rss_mib(self.pid))

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.cpu = _cpu_seconds(self.pid) - self.cpu0
        self.wall = time.perf_counter() - self.t0


# ---- one topic -------------------------------------------------------------------------------------------

def scrape_histogram(metrics_port, name, labels=None):
    """One of the broker's cumulative histograms (e.g. Produce's TotalTime: seconds from a request decoded
    to its response ready): {upper bound: count}, or None when the broker serves no metrics."""
    if not metrics_port:
        return None
    from eoslog.testing.metrics import scrape

    return {float(sample.labels["le"]): sample.value for sample in scrape(metrics_port)
            if sample.name == name + "_bucket" and all(sample.labels.get(k) == v for k, v in (labels or {}).items())}


def scrape_gc_seconds(metrics_port):
    """Seconds the broker's garbage collector has stopped it so far (every generation), or None."""
    if not metrics_port:
        return None
    from eoslog.testing.metrics import scrape

    samples = [s.value for s in scrape(metrics_port) if s.name == "eoslog_gc_pause_seconds_sum"]
    return sum(samples) if samples else None


def scrape_requests(metrics_port, request):
    """How many requests of one kind the broker has answered so far, or None."""
    if not metrics_port:
        return None
    from eoslog.testing.metrics import scrape

    samples = [s.value for s in scrape(metrics_port)
               if s.name == "kafka_network_requestmetrics_requests_total" and s.labels.get("request") == request]
    return sum(samples) if samples else None


PRODUCE_TIME = ("kafka_network_requestmetrics_totaltime_seconds", {"request": "Produce"})
FLUSH_TIME = ("kafka_log_logflushstats_logflushrateandtime_seconds", None)


def _bucket_pct(before, after, q):
    """The upper bound of the bucket holding quantile q of the observations between two scrapes, in ms."""
    if before is None or after is None:
        return float("nan")
    bounds = sorted(after)
    total = after[bounds[-1]] - before.get(bounds[-1], 0)
    for bound in bounds:
        if after[bound] - before.get(bound, 0) >= q * total:
            return bound * 1000
    return float("nan")


def _pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(int(q * len(values)), len(values) - 1)]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_producers(ctx, args, topic, seconds, paced):
    out = ctx.Queue()
    rate = args.paced_rate / args.procs
    procs = [ctx.Process(target=_producer_worker,
                         args=(args.bootstrap, topic, args.per_proc, args.size, seconds, rate, paced, out,
                               dict(item.split("=", 1) for item in args.producer), args.keys == "random"))
             for _ in range(args.procs)]
    for p in procs:
        p.start()
    results = []
    while len(results) < args.procs:
        kind, value = out.get(timeout=180)
        if kind == "done":
            results.append(value)
    for p in procs:
        p.join()
    return results


def measure_topic(ctx, args, topic, pid):
    row = {}
    gc_before = scrape_gc_seconds(args.metrics_port)
    with BrokerWatch(pid) as watch:
        print(f"  {topic}: produce phase", file=sys.stderr, flush=True)
        cpu0 = _children_cpu()
        produced = _run_producers(ctx, args, topic, args.seconds, paced=False)
        row["producers CPU s"] = _children_cpu() - cpu0
        delivered = sum(r["delivered"] for r in produced)
        span = max(r["last"] for r in produced) - min(r["started"] for r in produced)
        row["produce msgs/s"] = delivered / span
        row["produce MB/s"] = delivered * args.size / span / 1e6
        row["produce failed"] = sum(r["failed"] for r in produced)

        print(f"  {topic}: consume phase", file=sys.stderr, flush=True)
        group = f"g-{topic}"
        counters = [ctx.Value("q", 0, lock=False) for _ in range(args.procs)]
        firsts = [ctx.Value("d", 0.0, lock=False) for _ in range(args.procs)]
        lasts = [ctx.Value("d", 0.0, lock=False) for _ in range(args.procs)]
        stop = ctx.Event()
        e2e_out = ctx.Queue()
        started = time.perf_counter()
        consumers = [ctx.Process(target=_consumer_worker,
                                 args=(args.bootstrap, topic, group, args.per_proc, counters[i], firsts[i],
                                       lasts[i], stop, e2e_out))
                     for i in range(args.procs)]
        for p in consumers:
            p.start()
        deadline = time.monotonic() + 180
        while sum(c.value for c in counters) < delivered and time.monotonic() < deadline:
            time.sleep(0.05)
        consumed = sum(c.value for c in counters)
        first = min(f.value for f in firsts if f.value) if any(f.value for f in firsts) else started
        row["join s"] = first - started
        row["consume msgs/s"] = consumed / max(max(v.value for v in lasts) - first, 1e-9)
        row["consumed"] = consumed

        print(f"  {topic}: paced phase", file=sys.stderr, flush=True)
        cpu0 = _children_cpu()
        before = [scrape_histogram(args.metrics_port, *h) for h in (PRODUCE_TIME, FLUSH_TIME)]
        fetches = scrape_requests(args.metrics_port, "Fetch")
        paced = _run_producers(ctx, args, topic, args.seconds, paced=True)
        after = [scrape_histogram(args.metrics_port, *h) for h in (PRODUCE_TIME, FLUSH_TIME)]
        fetched = scrape_requests(args.metrics_port, "Fetch")
        # The consumers' Fetch requests in the paced phase: how often their long polls were answered.
        row["paced Fetch req/s"] = (float("nan") if fetches is None or fetched is None
                                    else (fetched - fetches) / args.seconds)
        row["broker Produce p50 ms <="] = _bucket_pct(before[0], after[0], 0.50)
        row["broker Produce p99 ms <="] = _bucket_pct(before[0], after[0], 0.99)
        row["log flush p50 ms <="] = _bucket_pct(before[1], after[1], 0.50)
        row["log flush p99 ms <="] = _bucket_pct(before[1], after[1], 0.99)
        row["paced producers CPU s"] = _children_cpu() - cpu0
        cpu0 = _children_cpu()
        paced_total = sum(r["delivered"] for r in paced)
        deadline = time.monotonic() + 60
        while sum(c.value for c in counters) < delivered + paced_total and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        e2e = []
        for _ in consumers:
            e2e.extend(e2e_out.get(timeout=120))
        for p in consumers:
            p.join()
        row["consumers CPU s"] = _children_cpu() - cpu0
        lat = [x for r in paced for x in r["latencies"]]
        row["paced msgs/s"] = paced_total / args.seconds
        row["delivery p50 ms"] = _pct(lat, 0.50) * 1000
        row["delivery p99 ms"] = _pct(lat, 0.99) * 1000
        row["e2e p50 ms"] = _pct(e2e, 0.50) * 1000
        row["e2e p99 ms"] = _pct(e2e, 0.99) * 1000
        row["e2e seen"] = len(e2e)
    gc_after = scrape_gc_seconds(args.metrics_port)
    row["broker GC s"] = float("nan") if gc_before is None or gc_after is None else gc_after - gc_before
    row["broker CPU s"] = watch.cpu
    row["broker CPU %"] = 100 * watch.cpu / watch.wall
    row["broker peak RSS MiB"] = watch.peak
    return row


def create_topic(bootstrap, name, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=120)[name].result(180)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=30)
        topic = md.topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"{name} not ready")


def delete_topic(bootstrap, name):
    """Each topic goes once measured: gigabytes left in the page cache would make the kernel's writeback
    pace the next topic's phases, so the order of the rounds would decide the figures."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    admin.delete_topics([name], operation_timeout=120)[name].result(180)


KEYS = ["produce msgs/s", "produce MB/s", "consume msgs/s", "join s", "paced msgs/s", "delivery p50 ms",
        "delivery p99 ms", "e2e p50 ms", "e2e p99 ms", "paced Fetch req/s", "broker Produce p50 ms <=", "broker Produce p99 ms <=",
        "log flush p50 ms <=", "log flush p99 ms <=", "broker CPU s", "broker GC s", "broker CPU %", "broker peak RSS MiB",
        "producers CPU s", "paced producers CPU s", "consumers CPU s"]


def report(rows):
    """rows: {partitions: [row per round]} -> the table of medians and the 1000/8 ratios."""
    counts = sorted(rows)
    med = {n: {k: statistics.median(r[k] for r in rows[n]) for k in KEYS} for n in counts}
    print()
    print(f"{'':24}" + "".join(f"{n:>12} p" for n in counts) + f"{'ratio':>12}")
    for key in KEYS:
        line = f"{key:24}" + "".join(f"{med[n][key]:14.1f}" for n in counts)
        if len(counts) == 2 and med[counts[0]][key]:
            line += f"{med[counts[1]][key] / med[counts[0]][key]:12.2f}"
        print(line)
    for n in counts:
        for i, r in enumerate(rows[n]):
            print(f"  {n} partitions round {i + 1}: " + ", ".join(f"{k}={r[k]:.1f}" for k in KEYS)
                  + f", failed={r['produce failed']}, consumed={r['consumed']}, e2e seen={r['e2e seen']}")


class Tansu:
    def __init__(self) -> None:
        import subprocess

        from eoslog.loadgen.targets import _free_loopback_port, _wait_listening, find_tansu

        port = _free_loopback_port()
        url = f"tcp://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [str(find_tansu()), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/", "--silent"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not _wait_listening(self.process, port, 30):
            raise SystemExit(f"Tansu exited before listening on {port}")
        self.bootstrap, self.pid = f"127.0.0.1:{port}", self.process.pid

    def terminate(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 s phases, 2 x 4 clients")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--partitions", default="8,1000")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--paced-rate", type=float, default=2000.0, help="msgs/s over all producers")
    parser.add_argument("--procs", type=int, default=5, help="worker processes per client kind")
    parser.add_argument("--per-proc", type=int, default=10, help="clients per worker process")
    parser.add_argument("--keys", choices=("random", "none"), default="random",
                        help="random keys (every partition at once) or none (librdkafka's sticky partitioner)")
    parser.add_argument("--bootstrap", help="use a running broker instead of starting one")
    parser.add_argument("--broker-pid", type=int, help="its pid (for CPU and RSS)")
    parser.add_argument("--metrics-port", type=int,
                        help="its Prometheus port (for its Produce and flush times), with --bootstrap")
    parser.add_argument("--tansu", action="store_true", help="start Tansu (in-memory storage) instead of eoslog")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a broker property for the broker this script starts (repeatable)")
    parser.add_argument("--producer", action="append", default=[], metavar="NAME=VALUE",
                        help="a producer config over the defaults (repeatable), e.g. "
                             "queue.buffering.max.kbytes=1048576 (librdkafka's default; this script's is 4096)")
    args = parser.parse_args()
    if args.bootstrap is None:
        args.metrics_port = None  # set below when this script starts the broker
    if args.quick:
        args.seconds, args.procs, args.per_proc, args.paced_rate = 2.0, 2, 4, 500.0
    counts = [int(x) for x in args.partitions.split(",")]
    ctx = mp.get_context("spawn")
    started = time.perf_counter()
    broker = None
    with tempfile.TemporaryDirectory(prefix="many-parts-") as tmp:
        if args.tansu:
            broker = Tansu()
            args.bootstrap, args.broker_pid = broker.bootstrap, broker.pid
        elif args.bootstrap is None:
            from eoslog.testing.process import BrokerProcess

            properties = dict(item.split("=", 1) for item in args.set)
            with socket.socket() as probe:  # the broker's Prometheus endpoint, for its own request times
                probe.bind(("127.0.0.1", 0))
                metrics_port = probe.getsockname()[1]
            properties.setdefault("eoslog.metrics.listen", f"127.0.0.1:{metrics_port}")
            args.metrics_port = int(properties["eoslog.metrics.listen"].rsplit(":", 1)[1])
            broker = BrokerProcess(data_dir=Path(tmp) / "data", properties=properties).start()
            args.bootstrap, args.broker_pid = broker.bootstrap, broker.process.pid
        try:
            rows: dict[int, list] = {n: [] for n in counts}
            tag = os.urandom(3).hex()
            for r in range(args.rounds):
                order = counts if r % 2 == 0 else list(reversed(counts))
                for n in order:
                    topic = f"many-{tag}-r{r}-p{n}"
                    t0 = time.perf_counter()
                    create_topic(args.bootstrap, topic, n)
                    print(f"round {r + 1}: {topic} created in {time.perf_counter() - t0:.1f} s", flush=True)
                    row = measure_topic(ctx, args, topic, args.broker_pid)
                    rows[n].append(row)
                    delete_topic(args.bootstrap, topic)
                    print(f"  {n:5d} partitions: " + ", ".join(f"{k}={row[k]:.1f}" for k in KEYS), flush=True)
        finally:
            if broker is not None:
                broker.terminate()
    print(f"\nbroker {'Tansu (in-memory)' if args.tansu else 'eoslog'}, "
          f"{args.procs} x {args.per_proc} producers, {args.procs} x {args.per_proc} consumers, "
          f"{args.size} B values, {args.seconds:g} s phases, paced {args.paced_rate:g} msgs/s, "
          f"{args.rounds} round(s), broker properties {args.set or 'default'}, "
          f"producer overrides {args.producer or 'none'}, keys {args.keys}, "
          f"total {time.perf_counter() - started:.0f} s")
    report(rows)


if __name__ == "__main__":
    main()
