"""What the metrics endpoint costs the produce path: `eoslog bench` against two `eoslog serve` processes,
one with --metrics-listen (scraped once a second, as a busy Prometheus would) and one without, alternating
within each round so both see the same machine load. Prints per-run figures, medians and the ratio.

    PYTHONPATH=src python bench/metrics_bench.py --rounds 3 --sizes 100,1024 --seconds 8
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import urllib.request

from eoslog.testing.process import BrokerProcess, free_port


def scrape_forever(port: int, stop: threading.Event, counts: list[int]) -> None:
    while not stop.wait(1.0):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            response.read()
        counts[0] += 1


def bench(bootstrap: str, sizes: str, seconds: float, messages: int) -> dict[int, dict]:
    command = [sys.executable, "-m", "eoslog", "bench", "--bootstrap", bootstrap, "--sizes", sizes,
               "--seconds", str(seconds), "--messages", str(messages), "--latency-rate", "0", "--json"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    report = json.loads(out[out.index("{"):])
    return {r["size"]: r for r in report["targets"][0]["results"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--messages", type=int, default=2_000_000)
    args = parser.parse_args()
    metrics_port = free_port()
    on = BrokerProcess(properties={"eoslog.metrics.listen": f"127.0.0.1:{metrics_port}"})
    off = BrokerProcess()
    results: dict[str, dict[int, list[float]]] = {"metrics on": {}, "metrics off": {}}
    scrapes = [0]
    with on, off:
        for round_ in range(args.rounds):
            order = [("metrics on", on), ("metrics off", off)]
            if round_ % 2:
                order.reverse()
            for name, broker in order:
                stop = threading.Event()
                scraper = None
                if broker is on:
                    scraper = threading.Thread(target=scrape_forever, args=(metrics_port, stop, scrapes), daemon=True)
                    scraper.start()
                try:
                    figures = bench(broker.bootstrap, args.sizes, args.seconds, args.messages)
                finally:
                    stop.set()
                    if scraper is not None:
                        scraper.join()
                for size, result in figures.items():
                    rate = result["produce"]["msgs_per_s"]
                    results[name].setdefault(size, []).append(rate)
                    print(f"round {round_ + 1} {name:12s} {size:5d} B  produce {rate:12,.0f} msgs/s", flush=True)
    print(f"\n{scrapes[0]} scrapes during the metrics-on runs")
    print("| size | metrics off msgs/s (median, runs) | metrics on msgs/s (median, runs) | on / off |")
    print("|---:|---:|---:|---:|")
    for size in sorted(results["metrics off"]):
        off_runs, on_runs = results["metrics off"][size], results["metrics on"][size]
        ratio = statistics.median(on_runs) / statistics.median(off_runs)
        print(f"| {size} B | {statistics.median(off_runs):,.0f} ({', '.join(f'{r:,.0f}' for r in off_runs)}) | "
              f"{statistics.median(on_runs):,.0f} ({', '.join(f'{r:,.0f}' for r in on_runs)}) | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
