"""Kafka's exactly-once system test on a 3-broker cluster (issue 14's test 1).

Numbered records in a 4-partition input topic are copied to a 3-partition output topic (both RF=3,
min.insync.replicas=2) by two transactional consume-transform-produce copiers (read_committed,
send_offsets_to_transaction, a third of the transactions aborted on purpose). While they copy, each of
these is SIGKILLed twice: the broker leading an output partition, the broker coordinating a copier's
transactional id, the broker coordinating the copiers' group, and a copier. A killed broker is started
again and back in every ISR before the next fault, so the cluster never falls below min.insync.replicas.
Faults are triggered by copy progress, not by the clock. A read_committed reader then finds no
duplicates, output set == input set, and each input partition's order kept; every replica of every
output partition ends byte-for-byte identical."""

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
from cluster_helpers import consume_all, create_topic, wait_replicas_identical

from eoslog.protocol.coordinator_partition import partition_for
from eoslog.testing.cluster import EmbeddedCluster, embedded_cluster
from tests.transactions.copier_run import check_copied, commit_start_offsets

COUNT = 20_000
INPUT_PARTITIONS = 4
OUTPUT_PARTITIONS = 3
COPIERS = 2
GROUP = "copiers"
CHILD = Path(__file__).parent.parent / "transactions" / "copier_child.py"
# (fraction of the input copied, fault), twice round the four kinds.
SCHEDULE = [(0.06, "data-leader"), (0.14, "txn-coordinator"), (0.22, "group-coordinator"), (0.30, "copier"),
            (0.42, "data-leader"), (0.54, "txn-coordinator"), (0.66, "group-coordinator"), (0.78, "copier")]
INTERNAL_PARTITIONS = 4  # offsets.topic.num.partitions and transaction.state.log.num.partitions of the cluster

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def seed(bootstrap: str, topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                         "linger.ms": 5})
    for i in range(COUNT):
        while True:
            try:
                producer.produce(topic, value=f"{i % INPUT_PARTITIONS}:{i:06d}".encode(),
                                 partition=i % INPUT_PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def committed_progress(bootstrap: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        tps = [confluent_kafka.TopicPartition("copy-in", p) for p in range(INPUT_PARTITIONS)]
        return sum(max(tp.offset, 0) for tp in consumer.committed(tps, 10))
    except confluent_kafka.KafkaException:
        return 0  # a coordinator is moving
    finally:
        consumer.close()


def all_in_sync(cluster: EmbeddedCluster):
    """Every partition led, with every replica in its ISR."""
    def check(state) -> bool:
        return len(state.brokers) == len(cluster.brokers) and all(
            (state.leader_of(t, p) or -1) > 0 and len(state.isr_of(t, p)) == len(replicas)
            for (t, p), replicas in state.replicas.items())
    return check


def victim_broker(cluster: EmbeddedCluster, fault: str) -> int:
    state = cluster.state()
    if fault == "data-leader":
        return state.leader_of("copy-out", 0)
    if fault == "txn-coordinator":
        return state.leader_of("__transaction_state", partition_for("copier-0", INTERNAL_PARTITIONS))
    return state.leader_of("__consumer_offsets", partition_for(GROUP, INTERNAL_PARTITIONS))


def test_copier_exactly_once_under_leader_coordinator_and_copier_sigkills(tmp_path):
    with embedded_cluster(3, tmp_path, properties={"min.insync.replicas": "2"}) as cluster:
        bootstrap = cluster.bootstrap
        create_topic(cluster, "copy-in", INPUT_PARTITIONS, 3)
        create_topic(cluster, "copy-out", OUTPUT_PARTITIONS, 3)
        seed(bootstrap, "copy-in")
        commit_start_offsets(bootstrap, GROUP, "copy-in", INPUT_PARTITIONS)  # see there: a client bug
        logs = open(tmp_path / "copiers.log", "w")

        def start(n: int) -> subprocess.Popen:
            return subprocess.Popen([sys.executable, str(CHILD), bootstrap, GROUP, f"copier-{n}", "copy-in",
                                     "copy-out", str(OUTPUT_PARTITIONS)], stdout=logs, stderr=logs)

        copiers = {n: start(n) for n in range(COPIERS)}
        done: dict[str, list[int]] = defaultdict(list)
        schedule = list(SCHEDULE)
        deadline = time.monotonic() + 300
        try:
            # The internal topics exist once the copiers started; from then on a fault may hit them.
            cluster.wait_for(lambda s: ("__transaction_state", 0) in s.replicas
                             and ("__consumer_offsets", 0) in s.replicas, 60, "internal topics created")
            while True:
                assert time.monotonic() < deadline, f"copy did not finish; faults so far {dict(done)}"
                for n, child in copiers.items():
                    if child.poll() is not None:  # a copier that hit a fatal error exits; replace it
                        copiers[n] = start(n)
                progress = committed_progress(bootstrap)
                if schedule and progress >= schedule[0][0] * COUNT:
                    _, fault = schedule.pop(0)
                    if fault == "copier":
                        victim = len(done["copier"]) % COPIERS
                        os.kill(copiers[victim].pid, signal.SIGKILL)
                        copiers[victim].wait()
                        copiers[victim] = start(victim)
                    else:
                        victim = victim_broker(cluster, fault)
                        cluster.broker(victim).kill()
                        cluster.wait_for(lambda s, v=victim: v not in s.brokers, 30, f"broker {victim} gone")
                        cluster.broker(victim).start()
                        cluster.wait_for(all_in_sync(cluster), 120, f"broker {victim} back in every ISR")
                    done[fault].append(victim)
                if progress >= COUNT and not schedule:
                    break
                time.sleep(0.1)
        finally:
            for child in copiers.values():
                child.kill()
                child.wait()
            logs.close()
        assert {fault: len(victims) for fault, victims in done.items()} == {
            "data-leader": 2, "txn-coordinator": 2, "group-coordinator": 2, "copier": 2}

        got = consume_all(bootstrap, "copy-out", OUTPUT_PARTITIONS, COUNT, timeout=120)
        check_copied(got, COUNT)
        for partition in range(OUTPUT_PARTITIONS):
            wait_replicas_identical(cluster, "copy-out", partition)
