"""Transactions on a cluster, as far as this step goes: the transaction coordinator of an id is the
leader of its ``__transaction_state`` partition (others answer NOT_COORDINATOR, and clients find the
right one), its records are replicated, and a transaction whose partitions are led by the
coordinator's broker commits and aborts with read_committed semantics. (Markers to partitions led by
other brokers and coordinator failover are the next issue's.)"""

from __future__ import annotations

import confluent_kafka
import pytest
from cluster_helpers import consume_all, wait_replicas_identical
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.coordinator.partitioning import partition_for
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import embedded_cluster
from eoslog.tools.txn_cli import KafkaWire

pytestmark = pytest.mark.interop
TRANSACTIONAL_ID = "cluster-txn"


def test_only_the_coordinator_answers_and_a_colocated_transaction_commits_and_aborts(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        # __transaction_state exists once a FindCoordinator asked for it; a producer's init does that.
        probe = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                          "transactional.id": "probe", "transaction.timeout.ms": 10000})
        probe.init_transactions(60)
        index = partition_for(TRANSACTIONAL_ID, 4)  # transaction.state.log.num.partitions of the cluster
        state = cluster.wait_for(lambda s: (s.leader_of("__transaction_state", index) or -1) > 0, 30, "txn log led")
        coordinator = state.leader_of("__transaction_state", index)
        others = [b for b in cluster.brokers if b != coordinator]
        wire = KafkaWire(cluster.broker(others[0]).bootstrap)
        try:
            refused = wire.call(22, 4, messages.InitProducerIdRequest(
                transactional_id=TRANSACTIONAL_ID, transaction_timeout_ms=10000, producer_id=-1, producer_epoch=-1))
        finally:
            wire.close()
        assert refused.error_code == ErrorCode.NOT_COORDINATOR
        # The data partition led by the coordinator's broker (a manual assignment, preferred leader first).
        replicas = [coordinator, *others]
        admin.create_topics([NewTopic("ledger", 1, replica_assignment=[replicas],
                                      config={"min.insync.replicas": "2"})])["ledger"].result(60)
        cluster.wait_for(lambda s: s.leader_of("ledger", 0) == coordinator and len(s.isr_of("ledger", 0)) == 3,
                         30, "ledger led by the coordinator's broker")
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                             "transactional.id": TRANSACTIONAL_ID, "transaction.timeout.ms": 10000})
        producer.init_transactions(60)
        for outcome in ("commit", "abort", "commit"):
            producer.begin_transaction()
            for i in range(5):
                producer.produce("ledger", f"{outcome}-{i}".encode(), partition=0)
            producer.flush(30)  # in the log before the outcome (an abort would otherwise purge them unsent)
            getattr(producer, f"{outcome}_transaction")(60)
        committed = [f"commit-{i}".encode() for i in range(5)] * 2
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader",
                                             "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                             "enable.auto.commit": False})
        consumer.assign([confluent_kafka.TopicPartition("ledger", 0, 0)])
        seen = []
        while len(seen) < 10:
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                seen.append(message.value())
        consumer.close()
        assert seen == committed
        # Every replica holds the same bytes, markers included, and read_uncommitted sees all 15 records.
        wait_replicas_identical(cluster, "ledger", 0)
        everything = consume_all(cluster.bootstrap, "ledger", 1, 15, timeout=30, isolation="read_uncommitted")[0]
        assert sorted(everything) == sorted(committed + [f"abort-{i}".encode() for i in range(5)])
