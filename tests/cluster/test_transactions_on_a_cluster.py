"""Transactions on a cluster, as far as this step goes: the transaction coordinator of an id is the
leader of its ``__transaction_state`` partition (others answer NOT_COORDINATOR, and clients find the
right one), its records are replicated, and a transaction whose partitions are led by the
coordinator's broker commits and aborts with read_committed semantics. (Markers to partitions led by
other brokers and coordinator failover are the next issue's.) A zombie producer is fenced across a
coordinator move."""

from __future__ import annotations

import confluent_kafka
import pytest
from cluster_helpers import consume_all, create_topic, wait_replicas_identical
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import embedded_cluster

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
        wire = BrokerConnection.from_bootstrap(cluster.broker(others[0]).bootstrap)
        try:
            refused = wire.request(22, 4, messages.InitProducerIdRequest(
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
        # A group's first coordinator lookup makes the controller create __consumer_offsets. committed()
        # waits for that lookup; list_topics() did not, and a consumer closed before its background
        # FindCoordinator left (a loaded machine) never made the topic.
        consumer_probe = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "probe"})
        consumer_probe.committed([confluent_kafka.TopicPartition("probe", 0)], timeout=60)
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
        wire = BrokerConnection.from_bootstrap(cluster.broker(group_leader).bootstrap)
        try:
            Topic = messages.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
            Partition = messages.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
            stale = wire.request(28, 3, messages.TxnOffsetCommitRequest(
                transactional_id=TRANSACTIONAL_ID, group_id=group, producer_id=987654, producer_epoch=0,
                generation_id=-1, member_id="", group_instance_id=None, topics=[Topic(name="in", partitions=[
                    Partition(partition_index=0, committed_offset=7, committed_leader_epoch=-1,
                              committed_metadata=None)])]))
        finally:
            wire.close()
        assert stale.topics[0].partitions[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_zombie_producer_is_fenced_across_a_coordinator_move(tmp_path):
    # Producer A opens a transaction with records on a partition led by another broker than its
    # coordinator C1. C1 is SIGSTOPped: its ZooKeeper session expires and C2 takes over the id's
    # __transaction_state partition. Producer B, the same transactional id, initialises on C2 (epoch
    # bump, A's transaction aborted). Then C1 resumes and A carries on as if nothing happened: it is
    # fenced, and none of its records ever becomes visible to read_committed.
    with embedded_cluster(3, tmp_path) as cluster:
        probe = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "probe"})
        probe.init_transactions(60)
        index = partition_for(TRANSACTIONAL_ID, 4)
        state = cluster.wait_for(lambda s: (s.leader_of("__transaction_state", index) or -1) > 0
                                 and len(s.isr_of("__transaction_state", index)) == 3, 30, "txn log in sync")
        c1 = state.leader_of("__transaction_state", index)
        others = [b for b in cluster.brokers if b != c1]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics(
            [NewTopic("fenced", 1, replica_assignment=[[others[0], others[1], c1]])])["fenced"].result(60)
        cluster.wait_for(lambda s: s.leader_of("fenced", 0) == others[0] and len(s.isr_of("fenced", 0)) == 3,
                         30, "fenced led away from the coordinator")
        config = {"bootstrap.servers": cluster.bootstrap, "transactional.id": TRANSACTIONAL_ID,
                  "transaction.timeout.ms": 60000, "linger.ms": 0}
        zombie = confluent_kafka.Producer(config)
        zombie.init_transactions(60)
        zombie.begin_transaction()
        for i in range(5):
            zombie.produce("fenced", f"zombie-{i}".encode(), partition=0)
        assert zombie.flush(30) == 0

        cluster.broker(c1).pause()
        try:
            state = cluster.wait_for(lambda s: s.leader_of("__transaction_state", index) not in (None, -1, c1),
                                     60, "the id's coordinator moved")
            c2 = state.leader_of("__transaction_state", index)
            successor = confluent_kafka.Producer(config)
            successor.init_transactions(60)
            successor.begin_transaction()
            successor.produce("fenced", b"successor", partition=0)
            successor.commit_transaction(60)
        finally:
            cluster.broker(c1).resume()
        cluster.wait_for(lambda s: c1 in s.brokers and len(s.isr_of("__transaction_state", index)) == 3,
                         60, "the old coordinator back as a follower")

        with pytest.raises(confluent_kafka.KafkaException) as failure:
            # The partition refuses the late record (it has seen the abort marker of the newer epoch),
            # or the coordinator the commit: either way the zombie learns it is fenced.
            zombie.produce("fenced", b"zombie-late", partition=0)
            zombie.flush(30)
            zombie.commit_transaction(60)
        error = failure.value.args[0]
        assert error.fatal() or error.txn_requires_abort(), error
        assert error.code() in (confluent_kafka.KafkaError._FENCED, confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH,
                                confluent_kafka.KafkaError.PRODUCER_FENCED, confluent_kafka.KafkaError.INVALID_TXN_STATE), error

        visible = consume_all(cluster.bootstrap, "fenced", 1, 1, timeout=30)[0]
        everything = consume_all(cluster.bootstrap, "fenced", 1, 6, timeout=30, isolation="read_uncommitted")[0]
        assert visible == [b"successor"]
        assert sorted(everything) == sorted([f"zombie-{i}".encode() for i in range(5)] + [b"successor"])
        assert c2 != c1
        # Nothing more arrives: the late record of the fenced zombie was refused, not parked.
        assert consume_all(cluster.bootstrap, "fenced", 1, 7, timeout=5, isolation="read_uncommitted")[0] == everything
        wait_replicas_identical(cluster, "fenced", 0)


