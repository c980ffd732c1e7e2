"""Transaction version 2 (KIP-890 part 2) on a cluster: the partition's leader is not the transaction
coordinator, so a Produce v12 has the leader ask the coordinator (AddPartitionsToTxn v5, VerifyOnly
false) to add the partition before appending. The producer is eoslog's protocol code (no installed
client speaks version 2; tests/transactions/test_transaction_v2.py)."""

from __future__ import annotations

import confluent_kafka
import pytest
from cluster_helpers import consume_all
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.testing.cluster import embedded_cluster

pytestmark = pytest.mark.interop
TRANSACTIONAL_ID = "cluster-tv2"


def _produce(wire: BrokerConnection, producer_id: int, epoch: int, sequence: int, value: bytes) -> int:
    batch = build_batch([SimpleRecord(None, value)], producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=sequence, is_transactional=True)
    Data = messages.ProduceRequest.TopicProduceData
    response = wire.request(0, 12, messages.ProduceRequest(
        transactional_id=TRANSACTIONAL_ID, acks=-1, timeout_ms=30000,
        topic_data=[Data(name="tv2", partition_data=[Data.PartitionProduceData(index=0, records=batch)])]))
    return response.responses[0].partition_responses[0].error_code


def _end(wire: BrokerConnection, producer_id: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    response = wire.request(26, 5, messages.EndTxnRequest(transactional_id=TRANSACTIONAL_ID, producer_id=producer_id,
                                                       producer_epoch=epoch, committed=commit))
    return response.error_code, response.producer_id, response.producer_epoch


def test_produce_v12_adds_its_partition_through_the_remote_coordinator(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        probe = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "probe"})
        probe.init_transactions(60)
        index = partition_for(TRANSACTIONAL_ID, 4)
        state = cluster.wait_for(lambda s: (s.leader_of("__transaction_state", index) or -1) > 0, 30, "txn log led")
        coordinator = state.leader_of("__transaction_state", index)
        leader = next(b for b in cluster.brokers if b != coordinator)
        others = [b for b in cluster.brokers if b != leader]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("tv2", 1, replica_assignment=[[leader, *others]])])["tv2"].result(60)
        cluster.wait_for(lambda s: s.leader_of("tv2", 0) == leader, 30, "led")
        to_coordinator = BrokerConnection.from_bootstrap(cluster.broker(coordinator).bootstrap)
        to_leader = BrokerConnection.from_bootstrap(cluster.broker(leader).bootstrap)
        try:
            features = to_leader.request(18, 3, messages.ApiVersionsRequest(client_software_name="eoslog-test",
                                                                         client_software_version="1"))
            assert [(f.name, f.max_version_level) for f in features.finalized_features] == [("transaction.version", 2)]
            init = to_coordinator.request(22, 4, messages.InitProducerIdRequest(
                transactional_id=TRANSACTIONAL_ID, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
            pid, epoch = init.producer_id, init.producer_epoch
            # No AddPartitionsToTxn: the leader adds the partition with the coordinator.
            assert _produce(to_leader, pid, epoch, 0, b"one") == ErrorCode.NONE
            assert _produce(to_leader, pid, epoch, 1, b"two") == ErrorCode.NONE  # already open here
            assert _end(to_coordinator, pid, epoch, True) == (ErrorCode.NONE, pid, epoch + 1)
            # A delayed batch of the committed transaction: refused, by the coordinator and the partition.
            assert _produce(to_leader, pid, epoch, 2, b"late") == ErrorCode.INVALID_PRODUCER_EPOCH
            assert _produce(to_leader, pid, epoch + 1, 0, b"three") == ErrorCode.NONE
            assert _end(to_coordinator, pid, epoch + 1, False) == (ErrorCode.NONE, pid, epoch + 2)
            assert _produce(to_leader, pid, epoch + 2, 0, b"four") == ErrorCode.NONE
            assert _end(to_coordinator, pid, epoch + 2, True) == (ErrorCode.NONE, pid, epoch + 3)
        finally:
            to_coordinator.close()
            to_leader.close()
        assert consume_all(cluster.bootstrap, "tv2", 1, 3, timeout=30)[0] == [b"one", b"two", b"four"]
        everything = consume_all(cluster.bootstrap, "tv2", 1, 4, timeout=5, isolation="read_uncommitted")[0]
        assert everything == [b"one", b"two", b"three", b"four"]
