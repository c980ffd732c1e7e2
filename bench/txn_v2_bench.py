"""What transaction version 2 (KIP-890 part 2) costs against version 1, per transaction, against an
`eoslog serve` process, with eoslog's own protocol code (no installed client speaks version 2).

    .venv/bin/python bench/txn_v2_bench.py [--transactions N] [--partitions P] [--rounds R]

One producer on one connection, requests one at a time (what a transaction's critical path is), each
transaction one 1 KiB batch on each of P partitions, acks=all, then commit:
- version 1: AddPartitionsToTxn v3 (all P at once), P x Produce v11, EndTxn v3;
- version 2: P x Produce v12 (the first batch on each partition has its leader add it: one
  __transaction_state append per partition), EndTxn v5 (epoch bump, new epoch in the answer).
The two alternate, R rounds each; the best round of each is printed with the ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.testing.process import BrokerProcess

VALUE = b"x" * 1024


class Producer:
    def __init__(self, bootstrap: str, transactional_id: str, topic: str, partitions: int, version: int) -> None:
        self.wire = BrokerConnection.from_bootstrap(bootstrap, client_id=f"bench-tv{version}")
        self.tid, self.topic, self.partitions, self.version = transactional_id, topic, partitions, version
        init = self.wire.request(22, 4, messages.InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1))
        assert init.error_code == 0, init
        self.pid, self.epoch = init.producer_id, init.producer_epoch
        self.sequences = [0] * partitions

    def _produce(self, partition: int, api_version: int) -> None:
        batch = build_batch([SimpleRecord(None, VALUE)], producer_id=self.pid, producer_epoch=self.epoch,
                            base_sequence=self.sequences[partition], is_transactional=True)
        Data = messages.ProduceRequest.TopicProduceData
        response = self.wire.request(0, api_version, messages.ProduceRequest(
            transactional_id=self.tid, acks=-1, timeout_ms=30_000,
            topic_data=[Data(name=self.topic, partition_data=[Data.PartitionProduceData(index=partition,
                                                                                        records=batch)])]))
        assert response.responses[0].partition_responses[0].error_code == 0, response
        self.sequences[partition] += 1

    def transaction(self) -> None:
        end = messages.EndTxnRequest(transactional_id=self.tid, producer_id=self.pid, producer_epoch=self.epoch,
                                     committed=True)
        if self.version == 1:
            Topic = messages.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
            added = self.wire.request(24, 3, messages.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
                v3_and_below_producer_epoch=self.epoch,
                v3_and_below_topics=[Topic(name=self.topic, partitions=list(range(self.partitions)))]))
            assert all(p.partition_error_code == 0 for t in added.results_by_topic_v3_and_below
                       for p in t.results_by_partition), added
            for partition in range(self.partitions):
                self._produce(partition, 11)
            assert self.wire.request(26, 3, end).error_code == 0
            return
        for partition in range(self.partitions):
            self._produce(partition, 12)
        answer = self.wire.request(26, 5, end)
        assert answer.error_code == 0, answer
        self.pid, self.epoch = answer.producer_id, answer.producer_epoch
        self.sequences = [0] * self.partitions


def run(transactions: int, partitions: int, rounds: int) -> dict[int, list[float]]:
    rates: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(data_dir=Path(tmp) / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("bench", partitions, 1)])["bench"].result(30)
        for r in range(rounds):
            for version in ((1, 2) if r % 2 == 0 else (2, 1)):  # alternate which goes first
                producer = Producer(broker.bootstrap, f"bench-v{version}-{r}", "bench", partitions, version)
                producer.transaction()  # warm-up: the first transaction creates __transaction_state etc.
                started = time.perf_counter()
                for _ in range(transactions):
                    producer.transaction()
                rates[version].append(transactions / (time.perf_counter() - started))
                producer.wire.close()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    rates = run(args.transactions, args.partitions, args.rounds)
    for version in (1, 2):
        print(f"transaction version {version}: " + ", ".join(f"{r:.0f}" for r in rates[version])
              + f" transactions/s (best {max(rates[version]):.0f})")
    print(f"version 2 / version 1 (best rounds): {max(rates[2]) / max(rates[1]):.2f}x")


if __name__ == "__main__":
    main()
