"""What Metadata, DescribeCluster and FindCoordinator tell a client on a cluster whose brokers do not all
serve the client's listener (Kafka's answers): such a broker is left out of the broker list, a partition
it leads is LISTENER_NOT_FOUND (LEADER_NOT_AVAILABLE before Metadata v6), a group it coordinates is
COORDINATOR_NOT_AVAILABLE. Handlers called directly with a cluster view; no sockets."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from eoslog.api import describe_cluster, find_coordinator, metadata
from eoslog.api.context import BrokerServices, RequestContext
from eoslog.cluster.cluster_topics import ClusterTopics
from eoslog.cluster.metadata_cache import ZkMetadataCache
from eoslog.cluster.topics import CONSUMER_OFFSETS
from eoslog.cluster.zk.layout import (
    BrokerRegistration,
    ClusterView,
    Endpoint,
    PartitionState,
    TopicAssignment,
)
from eoslog.protocol import messages
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.security.authorizer import AllowAll


def registration(broker_id: int, *listeners: str) -> BrokerRegistration:
    return BrokerRegistration(broker_id, tuple(Endpoint(name, "PLAINTEXT", f"{name.lower()}-{broker_id}", 9000 + i)
                                               for i, name in enumerate(listeners)))


def services_over(view: ClusterView) -> BrokerServices:
    """The services the three handlers read on a cluster, over a given view: the real metadata cache and
    topic registry reading it, no authorizer (every request allowed)."""
    cluster = SimpleNamespace(view=view)
    return BrokerServices(
        node_id=1, cluster_id="c", registry=SimpleNamespace(topics=ClusterTopics(cluster), auto_creates_topics=False),
        replicas=None, metadata=ZkMetadataCache(cluster, lambda name: None), coordinators=None,
        transaction_verification=None, authorizer=AllowAll(), credentials=None, broker_configs=None,
        primary_listener="EXTERNAL")


@pytest.fixture
def broker() -> BrokerServices:
    # Broker 2 serves only EXTERNAL; it leads partition 1 of "t" and every __consumer_offsets partition.
    view = ClusterView(brokers={1: registration(1, "EXTERNAL", "CLIENT"), 2: registration(2, "EXTERNAL"),
                                3: registration(3, "EXTERNAL", "CLIENT")}, controller_id=1)
    view.topics["t"] = TopicAssignment("t", uuid.uuid4(), {0: (1, 2), 1: (2, 1)})
    view.states[("t", 0)] = PartitionState(1, 4, (1, 2), 1)
    view.states[("t", 1)] = PartitionState(2, 4, (2, 1), 1)
    view.topics[CONSUMER_OFFSETS] = TopicAssignment(CONSUMER_OFFSETS, uuid.uuid4(), {0: (2,), 1: (2,)})
    for index in range(2):
        view.states[(CONSUMER_OFFSETS, index)] = PartitionState(2, 0, (2,), 1)
    return services_over(view)


def context(broker, listener: str, version: int):
    connection = SimpleNamespace(listener=SimpleNamespace(name=listener), principal="User:ANONYMOUS",
                                 peer="127.0.0.1:1")
    return RequestContext(broker, connection, SimpleNamespace(api_version=version, client_id="test"))


def test_metadata_leaves_out_brokers_without_the_clients_listener(broker):
    request = messages.MetadataRequest(topics=[messages.MetadataRequest.MetadataRequestTopic(name="t")])
    through_client = metadata.handle(context(broker, "CLIENT", 12), request)
    assert [(b.node_id, b.host, b.port) for b in through_client.brokers] == [(1, "client-1", 9001),
                                                                               (3, "client-3", 9001)]
    partitions = {p.partition_index: p for p in through_client.topics[0].partitions}
    assert (partitions[0].error_code, partitions[0].leader_id) == (0, 1)
    assert (partitions[1].error_code, partitions[1].leader_id) == (ErrorCode.LISTENER_NOT_FOUND, -1)
    before_v6 = metadata.handle(context(broker, "CLIENT", 5), request)
    assert before_v6.topics[0].partitions[1].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    through_external = metadata.handle(context(broker, "EXTERNAL", 12), request)
    assert [(b.node_id, b.host) for b in through_external.brokers] == [(1, "external-1"), (2, "external-2"),
                                                                         (3, "external-3")]
    assert [p.error_code for p in through_external.topics[0].partitions] == [0, 0]


def test_describe_cluster_and_find_coordinator_answer_with_the_clients_listener(broker):
    described = describe_cluster.handle(context(broker, "CLIENT", 1), messages.DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=1))
    assert [(b.broker_id, b.host) for b in described.brokers] == [(1, "client-1"), (3, "client-3")]
    group = "g"
    assert partition_for(group, 2) in (0, 1)  # led by broker 2 either way
    request = messages.FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
    found = find_coordinator.handle(context(broker, "EXTERNAL", 4), request).coordinators[0]
    assert (found.error_code, found.node_id, found.host, found.port) == (0, 2, "external-2", 9000)
    missing = find_coordinator.handle(context(broker, "CLIENT", 4), request).coordinators[0]
    assert (missing.error_code, missing.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
