"""How long the web console's pages take on a cluster with many partitions (issue 18: "pages render in
<= 200 ms for a cluster with 1,000 partitions").

A broker process (`eoslog serve`) gets TOPICS topics of PARTITIONS partitions each, a record in every
partition, a consumer group with offsets committed in the first topic, one transaction left open, and a
Spark sink's transaction group as the sink leaves it mid-query (driven without Spark): MEMBERS
transactions of batch 0 committed together with CommitTransactionGroup, and MEMBERS transactions of
batch 1 written and left open under the group's prefix.
`eoslog console` runs as another process; this one times HTTP GETs of each page, the pages taken in
turn round after round, and prints the median and 90th percentile per page. It also times the two ways
of finding hanging transactions in this process, alternating: `txn_cli.find_hanging` (a DescribeProducers
per partition) and the console's `views.hanging_partitions` (one per leader), and the two ways of listing
offsets, `admin.list_offsets` (a Metadata per partition to find its leader) and `views.offsets` (the
leaders from the page's one Metadata), and the two ways of describing every transactional id (a
DescribeTransactions per id, or one per broker for the ids it lists), and prints their ratios. (Since the tools-many-partitions
change both sides of each pair go through tools/leader_requests.py, so the ratios are near 1 now;
bench/tools_bench.py keeps the former per-partition way for comparison.)

Usage: python bench/console_bench.py [--topics 10] [--partitions 100] [--rounds 10] [--members 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import confluent_kafka

from eoslog.console import views
from eoslog.protocol import messages
from eoslog.testing.process import BrokerProcess
from eoslog.testing.wait import wait_until
from eoslog.tools import admin_requests as admin
from eoslog.tools import txn_cli
from eoslog.tools.brokers import TRANSACTION, Brokers

SINK_GROUP = "eoslog-sink-bench-q"


def load(bootstrap: str, topics: int, partitions: int) -> confluent_kafka.Producer:
    with Brokers(bootstrap) as brokers:
        for t in range(topics):
            result = admin.create_topic(brokers, f"t{t}", partitions, 1, {})
            assert result.error_code == 0, result
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for t in range(topics):
        for p in range(partitions):
            producer.produce(f"t{t}", value=b"x" * 100, partition=p)
    producer.flush(60)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-group"})
    consumer.commit(offsets=[confluent_kafka.TopicPartition("t0", p, 0) for p in range(partitions)],
                    asynchronous=False)
    consumer.close()
    stuck = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-open"})
    stuck.init_transactions(30)
    stuck.begin_transaction()
    stuck.produce("t1", value=b"open", partition=0)
    stuck.flush(30)
    return stuck


def sink_batches(bootstrap: str, topics: int, partitions: int, members: int) -> list[confluent_kafka.Producer]:
    """Batch 0 of a sink query committed as one transaction group, batch 1 written and left open. Each
    task writes a record to each of 5 partitions of the last topic."""
    def task(batch: int, i: int) -> confluent_kafka.Producer:
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                             "transactional.id": f"{SINK_GROUP}-{batch}-{i}"})
        producer.init_transactions(30)
        producer.begin_transaction()
        for k in range(5):
            producer.produce(f"t{topics - 1}", value=b"row", partition=(i * 5 + k) % partitions)
        producer.flush(30)
        return producer

    tasks = [task(0, i) for i in range(members)]
    with Brokers(bootstrap) as brokers:
        described = txn_cli.describe_transactions(brokers, [f"{SINK_GROUP}-0-{i}" for i in range(members)])
        M = messages.CommitTransactionGroupRequest
        response = brokers.coordinator(SINK_GROUP, TRANSACTION).request(0x7E00, 0, M(
            group_name=SINK_GROUP, sequence=0, abort_prefix=f"{SINK_GROUP}-", transactions=[
                M.GroupMember(transactional_id=d.transactional_id, producer_id=d.producer_id,
                              producer_epoch=d.producer_epoch) for d in described]))
        assert response.error_code == 0, response
    return tasks + [task(1, i) for i in range(members)]


def get(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        assert response.status == 200, (url, response.status)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--members", type=int, default=20, help="transactions per batch of the sink's group")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        bootstrap = broker.bootstrap
        stuck = load(bootstrap, args.topics, args.partitions)
        sink_tasks = sink_batches(bootstrap, args.topics, args.partitions, args.members)
        port_file = Path(tmp) / "port"
        console = subprocess.Popen([sys.executable, "-m", "eoslog", "console", "--bootstrap", bootstrap,
                                    "--listen", "127.0.0.1:0", "--port-file", str(port_file)],
                                   stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 30, "the console binds")
            base = f"http://127.0.0.1:{port_file.read_text().strip()}"
            n = args.partitions
            pages = {"overview": "/", "topics": "/topics", f"topic ({n} partitions)": "/topics/t0",
                     "records (50)": "/topics/t0/partitions/0/records",
                     "groups": "/groups", f"group ({n} partitions)": "/groups/bench-group",
                     "transactions": "/transactions", "transaction groups": "/transaction-groups",
                     f"transaction group ({args.members}+{args.members})": f"/transaction-groups/{SINK_GROUP}"}
            for path in pages.values():
                get(base + path)  # warm up: connections, templates compiled
            with urllib.request.urlopen(base + "/transaction-groups", timeout=60) as response:
                listing = response.read().decode()
            # the page shows what the bench set up: the members of batch 0, batch 1 open
            assert f'class="members">{args.members}<' in listing and "writing the next batch" in listing, listing
            times: dict[str, list[float]] = {name: [] for name in pages}
            for _ in range(args.rounds):
                for name, path in pages.items():
                    times[name].append(get(base + path))
        finally:
            console.terminate()
            console.wait(10)
        total = args.topics * args.partitions
        print(f"{total} partitions ({args.topics} topics x {args.partitions}), {args.rounds} rounds")
        print(f"{'page':<26} {'median ms':>10} {'p90 ms':>8}")
        for name, values in times.items():
            values.sort()
            print(f"{name:<26} {statistics.median(values) * 1000:>10.1f} "
                  f"{values[int(0.9 * (len(values) - 1))] * 1000:>8.1f}")
        per_partition, per_leader = [], []
        with Brokers(bootstrap) as brokers:
            for _ in range(max(3, args.rounds // 2)):
                started = time.perf_counter()
                old = txn_cli.find_hanging(brokers, None, 0)
                per_partition.append(time.perf_counter() - started)
                started = time.perf_counter()
                page = views.transactions(brokers, 0)
                per_leader.append(time.perf_counter() - started)
                found = [(h["topic"], h["partition"]) for h in page.hanging_partitions]
                assert [(h["topic"], h["partition"]) for h in old] == found and ("t1", 0) in found
            per_id, per_broker = [], []
            for _ in range(max(3, args.rounds // 2)):
                started = time.perf_counter()
                listed = txn_cli.list_transactions(brokers)
                old = txn_cli.describe_transactions(brokers, [t.transactional_id for t in listed])
                per_id.append(time.perf_counter() - started)
                started = time.perf_counter()
                described = views.described_transactions(brokers)
                per_broker.append(time.perf_counter() - started)
                assert sorted((d.transactional_id, d.transaction_state) for d in old) == \
                    sorted((d.transactional_id, d.transaction_state) for d in described)
            per_metadata, per_offsets = [], []
            for _ in range(max(3, args.rounds // 2)):
                topics = admin.topics(brokers)
                tps = [(v.name, p.partition) for v in topics for p in v.partitions]
                started = time.perf_counter()
                old = admin.list_offsets(brokers, tps, admin.LATEST)
                per_metadata.append(time.perf_counter() - started)
                started = time.perf_counter()
                new = views.offsets(brokers, topics, admin.LATEST)
                per_offsets.append(time.perf_counter() - started)
                assert old == new
        a, b = statistics.median(per_partition), statistics.median(per_leader)
        print(f"hanging transactions: find_hanging {a * 1000:.1f} ms, the console's transactions view "
              f"(with ListTransactions and DescribeTransactions) {b * 1000:.1f} ms, ratio {a / b:.1f}x")
        a, b = statistics.median(per_id), statistics.median(per_broker)
        print(f"describing {len(described)} transactional ids: ListTransactions + a DescribeTransactions per id "
              f"{a * 1000:.1f} ms, views.described_transactions (both per broker) {b * 1000:.1f} ms, "
              f"ratio {a / b:.1f}x")
        a, b = statistics.median(per_metadata), statistics.median(per_offsets)
        print(f"high watermarks of {total} partitions: admin.list_offsets {a * 1000:.1f} ms, "
              f"views.offsets {b * 1000:.1f} ms, ratio {a / b:.1f}x")
        del stuck, sink_tasks


if __name__ == "__main__":
    main()
