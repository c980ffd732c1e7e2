"""How long the broker stops serving while a client creates, grows and deletes a topic of many partitions.

Starts `eoslog serve` (a child process), then: CreateTopics of one topic with --partitions partitions,
CreatePartitions to twice as many, DeleteTopics, with confluent-kafka's AdminClient; meanwhile a second
connection sends an ApiVersions request every 5 ms and times each answer. For each operation it prints
how long the client waited for it and the longest ApiVersions answer during it: the time the event loop
was not serving anyone else. Medians of --runs.

`--baseline-src DIR` also runs the same against `eoslog serve` from another source tree (the directory
holding eoslog/, e.g. `git archive <rev> src | tar -x -C DIR`), alternating run by run, since only
figures from one run on this shared machine compare.

`--cluster N` runs it on a local cluster instead (ZooKeeper and N `eoslog serve` processes,
testing/cluster.py), replication factor min(3, N), with a pinger on every broker; the longest answer is
over all of them. A cluster opens each new replica on its broker's loop as it applies ZooKeeper's view.

Usage: python bench/topic_admin_bench.py [--partitions 1000] [--runs 3] [--baseline-src DIR] [--cluster N]
       [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.testing.process import BrokerProcess

API_VERSIONS = 18

OPERATIONS = ("create", "grow", "delete")


class Pinger:
    """ApiVersions v0 every 5 ms on its own connection; remembers (sent at, answered after)."""

    def __init__(self, bootstrap: str) -> None:
        self._wire = BrokerConnection.from_bootstrap(bootstrap, client_id="ping")
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = time.perf_counter()
            self._wire.request(API_VERSIONS, 0, messages.ApiVersionsRequest())
            self.samples.append((sent, time.perf_counter() - sent))
            time.sleep(0.005)

    def longest(self, start: float, end: float) -> float:
        return max((took for sent, took in self.samples if start <= sent + took and sent <= end), default=0.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._wire.close()


def measure(bootstraps: list[str], partitions: int, factor: int) -> dict[str, tuple[float, float]]:
    # socket.timeout.ms past the request timeout: librdkafka would give up on a request after 60 s.
    admin = AdminClient({"bootstrap.servers": ",".join(bootstraps), "socket.timeout.ms": 130_000})
    pingers = [Pinger(bootstrap) for bootstrap in bootstraps]
    time.sleep(0.2)  # a few pings before the first operation
    results = {}
    for operation in OPERATIONS:
        start = time.perf_counter()
        if operation == "create":
            futures = admin.create_topics([NewTopic("wide", partitions, factor)], request_timeout=120)
        elif operation == "grow":
            futures = admin.create_partitions([NewPartitions("wide", 2 * partitions)], request_timeout=120)
        else:
            futures = admin.delete_topics(["wide"], request_timeout=120)
        for future in futures.values():
            future.result(130)
        end = time.perf_counter()
        time.sleep(0.1 if len(bootstraps) == 1 else 3.0)  # waiting pings come back; other brokers catch up
        results[operation] = (end - start, max(pinger.longest(start, time.perf_counter()) for pinger in pingers))
    for pinger in pingers:
        pinger.stop()
    return results


def run_once(data_dir: Path, src: str | None, partitions: int, cluster: int) -> dict[str, tuple[float, float]]:
    saved = os.environ.get("PYTHONPATH")
    if src is not None:
        os.environ["PYTHONPATH"] = src
    try:
        if cluster:
            from eoslog.testing.cluster import EmbeddedCluster

            with EmbeddedCluster(data_dir, brokers=cluster) as running:
                bootstraps = [running.broker(b).bootstrap for b in range(1, cluster + 1)]
                return measure(bootstraps, partitions, min(3, cluster))
        with BrokerProcess(data_dir=data_dir) as broker:
            return measure([broker.bootstrap], partitions, 1)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def report(name: str, runs: list[dict[str, tuple[float, float]]]) -> None:
    for operation in OPERATIONS:
        took = statistics.median(r[operation][0] for r in runs) * 1000
        stalled = statistics.median(r[operation][1] for r in runs) * 1000
        each = ", ".join(f"{r[operation][1] * 1000:.0f}" for r in runs)
        print(f"{name:10s} {operation:7s} answered after {took:7.0f} ms   longest ApiVersions answer meanwhile "
              f"{stalled:7.0f} ms (median of {len(runs)}: {each})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline-src", default=None, metavar="DIR",
                        help="a source tree (the directory holding eoslog/) to compare against")
    parser.add_argument("--cluster", type=int, default=0, metavar="N", help="a local cluster of N brokers")
    parser.add_argument("--dir", default=None, help="where the data directories go (default: the system's "
                        "temporary directory); file creation speed differs between filesystems, and figures too")
    args = parser.parse_args()
    where = f"a cluster of {args.cluster}" if args.cluster else "one broker"
    print(f"{args.partitions} partitions, grown to {2 * args.partitions}, on {where}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    current, baseline = [], []
    with tempfile.TemporaryDirectory(prefix="topic-admin-bench-", dir=args.dir) as tmp:
        for i in range(args.runs):
            current.append(run_once(Path(tmp) / f"c{i}", None, args.partitions, args.cluster))
            if args.baseline_src:
                baseline.append(run_once(Path(tmp) / f"b{i}", args.baseline_src, args.partitions, args.cluster))
    report("this tree", current)
    if baseline:
        report("baseline", baseline)


if __name__ == "__main__":
    main()
