"""The consume-transform-produce copier of tests/transactions/test_copier.py with the consumer group
protocol (KIP-848): its TxnOffsetCommits are fenced by member epoch. Copiers are SIGKILLed and replaced
while they copy, and the broker is SIGKILLed once (the group comes back from its records); the same
checks: a read_committed reader finds no duplicates, output set == input set, each input partition's
order preserved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import confluent_kafka
import pytest

from eoslog.testing.process import BrokerProcess
from tests.groups.consumer_protocol.conftest import CONSUMER_GROUP_PROPERTIES
from tests.transactions.txn_clients import READERS, create_topics

COUNT = 20_000
INPUT_PARTITIONS = 4
OUTPUT_PARTITIONS = 3
COPIERS = 2
CHILD = Path(__file__).parents[2] / "transactions" / "copier_child.py"
SCHEDULE = [(0.15, "copier"), (0.40, "broker"), (0.60, "copier")]

pytestmark = pytest.mark.slow  # ~25 s, like its classic sibling (tests/transactions/test_copier.py)


def seed(bootstrap: str, topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(COUNT):
        while True:
            try:
                producer.produce(topic, value=f"{i % INPUT_PARTITIONS}:{i:06d}".encode(), partition=i % INPUT_PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def committed_progress(bootstrap: str, group: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(INPUT_PARTITIONS)]
        return sum(max(tp.offset, 0) for tp in consumer.committed(tps, 10))
    except confluent_kafka.KafkaException:
        return 0  # the broker is restarting
    finally:
        consumer.close()


def test_copier_exactly_once_with_the_consumer_protocol(tmp_path):
    with BrokerProcess(data_dir=tmp_path / "data", properties=CONSUMER_GROUP_PROPERTIES) as broker:
        bs = broker.bootstrap
        create_topics(bs, {"copy-in": INPUT_PARTITIONS, "copy-out": OUTPUT_PARTITIONS})
        seed(bs, "copy-in")
        logs = open(tmp_path / "copiers.log", "w")  # noqa: SIM115 - shared by every copier started below

        def start(n: int) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, str(CHILD), bs, "copiers", f"copier-{n}", "copy-in", "copy-out",
                 str(OUTPUT_PARTITIONS), "consumer"], stdout=logs, stderr=logs)

        copiers = {n: start(n) for n in range(COPIERS)}
        done = defaultdict(int)
        schedule = list(SCHEDULE)
        deadline = time.monotonic() + 120
        try:
            while True:
                assert time.monotonic() < deadline, f"copy did not finish; faults so far {dict(done)}"
                for n, child in copiers.items():
                    if child.poll() is not None:  # a copier that hit a fatal error exits; replace it
                        copiers[n] = start(n)
                progress = committed_progress(bs, "copiers", "copy-in")
                if schedule and progress >= schedule[0][0] * COUNT:
                    _, fault = schedule.pop(0)
                    if fault == "broker":
                        broker.restart(hard=True)
                    else:
                        victim = done["copier"] % COPIERS
                        os.kill(copiers[victim].pid, signal.SIGKILL)
                        copiers[victim].wait()
                        copiers[victim] = start(victim)
                    done[fault] += 1
                if progress >= COUNT and not schedule:
                    break
                time.sleep(0.1)
        finally:
            for child in copiers.values():
                child.kill()
                child.wait()
            logs.close()
        assert done == {"broker": 1, "copier": 2}

        got = READERS["confluent"](bs, [("copy-out", p) for p in range(OUTPUT_PARTITIONS)], "read_committed")
        everything = [value for values in got.values() for value in values]
        assert len(everything) == len(set(everything)), "duplicates in the output"
        assert set(everything) == {f"{i % INPUT_PARTITIONS}:{i:06d}".encode() for i in range(COUNT)}
        for values in got.values():
            per_input = defaultdict(list)
            for value in values:
                source, sequence = value.split(b":")
                per_input[source].append(int(sequence))
            for source, sequences in per_input.items():
                assert sequences == sorted(sequences), f"input partition {source.decode()} lost its order"
