"""A transactional share acknowledgement against a plain one, in one run (issue 37 step 6).

    PYTHONPATH=src python bench/share_txn_ack_bench.py [--batches 300] [--batch 10] [--rounds 3]

One `eoslog serve` subprocess; a topic of 1 partition filled with records of 100 B, and a share group
member speaking the share protocol over one connection (eoslog's connection, no client library in the
way). Each cycle the member acquires ``--batch`` records (ShareFetch), then acknowledges them (ACCEPT):

- plain: the member's ShareAcknowledge (one RPC; the leader writes the state once);
- transactional: eoslog's ShareTxnProducer acknowledges them inside a transaction and commits it, with no
  output records (AddSharePartitionsToTxn at the transaction coordinator, ShareAcknowledgeTxn at the
  leader, which checks the registration and writes the pending set, then EndTxn, whose marker reaches the
  share coordinator, which the leader applies and writes).

Rounds alternate plain and transactional; printed: acknowledgement cycles per second (fetch included, so
the ratio understates the acknowledgement's own cost) and the median time of the acknowledgement part.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.client.connection import BrokerConnection
from eoslog.client.share_txn import ACCEPT, ShareTxnProducer
from eoslog.protocol import messages as m
from eoslog.testing.process import BrokerProcess

HEARTBEAT, FETCH, ACKNOWLEDGE = 76, 78, 79


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.conn = BrokerConnection.from_bootstrap(bootstrap)
        self.group, self.member_id, self.epoch = group, uuid.uuid4().hex, 0
        H = m.ShareGroupHeartbeatRequest
        answer = self.conn.request(HEARTBEAT, 1, H(group_id=group, member_id=self.member_id, member_epoch=0,
                                                   rack_id=None, subscribed_topic_names=[topic]))
        while not (answer.assignment and answer.assignment.topic_partitions):
            time.sleep(0.05)
            answer = self.conn.request(HEARTBEAT, 1, H(group_id=group, member_id=self.member_id,
                                                       member_epoch=answer.member_epoch, rack_id=None,
                                                       subscribed_topic_names=None))
        self.topic_id = answer.assignment.topic_partitions[0].topic_id

    def fetch(self, records: int) -> tuple[int, int]:
        R = m.ShareFetchRequest
        answer = self.conn.request(FETCH, 2, R(
            group_id=self.group, member_id=self.member_id, share_session_epoch=self.epoch, max_wait_ms=1000,
            min_bytes=1, max_bytes=1 << 20, max_records=records, batch_size=records, share_acquire_mode=1,
            is_renew_ack=False, topics=[R.FetchTopic(topic_id=self.topic_id, partitions=[R.FetchPartition(
                partition_index=0, partition_max_bytes=0, acknowledgement_batches=[])])] if self.epoch == 0 else [],
            forgotten_topics_data=[]))
        self.epoch += 1
        acquired = [(r.first_offset, r.last_offset) for t in answer.responses for p in t.partitions
                    for r in p.acquired_records]
        return acquired[0][0], acquired[-1][1]

    def acknowledge(self, first: int, last: int) -> None:
        R = m.ShareAcknowledgeRequest
        answer = self.conn.request(ACKNOWLEDGE, 2, R(
            group_id=self.group, member_id=self.member_id, share_session_epoch=self.epoch, is_renew_ack=False,
            topics=[R.AcknowledgeTopic(topic_id=self.topic_id, partitions=[R.AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[R.AcknowledgementBatch(
                    first_offset=first, last_offset=last, acknowledge_types=[ACCEPT])])])]))
        self.epoch += 1
        assert answer.responses[0].partitions[0].error_code == 0, answer


def setup(bootstrap: str, topic: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for _ in range(records):
        producer.produce(topic, value=b"x" * 100, partition=0)
    assert producer.flush(60) == 0


def new_group(bootstrap: str) -> str:
    group = "b-" + uuid.uuid4().hex[:8]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer comes
    admin.incremental_alter_configs([resource])[resource].result(30)
    return group


def one_round(bootstrap: str, topic: str, batches: int, batch: int, transactional: bool) -> tuple[float, float]:
    """(cycles per second, median seconds of the acknowledgement part)."""
    group = new_group(bootstrap)
    member = Member(bootstrap, group, topic)
    producer = ShareTxnProducer(bootstrap, "bench-" + uuid.uuid4().hex[:8]) if transactional else None
    if producer is not None:
        producer.init()
    acks = []
    started = time.monotonic()
    for _ in range(batches):
        first, last = member.fetch(batch)
        t = time.perf_counter()
        if producer is None:
            member.acknowledge(first, last)
        else:
            producer.acknowledge(group, [(topic, 0, o, ACCEPT) for o in range(first, last + 1)],
                                 member_id=member.member_id)
            producer.commit()
        acks.append(time.perf_counter() - t)
    elapsed = time.monotonic() - started
    if producer is not None:
        producer.close()
    member.conn.close()
    return batches / elapsed, statistics.median(acks)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    topic = "txn-ack-bench"
    data = Path(f"/tmp/share-txn-bench-{uuid.uuid4().hex[:6]}")
    with BrokerProcess(data_dir=data / "data", properties={"group.share.min.heartbeat.interval.ms": "200",
                                                          "group.share.heartbeat.interval.ms": "200"}) as broker:
        setup(broker.bootstrap, topic, args.batches * args.batch)
        results = {False: [], True: []}
        for round_number in range(args.rounds):
            for transactional in (False, True):
                rate, ack = one_round(broker.bootstrap, topic, args.batches, args.batch, transactional)
                results[transactional].append((rate, ack))
                print(f"round {round_number + 1} {'transactional' if transactional else 'plain':13s} "
                      f"{rate:8.1f} cycles/s, acknowledgement median {ack * 1000:6.2f} ms", flush=True)
        plain_rate = statistics.median(r for r, _ in results[False])
        txn_rate = statistics.median(r for r, _ in results[True])
        plain_ack = statistics.median(a for _, a in results[False])
        txn_ack = statistics.median(a for _, a in results[True])
        print(f"median: plain {plain_rate:.1f} cycles/s, transactional {txn_rate:.1f} cycles/s "
              f"(transactional / plain {txn_rate / plain_rate:.2f}x); acknowledgement {plain_ack * 1000:.2f} ms "
              f"against {txn_ack * 1000:.2f} ms ({txn_ack / plain_ack:.1f}x)")
    sys.exit(0)


if __name__ == "__main__":
    main()
