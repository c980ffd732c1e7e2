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


def test_offsets_in_a_transaction_reach_a_group_coordinator_on_another_broker(tmp_path):
    # The data partition is led by the transaction coordinator's broker, the group's __consumer_offsets
    # partition by another: the COMMIT marker for the offsets goes there as WriteTxnMarkers.
    with embedded_cluster(3, tmp_path) as cluster:
        probe = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "probe"})
        probe.init_transactions(60)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        consumer_probe = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "probe"})
        consumer_probe.list_topics(timeout=30)
        consumer_probe.close()
        index = partition_for(TRANSACTIONAL_ID, 4)
        state = cluster.wait_for(lambda s: (s.leader_of("__transaction_state", index) or -1) > 0
                                 and all((s.leader_of("__consumer_offsets", p) or -1) > 0 for p in range(4))
                                 if ("__consumer_offsets", 0) in s.replicas else False, 60, "internal topics led")
        coordinator = state.leader_of("__transaction_state", index)
        group = next(g for g in (f"copier-{n}" for n in range(1000))
                     if state.leader_of("__consumer_offsets", partition_for(g, 4)) != coordinator)
        others = [b for b in cluster.brokers if b != coordinator]
        admin.create_topics([NewTopic("out", 1, replica_assignment=[[coordinator, *others]]),
                             NewTopic("in", 1, 3)])["out"].result(60)
        cluster.wait_for(lambda s: s.leader_of("out", 0) == coordinator, 30, "out led by the coordinator's broker")
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                             "transactional.id": TRANSACTIONAL_ID})
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce("out", b"copied", partition=0)
        offsets = [confluent_kafka.TopicPartition("in", 0, 42)]
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                             "enable.auto.commit": False})
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
        committed = consumer.committed([confluent_kafka.TopicPartition("in", 0)], timeout=30)
        consumer.close()
        assert committed[0].offset == 42
        # The group coordinator checks with the remote transaction coordinator (KIP-890 part 1): offsets
        # in a transaction that is not ongoing there, or from another producer, are refused.
        group_leader = state.leader_of("__consumer_offsets", partition_for(group, 4))
        wire = KafkaWire(cluster.broker(group_leader).bootstrap)
        try:
            Topic = messages.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
            Partition = messages.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
            stale = wire.call(28, 3, messages.TxnOffsetCommitRequest(
                transactional_id=TRANSACTIONAL_ID, group_id=group, producer_id=987654, producer_epoch=0,
                generation_id=-1, member_id="", group_instance_id=None, topics=[Topic(name="in", partitions=[
                    Partition(partition_index=0, committed_offset=7, committed_leader_epoch=-1,
                              committed_metadata=None)])]))
        finally:
            wire.close()
        assert stale.topics[0].partitions[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH
