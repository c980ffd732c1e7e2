"""A consumer group (KIP-848) on a cluster: when the broker leading the group's ``__consumer_offsets``
partition is SIGKILLed, the new leader loads the group's records from the replicated partition, so the
member goes on at its epoch with its assignment (no rejoin) and stale epochs are still fenced."""

from __future__ import annotations

import time
import uuid

import pytest
from cluster_helpers import create_topic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import embedded_cluster

pytestmark = pytest.mark.interop
GROUP = "kip848-move"


def heartbeat(bootstrap: str, member_id: str, epoch: int, **fields):
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        fields.setdefault("rebalance_timeout_ms", 30_000 if epoch == 0 else -1)
        return wire.request(68, 1, messages.ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=member_id, member_epoch=epoch, **fields))
    finally:
        wire.close()


def find_coordinator(bootstrap: str) -> int:
    """FindCoordinator (it creates ``__consumer_offsets`` on first use), until a coordinator is named."""
    deadline = time.monotonic() + 30
    while True:
        wire = BrokerConnection.from_bootstrap(bootstrap)
        try:
            found = wire.request(10, 4, messages.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]))
        finally:
            wire.close()
        [answer] = found.coordinators
        if answer.error_code == 0:
            return answer.node_id
        assert time.monotonic() < deadline, f"no coordinator: {answer}"
        time.sleep(0.1)


def served(send, who: str, timeout: float = 10):
    """``send()``'s answer once it is neither NOT_COORDINATOR nor COORDINATOR_LOAD_IN_PROGRESS."""
    deadline = time.monotonic() + timeout
    while True:
        answer = send()
        if answer.error_code not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return answer
        assert time.monotonic() < deadline, f"{who} never served the group: {answer}"
        time.sleep(0.05)


def test_a_consumer_group_survives_its_coordinators_broker(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "orders", 3, 3, {"min.insync.replicas": "2"})
        index = partition_for(GROUP, 4)  # offsets.topic.num.partitions of the embedded cluster
        coordinator = find_coordinator(cluster.bootstrap)
        assert coordinator == cluster.state().leader_of("__consumer_offsets", index)
        others = [b for b in cluster.brokers if b != coordinator]
        member = uuid.uuid4().hex
        assert heartbeat(cluster.broker(others[0]).bootstrap, member, 0,
                         subscribed_topic_names=["orders"]).error_code == ErrorCode.NOT_COORDINATOR
        # The coordinator's broker may not have loaded the partition yet (its view follows ZooKeeper's by a
        # watch, and a new leader epoch is made durable first): a client retries the same way.
        joined = served(lambda: heartbeat(cluster.broker(coordinator).bootstrap, member, 0,
                                          subscribed_topic_names=["orders"]), "the coordinator")
        assert joined.error_code == 0 and joined.member_epoch == 1
        assert sorted(p for tp in joined.assignment.topic_partitions for p in tp.partitions) == [0, 1, 2]
        owned = [messages.ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
                 for tp in joined.assignment.topic_partitions]

        epoch = cluster.state().epoch_of("__consumer_offsets", index)
        cluster.broker(coordinator).kill()
        moved = cluster.wait_for(lambda s: s.leader_of("__consumer_offsets", index) in others
                                 and s.epoch_of("__consumer_offsets", index) > epoch, 60, "the coordinator moved")
        new_coordinator = cluster.broker(moved.leader_of("__consumer_offsets", index)).bootstrap
        again = served(lambda: heartbeat(new_coordinator, member, joined.member_epoch, topic_partitions=owned),
                       "the new coordinator")  # until the new leader has loaded the partition
        assert again.error_code == 0, again
        assert again.member_epoch == joined.member_epoch
        assert again.assignment.topic_partitions == joined.assignment.topic_partitions
        assert heartbeat(new_coordinator, member, joined.member_epoch + 3).error_code == ErrorCode.FENCED_MEMBER_EPOCH
