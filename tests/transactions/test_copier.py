"""Kafka's own exactly-once system test, in small.

100,000 numbered records in a 4-partition input topic are copied to a 3-partition output topic by
transactional consume-transform-produce processes (send_offsets_to_transaction, a third of the
transactions aborted on purpose). While they copy, the broker is SIGKILLed and restarted 3 times and
copiers are SIGKILLed and replaced 3 times; faults are triggered by copy progress, not by the clock, so
they land while work is under way however fast the machine is. A read_committed reader then finds no
duplicates, output set == input set, and each input partition's order preserved."""

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
from txn_clients import READERS, create_topics

from eoslog.testing.process import BrokerProcess

COUNT = 100_000
INPUT_PARTITIONS = 4
OUTPUT_PARTITIONS = 3
COPIERS = 2
CHILD = Path(__file__).parent / "copier_child.py"
# (fraction of the input copied, fault): alternate broker and copier SIGKILLs while the copy runs.
SCHEDULE = [(0.10, "broker"), (0.20, "copier"), (0.35, "broker"), (0.50, "copier"), (0.65, "broker"),
            (0.80, "copier")]

pytestmark = pytest.mark.slow


def seed(bootstrap: str, topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(COUNT):
        while True:
            try:
                producer.produce(topic, value=f"{i % INPUT_PARTITIONS}:{i:06d}".encode(), partition=i % INPUT_PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def committed_progress(bootstrap: str, group: str, topic: str) -> int:
    """Input records whose copy is committed: the group's committed offsets, summed."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(INPUT_PARTITIONS)]
        return sum(max(tp.offset, 0) for tp in consumer.committed(tps, 10))
    except confluent_kafka.KafkaException:
        return 0  # the broker is restarting
    finally:
        consumer.close()


def test_copier_exactly_once_under_broker_and_copier_sigkills(tmp_path):
    with BrokerProcess(data_dir=tmp_path / "data") as broker:
        bs = broker.bootstrap
        create_topics(bs, {"copy-in": INPUT_PARTITIONS, "copy-out": OUTPUT_PARTITIONS})
        seed(bs, "copy-in")
        logs = open(tmp_path / "copiers.log", "w")

        def start(n: int) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, str(CHILD), bs, "copiers", f"copier-{n}", "copy-in", "copy-out", str(OUTPUT_PARTITIONS)],
                stdout=logs, stderr=logs)

        copiers = {n: start(n) for n in range(COPIERS)}
        done = defaultdict(int)
        schedule = list(SCHEDULE)
        deadline = time.monotonic() + 420
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
        assert done == {"broker": 3, "copier": 3}

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
