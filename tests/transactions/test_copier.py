"""Kafka's own exactly-once system test, in small: 100,000 numbered records copied by transactional
consume-transform-produce processes (send_offsets_to_transaction, random aborts) that are SIGKILLed and
restarted throughout. A read_committed reader of the output finds every input record exactly once, in
input order per partition.

Needs the group coordinator (JoinGroup, TxnOffsetCommit, ...): skipped while those APIs are not served."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
import pytest
from txn_clients import READERS, create_topics

from eoslog import api
from eoslog.testing.process import BrokerProcess

COUNT = 100_000
PARTITIONS = 3
CHILD = Path(__file__).parent / "copier_child.py"
GROUP_APIS = {11: "JoinGroup", 28: "TxnOffsetCommit"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not set(GROUP_APIS) <= set(api.HANDLERS),
                       reason="the copier needs consumer groups and TxnOffsetCommit, not served yet"),
]


def seed(bootstrap: str, topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(COUNT):
        while True:
            try:
                producer.produce(topic, value=f"{i:06d}".encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def output_size(bootstrap: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe",
                                         "isolation.level": "read_committed"})
    try:
        total = 0
        for p in range(PARTITIONS):
            total += consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 10, cached=False)[1]
        return total
    finally:
        consumer.close()


def test_copier_exactly_once_under_sigkills(tmp_path):
    with BrokerProcess(data_dir=tmp_path / "data") as broker:
        bs = broker.bootstrap
        create_topics(bs, {"copy-in": PARTITIONS, "copy-out": PARTITIONS})
        seed(bs, "copy-in")
        logs = open(tmp_path / "copiers.log", "w")

        def start(n: int) -> subprocess.Popen:
            return subprocess.Popen([sys.executable, str(CHILD), bs, "copiers", f"copier-{n}", "copy-in", "copy-out"],
                                    stdout=logs, stderr=logs)

        copiers = {n: start(n) for n in range(2)}
        kills = 0
        deadline = time.monotonic() + 600
        try:
            read = READERS["confluent"]
            while time.monotonic() < deadline:
                time.sleep(3)
                victim = kills % 2
                os.kill(copiers[victim].pid, signal.SIGKILL)
                copiers[victim].wait()
                copiers[victim] = start(victim)
                kills += 1
                # The output's committed end counts markers too; stop killing once the data could be complete.
                if output_size(bs, "copy-out") >= COUNT:
                    got = read(bs, [("copy-out", p) for p in range(PARTITIONS)], "read_committed")
                    if sum(len(v) for v in got.values()) >= COUNT:
                        break
        finally:
            for child in copiers.values():
                child.kill()
                child.wait()
            logs.close()
        assert kills >= 3
        got = read(bs, [("copy-out", p) for p in range(PARTITIONS)], "read_committed")
        for (_, partition), values in got.items():
            expected = [f"{i:06d}".encode() for i in range(partition, COUNT, PARTITIONS)]
            assert values == expected, f"partition {partition}: {len(values)} records, first difference at " \
                f"{next((k for k, (a, b) in enumerate(zip(values, expected)) if a != b), min(len(values), len(expected)))}"
