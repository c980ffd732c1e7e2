"""The consume-transform-produce copier run shared by the copier tests (classic and consumer group protocol
on one broker; the cluster copier uses its input and its checks): numbered records copied from a
4-partition topic to a 3-partition one by transactional copiers (copier_child.py) while faults land at
fractions of the copy, then a read_committed reader's checks -- no duplicates, output set == input set,
each input partition's order preserved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import confluent_kafka

from eoslog.testing.process import BrokerProcess
from tests.transactions.txn_clients import READERS, create_topics

INPUT_PARTITIONS = 4
OUTPUT_PARTITIONS = 3
COPIERS = 2
CHILD = Path(__file__).parent / "copier_child.py"


def expected(count: int) -> set[bytes]:
    return {f"{i % INPUT_PARTITIONS}:{i:06d}".encode() for i in range(count)}


def seed(bootstrap: str, topic: str, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(count):
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


def check_copied(got: dict, count: int) -> None:
    """``got``: output partition -> values a read_committed reader found there."""
    everything = [value for values in got.values() for value in values]
    assert len(everything) == len(set(everything)), "duplicates in the output"
    assert set(everything) == expected(count)
    for values in got.values():
        per_input = defaultdict(list)
        for value in values:
            source, sequence = value.split(b":")
            per_input[source].append(int(sequence))
        for source, sequences in per_input.items():
            assert sequences == sorted(sequences), f"input partition {source.decode()} lost its order"


def run_copier(tmp_path: Path, count: int, schedule: list[tuple[float, str]], *, protocol: str = "classic",
               properties: dict[str, str] | None = None, deadline_s: float = 420) -> None:
    """Seeds ``count`` records, copies them with COPIERS copiers of the group ``protocol`` ("classic" or
    "consumer"), SIGKILLs the broker ("broker") or a copier ("copier") when the committed progress reaches
    each fraction of ``schedule`` (faults follow the copy, not the clock), and checks the output."""
    with BrokerProcess(data_dir=tmp_path / "data", properties=properties) as broker:
        bs = broker.bootstrap
        create_topics(bs, {"copy-in": INPUT_PARTITIONS, "copy-out": OUTPUT_PARTITIONS})
        seed(bs, "copy-in", count)
        logs = open(tmp_path / "copiers.log", "w")  # noqa: SIM115 - shared by every copier started below
        extra = [] if protocol == "classic" else [protocol]

        def start(n: int) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, str(CHILD), bs, "copiers", f"copier-{n}", "copy-in", "copy-out",
                 str(OUTPUT_PARTITIONS), *extra], stdout=logs, stderr=logs)

        copiers = {n: start(n) for n in range(COPIERS)}
        done: dict[str, int] = defaultdict(int)
        pending = list(schedule)
        deadline = time.monotonic() + deadline_s
        try:
            while True:
                assert time.monotonic() < deadline, f"copy did not finish; faults so far {dict(done)}"
                for n, child in copiers.items():
                    if child.poll() is not None:  # a copier that hit a fatal error exits; replace it
                        copiers[n] = start(n)
                progress = committed_progress(bs, "copiers", "copy-in")
                if pending and progress >= pending[0][0] * count:
                    _, fault = pending.pop(0)
                    if fault == "broker":
                        broker.restart(hard=True)
                    else:
                        victim = done["copier"] % COPIERS
                        os.kill(copiers[victim].pid, signal.SIGKILL)
                        copiers[victim].wait()
                        copiers[victim] = start(victim)
                    done[fault] += 1
                if progress >= count and not pending:
                    break
                time.sleep(0.1)
        finally:
            for child in copiers.values():
                child.kill()
                child.wait()
            logs.close()
        wanted: dict[str, int] = defaultdict(int)
        for _, fault in schedule:
            wanted[fault] += 1
        assert done == wanted

        check_copied(READERS["confluent"](bs, [("copy-out", p) for p in range(OUTPUT_PARTITIONS)], "read_committed"),
                     count)
