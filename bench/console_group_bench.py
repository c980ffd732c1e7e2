"""What the per-partition lag charts cost the group page of a 1,000-partition group (issue 18: pages in
<= 200 ms at 1,000 partitions).

A broker process (`eoslog serve`) gets one topic of PARTITIONS partitions, a record in each, and a group
with an offset committed in every partition. Two `eoslog console` processes serve it: one from this
tree, one from BASELINE_SRC (another checkout's src/, e.g. main's, whose group page draws only the total
lag). Both are first asked WARMUP times, so that every partition's chart holds its full number of points
(the largest page). Then the group page and its polled fragment are timed, the two consoles taken in
turn round after round; the script prints median and 90th percentile per page and console, the page
size, and the ratios.

Usage: python bench/console_group_bench.py --baseline-src /path/to/other/src [--partitions 1000]
       [--rounds 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import confluent_kafka

from eoslog.console.history import PARTITION_POINTS
from eoslog.testing.process import BrokerProcess
from eoslog.testing.wait import wait_until
from eoslog.tools import admin_requests as admin
from eoslog.tools.brokers import Brokers

HERE_SRC = Path(__file__).resolve().parent.parent / "src"


def load(bootstrap: str, partitions: int) -> None:
    with Brokers(bootstrap) as brokers:
        result = admin.create_topic(brokers, "t0", partitions, 1, {})
        assert result.error_code == 0, result
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for p in range(partitions):
        producer.produce("t0", value=b"x" * 100, partition=p)
    producer.flush(60)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-group"})
    consumer.commit(offsets=[confluent_kafka.TopicPartition("t0", p, 0) for p in range(partitions)],
                    asynchronous=False)
    consumer.close()


def start_console(src: Path, bootstrap: str, port_file: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "eoslog", "console", "--bootstrap", bootstrap,
                                "--listen", "127.0.0.1:0", "--port-file", str(port_file)],
                               env={**os.environ, "PYTHONPATH": str(src)}, stderr=subprocess.DEVNULL)
    wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 30, "the console binds")
    return process, f"http://127.0.0.1:{port_file.read_text().strip()}"


def get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        size = len(response.read())
        assert response.status == 200, (url, response.status)
    return time.perf_counter() - started, size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline-src", type=Path, required=True)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    warmup = PARTITION_POINTS + 5
    with tempfile.TemporaryDirectory(prefix="console-group-bench-") as tmp, \
            BrokerProcess(Path(tmp) / "data") as broker:
        load(broker.bootstrap, args.partitions)
        consoles = {}
        processes = []
        try:
            for name, src in (("baseline", args.baseline_src), ("this tree", HERE_SRC)):
                process, url = start_console(src, broker.bootstrap, Path(tmp) / f"port-{len(processes)}")
                processes.append(process)
                consoles[name] = url
            pages = {"group page": "/groups/bench-group", "lag fragment": "/groups/bench-group/partitions"}
            for url in consoles.values():
                for _ in range(warmup):
                    get(url + pages["lag fragment"])
            times = {(c, p): [] for c in consoles for p in pages}
            sizes = {}
            for _ in range(args.rounds):
                for page, path in pages.items():
                    for console, url in consoles.items():
                        elapsed, sizes[(console, page)] = get(url + path)
                        times[(console, page)].append(elapsed)
        finally:
            for process in processes:
                process.terminate()
                process.wait(10)
    print(f"a group with offsets in {args.partitions} partitions, {args.rounds} rounds after {warmup} warm-up "
          f"samples per console")
    print(f"{'page':<14} {'console':<10} {'median ms':>10} {'p90 ms':>8} {'KiB':>8}")
    medians = {}
    for (console, page), values in times.items():
        values.sort()
        medians[(console, page)] = statistics.median(values)
        print(f"{page:<14} {console:<10} {medians[(console, page)] * 1000:>10.1f} "
              f"{values[int(0.9 * (len(values) - 1))] * 1000:>8.1f} {sizes[(console, page)] / 1024:>8.0f}")
    for page in pages:
        print(f"{page}: this tree / baseline = {medians[('this tree', page)] / medians[('baseline', page)]:.2f}")


if __name__ == "__main__":
    main()
