"""ACLs on a cluster: kept in ZooKeeper as Kafka keeps them, and enforced by every broker once any one of
them stored it (the change notification under /kafka-acl-changes makes each broker reload).

Cluster members serve PLAINTEXT only for now, so every client, and every broker fetching from another,
is User:ANONYMOUS; with allow.everyone.if.no.acl.found=true the cluster works as usual until an ACL names
a resource, and a DENY on one topic is what the test enforces."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from cluster_helpers import create_topic
from confluent_kafka import KafkaError

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from eoslog.testing.cluster import embedded_cluster
from eoslog.testing.wait import wait_until

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DENY_WRITE = dict(resource_type=int(ResourceType.TOPIC), resource_name="secret",  # noqa: C408 - keyword arguments
                  resource_pattern_type=int(PatternType.LITERAL), principal="User:ANONYMOUS", host="*",
                  operation=int(AclOperation.WRITE), permission_type=int(AclPermissionType.DENY))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    properties = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                  "allow.everyone.if.no.acl.found": "true"}
    with embedded_cluster(2, tmp_path_factory.mktemp("acls"), properties=properties) as running:
        create_topic(running, "secret", 1, 2)
        yield running


def call(cluster, broker_id: int, api_key: int, request):
    wire = BrokerConnection.from_bootstrap(cluster.broker(broker_id).bootstrap)
    try:
        return wire.request(api_key, 2, request)
    finally:
        wire.close()


def acls_seen_by(cluster, broker_id: int) -> list:
    response = call(cluster, broker_id, DESCRIBE_ACLS, messages.DescribeAclsRequest(
        resource_type_filter=int(ResourceType.ANY), resource_name_filter=None, pattern_type_filter=int(PatternType.ANY),
        principal_filter=None, host_filter=None, operation=int(AclOperation.ANY),
        permission_type=int(AclPermissionType.ANY)))
    assert response.error_code == 0
    return [(r.resource_name, a.principal, a.operation, a.permission_type) for r in response.resources for a in r.acls]



def produce_outcome(cluster, topic: str):
    outcomes = []
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                         "message.timeout.ms": 15000})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(30)
    assert len(outcomes) == 1
    return outcomes[0]


def test_an_acl_stored_through_one_broker_is_enforced_by_the_other(cluster):
    leader = cluster.state().leader_of("secret", 0)
    other = next(b for b in cluster.brokers if b != leader)
    assert produce_outcome(cluster, "secret") is None  # no ACL on it yet: allowed, replicated (acks=all)

    response = call(cluster, other, CREATE_ACLS, messages.CreateAclsRequest(
        creations=[messages.CreateAclsRequest.AclCreation(**DENY_WRITE)]))
    assert [r.error_code for r in response.results] == [0]
    expected = [("secret", "User:ANONYMOUS", int(AclOperation.WRITE), int(AclPermissionType.DENY))]
    wait_until(lambda: acls_seen_by(cluster, leader) == expected, 30, "the leader reloading the ACL")
    # Kafka's znode and JSON
    data, _ = cluster._client().get("/kafka-acl/Topic/secret")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:ANONYMOUS", "permissionType": "Deny", "operation": "Write", "host": "*"}]}

    error = produce_outcome(cluster, "secret")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    response = call(cluster, leader, DELETE_ACLS, messages.DeleteAclsRequest(filters=[
        messages.DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=int(ResourceType.TOPIC), resource_name_filter="secret",
            pattern_type_filter=int(PatternType.LITERAL), principal_filter=None, host_filter=None,
            operation=int(AclOperation.ANY), permission_type=int(AclPermissionType.ANY))]))
    assert [len(r.matching_acls) for r in response.filter_results] == [1]
    wait_until(lambda: acls_seen_by(cluster, other) == [], 30, "the other broker reloading the deletion")
    assert produce_outcome(cluster, "secret") is None
