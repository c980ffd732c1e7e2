"""What showing check-back transactions costs the console's transactions page (issue 20, the console).

A broker process (`eoslog serve`) gets one topic of PARTITIONS partitions and CHECK_BACKS check-back
transactions (``eoslog.client.checkback``) that wrote a record each and stalled in their block, so the broker
moved them to Checking (nobody answers: they stay there), plus PLAIN committed transactional ids.
This process then builds the transactions page's view (``views.transactions``, all its requests, no HTML)
round after round, alternating two targets over the same connections:

- ``with``: the page as it is now, ListCheckBacks asked of every broker (plus ApiVersions, and the broker's
  max checks from DescribeConfigs while a transaction is Checking);
- ``without``: the same with ``check_backs`` replaced by an empty answer, i.e. the page before this change.

and prints each target's median and 90th percentile and the ratio of medians.

Usage: python bench/console_checkback_bench.py [--partitions 1000] [--check-backs 50] [--plain 50] [--rounds 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import confluent_kafka

from eoslog.client.checkback import CheckBackProducer
from eoslog.console import views
from eoslog.console.check_backs import CheckBacks
from eoslog.testing.process import BrokerProcess
from eoslog.testing.wait import wait_until
from eoslog.tools import admin_requests as admin
from eoslog.tools import txn_cli
from eoslog.tools.brokers import Brokers

TOPIC, GROUP = "bench-cb", "bench-app"
PROPERTIES = {  # Checking soon after the timeout, and kept there: nobody polls, nothing is counted
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--check-backs", type=int, default=50)
    parser.add_argument("--plain", type=int, default=50, help="committed plain transactional ids")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(data_dir=Path(tmp) / "data",
                                                             properties=PROPERTIES) as broker:
        with Brokers(broker.bootstrap) as brokers:
            assert admin.create_topic(brokers, TOPIC, args.partitions, 1, {}).error_code == 0
        for i in range(args.plain):
            producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                                 "transactional.id": f"plain-{i}", "linger.ms": 0})
            producer.init_transactions(10)
            producer.begin_transaction()
            producer.produce(TOPIC, b"plain", partition=i % args.partitions)
            producer.commit_transaction(10)
        stalled = []
        for i in range(args.check_backs):
            producer = CheckBackProducer(broker.bootstrap, GROUP, transactional_id=f"cb-{i}",
                                         transaction_timeout_ms=1000)
            block = producer.local_transaction()
            block.__enter__().send(TOPIC, b"checked", partition=i % args.partitions)
            stalled.append((producer, block))
        with Brokers(broker.bootstrap) as brokers:
            wait_until(lambda: sum(r.state == "Checking" for r in txn_cli.list_check_backs(brokers).values())
                       == args.check_backs, 30, "every check-back transaction Checking")
            original = views.check_backs
            targets = {"with": original, "without": lambda brokers: CheckBacks()}
            times: dict[str, list[float]] = {name: [] for name in targets}
            for _ in range(args.rounds):
                for name, function in targets.items():
                    views.check_backs = function
                    started = time.perf_counter()
                    page = views.transactions(brokers, 900_000)
                    times[name].append((time.perf_counter() - started) * 1000)
                    checking = sum(r.check_back is not None for r in page.rows)
                    assert checking == (args.check_backs if name == "with" else 0), checking
            views.check_backs = original
        print(f"transactions page view: {args.partitions} partitions, {args.check_backs} Checking, "
              f"{args.plain} plain ids, {args.rounds} rounds, targets alternated")
        for name, values in times.items():
            values.sort()
            print(f"  {name:<8} median {statistics.median(values):6.1f} ms   "
                  f"p90 {values[int(len(values) * 0.9) - 1]:6.1f} ms")
        ratio = statistics.median(times["with"]) / statistics.median(times["without"])
        print(f"  with / without (medians): {ratio:.2f}x")
        for producer, block in stalled:
            producer.close()
            block.gen.close()


if __name__ == "__main__":
    main()
