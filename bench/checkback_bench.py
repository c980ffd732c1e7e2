"""What a check-back local transaction costs against a plain transaction of the same client, per transaction,
against an `eoslog serve` process (docs/transactions.md, "Check-back transactions").

    .venv/bin/python bench/checkback_bench.py [--transactions N] [--rounds R]

Both use eoslog.client.checkback's protocol code on one connection per broker, requests one at a time, each
transaction one 1 KiB record on one partition (acks=all), then commit:
- plain: InitProducerId once; per transaction AddPartitionsToTxn, Produce, EndTxn;
- check-back: per transaction InitProducerId (its own epoch, so its txn id names one transaction),
  BeginCheckBack, AddPartitionsToTxn, Produce, EndTxn -- two more __transaction_state appends.
The two alternate (which goes first alternates per round); the best round of each and the ratio are printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client.checkback import CheckBackProducer, _Producer
from eoslog.records.builder import SimpleRecord
from eoslog.testing.process import BrokerProcess

VALUE = b"x" * 1024
TOPIC = "bench-checkback"


def plain_round(bootstrap: str, count: int) -> float:
    producer = _Producer(bootstrap, f"bench-plain-{time.monotonic_ns()}", transaction_timeout_ms=60_000)
    try:
        producer.init_transaction()
        start = time.perf_counter()
        for _ in range(count):
            producer.send_records(TOPIC, 0, [SimpleRecord(None, VALUE)])
            producer.flush()
            producer.end_transaction(commit=True)
            producer._added.clear()  # the next transaction adds its partition again
        return count / (time.perf_counter() - start)
    finally:
        producer.close()


def checkback_round(bootstrap: str, count: int) -> float:
    with CheckBackProducer(bootstrap, "bench-group", transaction_timeout_ms=60_000) as producer:
        start = time.perf_counter()
        for _ in range(count):
            with producer.local_transaction() as txn:
                txn.send(TOPIC, VALUE, partition=0)
        return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cb-bench-") as tmp, BrokerProcess(data_dir=Path(tmp) / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the topic exists
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        plain_round(broker.bootstrap, 20)  # warm up: __transaction_state created, code paths loaded
        checkback_round(broker.bootstrap, 20)
        results: dict[str, list[float]] = {"plain": [], "check-back": []}
        for r in range(args.rounds):
            order = [("plain", plain_round), ("check-back", checkback_round)]
            for name, run in order if r % 2 == 0 else reversed(order):
                results[name].append(run(broker.bootstrap, args.transactions))
        for name, rates in results.items():
            print(f"{name:>10}: transactions/s per round {', '.join(f'{x:.0f}' for x in rates)}; best {max(rates):.0f}")
        print(f"check-back / plain (best): {max(results['check-back']) / max(results['plain']):.2f}x")


if __name__ == "__main__":
    main()
