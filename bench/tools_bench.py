"""How long `eoslog topics describe` and `eoslog transactions find-hanging` take at many partitions:
the tools' former way (a Metadata per partition to find its leader, a DescribeProducers per partition)
against the current one (tools/leader_requests.py: one ListOffsets per leader per isolation level, one
DescribeProducers per leader).

A broker process (`eoslog serve`) gets TOPICS topics of PARTITIONS partitions each, a record in every
partition and one transaction left open. This process then times, alternating round by round, the
former and the current implementation of each tool's work (the functions the commands call, without
click's printing), checks both give the same answer, and prints medians and their ratio.

Usage: python bench/tools_bench.py [--topics 10] [--partitions 100] [--rounds 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import confluent_kafka

from eoslog.protocol import messages
from eoslog.testing.process import BrokerProcess
from eoslog.tools import admin_requests as admin
from eoslog.tools import txn_cli
from eoslog.tools.brokers import Brokers
from eoslog.tools.topics_cli import describe_topics

# ---- the former way, as the tools did it before (main at 480216c), for comparison -------------------

def _former_list_offsets(brokers: Brokers, tps, timestamp: int, isolation_level: int) -> dict:
    grouped: dict = {}
    for topic, partition in tps:  # brokers.leader: a Metadata request per partition
        grouped.setdefault(brokers.leader(topic, partition), {}).setdefault(topic, []).append(partition)
    Topic, Partition = messages.ListOffsetsRequest.ListOffsetsTopic, messages.ListOffsetsRequest.ListOffsetsPartition
    out = {}
    for wire, by_topic in grouped.items():
        request = messages.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
            Topic(name=t, partitions=[Partition(partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                                      for p in ps]) for t, ps in by_topic.items()])
        for t in wire.request(admin.LIST_OFFSETS, 2, request).topics:
            out.update({(t.name, p.partition_index): p.offset for p in t.partitions})
    return out


def former_describe(brokers: Brokers, names):
    views = admin.topics(brokers, names)
    tps = [(v.name, p.partition) for v in views for p in v.partitions if p.leader >= 0]
    start = _former_list_offsets(brokers, tps, admin.EARLIEST, admin.READ_UNCOMMITTED)
    high = _former_list_offsets(brokers, tps, admin.LATEST, admin.READ_UNCOMMITTED)
    stable = _former_list_offsets(brokers, tps, admin.LATEST, admin.READ_COMMITTED)
    for view in views:
        for p in view.partitions:
            tp = (view.name, p.partition)
            p.log_start_offset, p.high_watermark, p.last_stable_offset = start.get(tp), high.get(tp), stable.get(tp)
        view.configs = {c.name: c.value for c in admin.describe_configs(brokers, admin.TOPIC, view.name)
                        if c.source == "topic"}
    return views


def former_find_hanging(brokers: Brokers, max_age_ms: int) -> list[dict]:
    now = int(time.time() * 1000)
    hanging = []
    for t in brokers.metadata().topics:  # as txn_cli.topic_partitions did
        if t.error_code or t.is_internal:
            continue
        for partition in sorted(p.partition_index for p in t.partitions):
            request = messages.DescribeProducersRequest(topics=[messages.DescribeProducersRequest.TopicRequest(
                name=t.name, partition_indexes=[partition])])
            [result] = brokers.leader(t.name, partition).request(61, 0, request).topics[0].partitions
            for producer in result.active_producers:
                if producer.current_txn_start_offset < 0:
                    continue
                ongoing = txn_cli.list_transactions(brokers, ["Ongoing"], [producer.producer_id])
                described = txn_cli.describe_transactions(brokers, [o.transactional_id for o in ongoing])
                covered = any(any(td.topic == t.name and partition in td.partitions for td in d.topics)
                              for d in described if d.error_code == 0)
                too_old = producer.last_timestamp >= 0 and now - producer.last_timestamp > max_age_ms
                if not covered or too_old:
                    hanging.append((t.name, partition, producer.producer_id))
    return sorted(hanging)


# ---- the run ------------------------------------------------------------------------------------

def load(bootstrap: str, topics: int, partitions: int) -> confluent_kafka.Producer:
    with Brokers(bootstrap) as brokers:
        for t in range(topics):
            result = admin.create_topic(brokers, f"t{t}", partitions, 1, {})
            assert result.error_code == 0, result
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for t in range(topics):
        for p in range(partitions):
            producer.produce(f"t{t}", value=b"x" * 100, partition=p)
    assert producer.flush(60) == 0
    stuck = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-open",
                                      "transaction.timeout.ms": 600_000})  # open for the whole run
    stuck.init_transactions(30)
    stuck.begin_transaction()
    stuck.produce(f"t{min(1, topics - 1)}", value=b"open", partition=0)
    assert stuck.flush(30) == 0
    return stuck


def timed(function, *args):
    started = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tools-bench-") as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        stuck = load(broker.bootstrap, args.topics, args.partitions)
        names = [f"t{t}" for t in range(args.topics)]
        times: dict[str, list[float]] = {k: [] for k in ("describe former", "describe now", "hanging former",
                                                         "hanging now")}
        with Brokers(broker.bootstrap) as brokers:
            for _ in range(args.rounds):
                seconds, old = timed(former_describe, brokers, names)
                times["describe former"].append(seconds)
                seconds, new = timed(describe_topics, brokers, names)
                times["describe now"].append(seconds)
                old, new = ([(v.name, p.partition, p.log_start_offset, p.high_watermark, p.last_stable_offset)
                             for v in views for p in v.partitions] for views in (old, new))
                assert old == new, [(a, b) for a, b in zip(old, new, strict=True) if a != b][:5]
                seconds, old = timed(former_find_hanging, brokers, 0)
                times["hanging former"].append(seconds)
                seconds, new = timed(txn_cli.find_hanging, brokers, None, 0)
                times["hanging now"].append(seconds)
                assert old == [(h["topic"], h["partition"], h["producer_id"]) for h in new] and len(old) == 1, old
        total = args.topics * args.partitions
        print(f"{total} partitions ({args.topics} topics x {args.partitions}), {args.rounds} rounds, alternating")
        print(f"{'work':<20} {'median ms':>10} {'p90 ms':>8}")
        for name, values in times.items():
            values.sort()
            print(f"{name:<20} {statistics.median(values) * 1000:>10.1f} "
                  f"{values[int(0.9 * (len(values) - 1))] * 1000:>8.1f}")
        for work in ("describe", "hanging"):
            a, b = statistics.median(times[f"{work} former"]), statistics.median(times[f"{work} now"])
            print(f"{work}: former / now = {a / b:.1f}x")
        del stuck


if __name__ == "__main__":
    main()
