"""Share consumption against classic consumption of the same records, in one run (issue 37, step 3).

    PYTHONPATH=src python bench/share_consume_bench.py [--records 200000] [--rounds 2]

Two `eoslog serve` subprocesses, one with eoslog.share.persist.acquisitions=true (the default) and one
with it false (Kafka's behaviour: acquisitions are not written to the share coordinator). On each, one
topic of 2 partitions is filled once with records of 100 B; then, alternately, a confluent-kafka
Consumer (classic group, from the beginning) and a ShareConsumer (a new share group, implicit
acknowledgement, share.auto.offset.reset=earliest) read every record. Throughput is counted from each
reader's subscribe to its last record, and the time to its first record is printed apart (a share group's
first heartbeat finds its partitions still being initialized, so its assignment comes with the next
heartbeat, as in Kafka: group.share.heartbeat.interval.ms is 200 ms here, 5 s by default), with the
share/classic ratio and the share consumer's non-empty polls.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.testing.process import BrokerProcess

TOPIC = "share-bench"


def fill(bootstrap: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % 2)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def classic_seconds(bootstrap: str, records: int) -> tuple[float, float]:
    """(seconds to the first record, seconds to the last)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "c-" + uuid.uuid4().hex[:8],
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    started = time.monotonic()
    consumer.subscribe([TOPIC])
    got, first = 0, None
    while got < records:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                got += 1
                first = first or time.monotonic()
    elapsed = time.monotonic() - started
    consumer.close()
    return first - started, elapsed


def share_seconds(bootstrap: str, records: int) -> tuple[float, float, int]:
    group = "s-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    started = time.monotonic()
    consumer.subscribe([TOPIC])
    got = polls = 0
    first = None
    while got < records:
        messages = consumer.poll(1.0) or ()
        polls += bool(messages)
        got += sum(1 for m in messages if m.error() is None)
        if got and first is None:
            first = time.monotonic()
    elapsed = time.monotonic() - started
    consumer.close()
    return first - started, elapsed, polls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for persist in ("true", "false"):
        # a share member's assignment comes with the heartbeat after its partitions are initialized: a
        # short interval keeps that wait out of the figures (classic members join at once here)
        with BrokerProcess(properties={"eoslog.share.persist.acquisitions": persist,
                                       "group.share.min.heartbeat.interval.ms": "200",
                                       "group.share.heartbeat.interval.ms": "200"}) as broker:
            fill(broker.bootstrap, args.records)
            ratios = []
            for round_ in range(args.rounds):
                classic_join, classic = classic_seconds(broker.bootstrap, args.records)
                share_join, share, polls = share_seconds(broker.bootstrap, args.records)
                ratios.append(classic / share)
                print(f"persist.acquisitions={persist} round {round_ + 1}: classic {args.records / classic:,.0f} rec/s "
                      f"(first record after {classic_join:.2f} s), share {args.records / share:,.0f} rec/s "
                      f"(first record after {share_join:.2f} s, {polls} polls), share/classic {classic / share:.2f}",
                      flush=True)
            print(f"persist.acquisitions={persist}: median share/classic throughput {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
