"""Produce, transaction and group-commit throughput of `eoslog serve` from two source trees, alternated in
one run: is this tree slower than another (issue 36's "no slower" after a redesign)?

    PYTHONPATH=src .venv/bin/python bench/ab_bench.py --baseline-src /tmp/base/src [--rounds 6]

Each round starts a fresh broker from each tree in turn (the order swaps every round: ABBA...), runs every
workload once against it with confluent-kafka, and stops it. The machine is shared, so only figures from
the same run compare; the script prints each workload's median over the rounds per tree, the ratio
this / baseline of the medians, and the spread of the per-round ratios.

Workloads (1 KiB values, 3 partitions, fsync on acknowledgement, the default):
- ``idempotent``: an idempotent producer, acks=all, linger.ms=5 (the produce path);
- ``txn 10 ms`` / ``txn 100 ms``: a transactional producer committing every 10 / 100 ms (the transaction
  coordinator: AddPartitionsToTxn, EndTxn, markers, all through __transaction_state);
- ``offset commits``: a consumer committing its position synchronously, one OffsetCommit at a time (the
  group coordinator's writes to __consumer_offsets);
- ``read_committed``: a consumer reading the committed transactional data (fetch up to the LSO).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))

from txn_bench import PARTITIONS, consume, create, produce  # noqa: E402

from eoslog.testing.process import BrokerProcess  # noqa: E402


def offset_commits(bootstrap: str, topic: str, count: int) -> float:
    """Synchronous OffsetCommits per second, one consumer of a group."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"ab-{topic}",
                                         "enable.auto.commit": False})
    partitions = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
    consumer.commit(offsets=partitions, asynchronous=False)  # the group's coordinator found and loaded
    started = time.perf_counter()
    for i in range(count):
        consumer.commit(offsets=[TopicPartition(topic, i % PARTITIONS, i)], asynchronous=False)
    rate = count / (time.perf_counter() - started)
    consumer.close()
    return rate


def one_round(src: str, messages: int, commits: int) -> dict[str, float]:
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src  # the broker child imports eoslog from this tree
    try:
        with tempfile.TemporaryDirectory() as tmp, BrokerProcess(data_dir=Path(tmp) / "data") as broker:
            bs = broker.bootstrap
            for topic in ("warmup", "idem", "txn10", "txn100", "commits"):
                create(bs, topic)
            # Every coordinator used once before anything is timed: a shard is built on first use, and the
            # internal topics are created on first use, in both trees.
            produce(bs, "warmup", messages // 10, idempotent=True)
            produce(bs, "warmup", 100, idempotent=True, transactional_id="ab-warmup", commit_interval_s=0.010)
            offset_commits(bs, "warmup", 10)
            rates = {"idempotent": produce(bs, "idem", messages, idempotent=True)}
            rates["txn 10 ms"] = produce(bs, "txn10", messages, idempotent=True, transactional_id="ab-txn10",
                                         commit_interval_s=0.010)
            rates["txn 100 ms"] = produce(bs, "txn100", messages, idempotent=True, transactional_id="ab-txn100",
                                          commit_interval_s=0.100)
            rates["offset commits"] = offset_commits(bs, "commits", commits)
            rates["read_committed"] = consume(bs, "txn100", messages, "read_committed")
            return rates
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-src", required=True, metavar="DIR",
                        help="the source tree (the directory holding eoslog/) to compare against")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--messages", type=int, default=50_000, help="records per produce workload")
    parser.add_argument("--commits", type=int, default=2_000, help="OffsetCommits in the group workload")
    parser.add_argument("--only", default=None, metavar="NAME,...",
                        help="print only these workloads (all still run: each round's broker sees the same work)")
    args = parser.parse_args()
    import eoslog

    current_src = str(Path(eoslog.__file__).resolve().parent.parent)
    for src in (current_src, args.baseline_src):
        compileall.compile_dir(str(Path(src) / "eoslog"), quiet=1)
    trees = {"this": current_src, "baseline": args.baseline_src}
    results: dict[str, list[dict[str, float]]] = {"this": [], "baseline": []}
    for r in range(args.rounds):
        order = ["this", "baseline"] if r % 2 == 0 else ["baseline", "this"]
        for name in order:
            results[name].append(one_round(trees[name], args.messages, args.commits))
            print(f"round {r + 1} {name:8s} " + "  ".join(f"{k} {v:,.0f}" for k, v in results[name][-1].items()),
                  flush=True)
    print(f"\n{'workload':16s} {'this (median)':>14s} {'baseline':>14s} {'ratio':>7s}   per-round ratios")
    wanted = None if args.only is None else set(args.only.split(","))
    for workload in results["this"][0]:
        if wanted is not None and workload not in wanted:
            continue
        now = [r[workload] for r in results["this"]]
        before = [r[workload] for r in results["baseline"]]
        ratios = sorted(a / b for a, b in zip(now, before))
        print(f"{workload:16s} {statistics.median(now):14,.0f} {statistics.median(before):14,.0f} "
              f"{statistics.median(now) / statistics.median(before):6.2f}x   "
              f"{', '.join(f'{x:.2f}' for x in ratios)}")


if __name__ == "__main__":
    main()
