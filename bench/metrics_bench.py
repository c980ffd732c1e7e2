"""What the metrics endpoint costs the produce path: `eoslog bench` against two `eoslog serve` processes,
one with --metrics-listen (scraped every --scrape-interval seconds; 0: never, which isolates the
request path's cost) and one without, alternating
within each round so both see the same machine load. Prints per-run figures, medians and the ratio.

    PYTHONPATH=src python bench/metrics_bench.py --rounds 3 --sizes 100,1024 --seconds 8

``--scrape-cost N`` instead measures what one scrape costs the event loop: an embedded broker with a topic
of N partitions, one record and one group's committed offset in each, timed snapshots on the loop and
whole HTTP scrapes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from eoslog.testing.process import BrokerProcess, free_port


def scrape_forever(port: int, interval: float, stop: threading.Event, counts: list[int]) -> None:
    while not stop.wait(interval):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            response.read()
        counts[0] += 1


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far: less sensitive than wall-clock throughput to other work
    on a shared machine."""
    import os
    from pathlib import Path

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench(bootstrap: str, sizes: str, seconds: float, messages: int) -> dict[int, dict]:
    command = [sys.executable, "-m", "eoslog", "bench", "--bootstrap", bootstrap, "--sizes", sizes,
               "--seconds", str(seconds), "--messages", str(messages), "--latency-rate", "0", "--json"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    report = json.loads(out[out.index("{"):])
    return {r["size"]: r for r in report["targets"][0]["results"]}


def scrape_cost(partitions: int, repeats: int = 20) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as Tp
    from confluent_kafka.admin import AdminClient, NewTopic

    from eoslog.testing.embedded import EmbeddedBroker

    with EmbeddedBroker(properties={"eoslog.metrics.listen": "127.0.0.1:0"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("wide", partitions, 1)])["wide"].result(60)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
        for p in range(partitions):
            producer.produce("wide", b"x", partition=p)
        producer.flush(60)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wide-readers"})
        consumer.commit(offsets=[Tp("wide", p, 1) for p in range(partitions)], asynchronous=False)
        consumer.close()
        endpoint = broker.broker.metrics
        on_loop = []
        for _ in range(repeats):
            on_loop.append(broker.call(lambda: (time.perf_counter(), endpoint.snapshot(), time.perf_counter())))
        loop_ms = sorted((end - start) * 1000 for start, _, end in on_loop)
        http_ms = []
        for _ in range(repeats):
            started = time.perf_counter()
            with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.bound_port}/metrics", timeout=30) as response:
                size = len(response.read())
            http_ms.append((time.perf_counter() - started) * 1000)
        http_ms.sort()
        print(f"{partitions} partitions: snapshot on the loop median {statistics.median(loop_ms):.1f} ms "
              f"(min {loop_ms[0]:.1f}, max {loop_ms[-1]:.1f}); whole scrape median {statistics.median(http_ms):.1f} ms "
              f"(min {http_ms[0]:.1f}, max {http_ms[-1]:.1f}), {size:,} bytes")


def request_cost(iterations: int = 200_000) -> None:
    """What the dispatcher adds per request when the endpoint is on: two clock reads and
    RequestMetrics.finished for a one-partition Produce response (walked for error codes)."""
    import timeit

    from eoslog.protocol.messages import ProduceResponse
    from eoslog.server.request_metrics import RequestMetrics

    partition = ProduceResponse.PartitionProduceResponse(index=0, error_code=0, base_offset=0, log_append_time_ms=-1,
                                                         log_start_offset=0, record_errors=[], error_message=None)
    response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[partition])],
                               throttle_time_ms=0)
    metrics = RequestMetrics()
    clock = time.perf_counter

    def one() -> None:
        started = clock()
        metrics.finished(0, clock() - started, response)

    runs = [timeit.timeit(one, number=iterations) / iterations * 1e9 for _ in range(5)]
    print(f"per request with the endpoint on: median {statistics.median(runs):.0f} ns "
          f"(runs: {', '.join(f'{r:.0f}' for r in runs)})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--scrape-interval", type=float, default=1.0,
                        help="seconds between scrapes of the metrics-on broker (0: never scraped)")
    parser.add_argument("--scrape-cost", type=int, default=0, metavar="PARTITIONS")
    parser.add_argument("--request-cost", action="store_true")
    args = parser.parse_args()
    if args.request_cost:
        request_cost()
        return
    if args.scrape_cost:
        scrape_cost(args.scrape_cost)
        return
    metrics_port = free_port()
    on = BrokerProcess(properties={"eoslog.metrics.listen": f"127.0.0.1:{metrics_port}"})
    off = BrokerProcess()
    results: dict[str, dict[int, list[float]]] = {"metrics on": {}, "metrics off": {}}
    cpu: dict[str, list[float]] = {"metrics on": [], "metrics off": []}  # broker CPU µs per message
    scrapes = [0]
    with on, off:
        for round_ in range(args.rounds):
            order = [("metrics on", on), ("metrics off", off)]
            if round_ % 2:
                order.reverse()
            for name, broker in order:
                stop = threading.Event()
                scraper = None
                if broker is on and args.scrape_interval > 0:
                    scraper = threading.Thread(target=scrape_forever, args=(metrics_port, args.scrape_interval, stop,
                                                                            scrapes), daemon=True)
                    scraper.start()
                cpu_before = cpu_seconds(broker.process.pid)
                try:
                    figures = bench(broker.bootstrap, args.sizes, args.seconds, args.messages)
                    messages = sum(r["produce"]["messages"] for r in figures.values())
                    cpu[name].append((cpu_seconds(broker.process.pid) - cpu_before) / messages * 1e6)
                    print(f"round {round_ + 1} {name:12s} broker CPU {cpu[name][-1]:.2f} µs per message "
                          f"produced and consumed ({messages:,} messages)", flush=True)
                finally:
                    stop.set()
                    if scraper is not None:
                        scraper.join()
                for size, result in figures.items():
                    rate = result["produce"]["msgs_per_s"]
                    results[name].setdefault(size, []).append(rate)
                    print(f"round {round_ + 1} {name:12s} {size:5d} B  produce {rate:12,.0f} msgs/s", flush=True)
    print(f"\n{scrapes[0]} scrapes during the metrics-on runs")
    print(f"broker CPU per message: off median {statistics.median(cpu['metrics off']):.2f} µs "
          f"({', '.join(f'{c:.2f}' for c in cpu['metrics off'])}), on median "
          f"{statistics.median(cpu['metrics on']):.2f} µs ({', '.join(f'{c:.2f}' for c in cpu['metrics on'])}), "
          f"on / off {statistics.median(cpu['metrics on']) / statistics.median(cpu['metrics off']):.2f}x")
    print("| size | metrics off msgs/s (median, runs) | metrics on msgs/s (median, runs) | on / off |")
    print("|---:|---:|---:|---:|")
    for size in sorted(results["metrics off"]):
        off_runs, on_runs = results["metrics off"][size], results["metrics on"][size]
        ratio = statistics.median(on_runs) / statistics.median(off_runs)
        print(f"| {size} B | {statistics.median(off_runs):,.0f} ({', '.join(f'{r:,.0f}' for r in off_runs)}) | "
              f"{statistics.median(on_runs):,.0f} ({', '.join(f'{r:,.0f}' for r in on_runs)}) | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