def _transactional_produce(wire: BrokerConnection, producer_id: int, epoch: int, sequence: int, value: bytes,
                           topic: str = "late") -> int:
    from eoslog.records.builder import SimpleRecord, build_batch

    batch = build_batch([SimpleRecord(None, value)], producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=sequence, is_transactional=True)
    Data = messages.ProduceRequest.TopicProduceData
    response = wire.request(0, 9, messages.ProduceRequest(
        transactional_id=TRANSACTIONAL_ID, acks=-1, timeout_ms=30000,
        topic_data=[Data(name=topic, partition_data=[Data.PartitionProduceData(index=0, records=batch)])]))
    return response.responses[0].partition_responses[0].error_code


def _add_partition(wire: BrokerConnection, producer_id: int, epoch: int, topic: str) -> int:
    Topic = messages.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    response = wire.request(24, 3, messages.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TRANSACTIONAL_ID, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[Topic(name=topic, partitions=[0])]))
    return response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def test_a_delayed_produce_never_lands_outside_its_transaction_when_the_coordinator_is_elsewhere(tmp_path):
    # KIP-890 part 1 across brokers, on the wire: the leader of "late" is not the transaction
    # coordinator, so it asks the coordinator before appending the first batch of a transaction.
    with embedded_cluster(3, tmp_path) as cluster:
        probe = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "probe"})
        probe.init_transactions(60)
        index = partition_for(TRANSACTIONAL_ID, 4)
        state = cluster.wait_for(lambda s: (s.leader_of("__transaction_state", index) or -1) > 0, 30, "txn log led")
        coordinator = state.leader_of("__transaction_state", index)
        leader = next(b for b in cluster.brokers if b != coordinator)
        others = [b for b in cluster.brokers if b != leader]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for topic in ("late", "other"):
            admin.create_topics([NewTopic(topic, 1, replica_assignment=[[leader, *others]])])[topic].result(60)
        cluster.wait_for(lambda s: s.leader_of("late", 0) == leader == s.leader_of("other", 0), 30, "led")
        to_coordinator = BrokerConnection.from_bootstrap(cluster.broker(coordinator).bootstrap)
        to_leader = BrokerConnection.from_bootstrap(cluster.broker(leader).bootstrap)
        try:
            init = to_coordinator.request(22, 4, messages.InitProducerIdRequest(
                transactional_id=TRANSACTIONAL_ID, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
            pid, epoch = init.producer_id, init.producer_epoch
            # Not added to any transaction yet: refused, nothing written.
            assert _transactional_produce(to_leader, pid, epoch, 0, b"early") == ErrorCode.INVALID_TXN_STATE
            assert _add_partition(to_coordinator, pid, epoch, "late") == ErrorCode.NONE
            assert _transactional_produce(to_leader, pid, epoch, 0, b"first") == ErrorCode.NONE
            assert _transactional_produce(to_leader, pid, epoch, 1, b"second") == ErrorCode.NONE  # already open
            # A stale epoch is fenced by the coordinator's answer.
            assert _add_partition(to_coordinator, pid, epoch, "other") == ErrorCode.NONE
            assert _transactional_produce(to_leader, pid, epoch - 1 if epoch else epoch + 7, 0, b"stale",
                                          "other") == ErrorCode.INVALID_PRODUCER_EPOCH
            end = to_coordinator.request(26, 3, messages.EndTxnRequest(
                transactional_id=TRANSACTIONAL_ID, producer_id=pid, producer_epoch=epoch, committed=True))
            assert end.error_code == ErrorCode.NONE
            # The next transaction covers only "other": a delayed batch for "late" (the committed
            # transaction's, arriving after its marker) must not join it.
            assert _add_partition(to_coordinator, pid, epoch, "other") == ErrorCode.NONE
            assert _transactional_produce(to_leader, pid, epoch, 2, b"delayed") == ErrorCode.INVALID_TXN_STATE
            end = to_coordinator.request(26, 3, messages.EndTxnRequest(
                transactional_id=TRANSACTIONAL_ID, producer_id=pid, producer_epoch=epoch, committed=True))
            assert end.error_code == ErrorCode.NONE
        finally:
            to_coordinator.close()
            to_leader.close()
        assert consume_all(cluster.bootstrap, "late", 1, 2, timeout=30)[0] == [b"first", b"second"]
        everything = consume_all(cluster.bootstrap, "late", 1, 3, timeout=5, isolation="read_uncommitted")[0]
        assert everything == [b"first", b"second"]


def test_a_transaction_spans_single_replica_partitions_hosted_by_other_brokers_than_its_coordinator(tmp_path):
    """RF=1 on 3 brokers: two of the three partitions have no replica on the coordinator's broker at all.
    AddPartitionsToTxn must take them (they exist in the cluster), and the markers reach them."""
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "rf1", 3, 1)
        state = cluster.state()
        assert len({state.leader_of("rf1", p) for p in range(3)}) == 3  # one partition on each broker
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "rf1-txn",
                                             "linger.ms": 5})
        producer.init_transactions(60)
        for outcome in ("commit", "abort", "commit"):
            producer.begin_transaction()
            for i in range(30):
                producer.produce("rf1", f"{outcome}-{i}".encode(), partition=i % 3)
            if outcome == "commit":
                producer.commit_transaction(30)
            else:
                assert producer.flush(30) == 0
                producer.abort_transaction(30)
        got = consume_all(cluster.bootstrap, "rf1", 3, 60, timeout=60)
        assert sorted(v for values in got.values() for v in values) == sorted([f"commit-{i}".encode()
                                                                                for i in range(30)] * 2)
        everything = consume_all(cluster.bootstrap, "rf1", 3, 90, timeout=60, isolation="read_uncommitted")
        assert sum(len(v) for v in everything.values()) == 90  # the aborted ones are in the log, hidden
