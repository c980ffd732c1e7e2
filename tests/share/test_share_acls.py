"""Share groups under ACLs, as Kafka checks them (a real broker process with mutual TLS, principals from
client certificates, as tests/security/test_acls.py sets it up): ShareGroupHeartbeat, ShareFetch and
ShareAcknowledge need READ on the group, then ShareFetch READ on each topic (its partitions answer
TOPIC_AUTHORIZATION_FAILED); the share coordinator's APIs and FindCoordinator key type 2 need
CLUSTER_ACTION."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.security.client import ClientSecurity
from eoslog.testing.certs import make_certs
from eoslog.testing.process import BrokerProcess, free_port

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), ("alice", "admin"))


@pytest.fixture(scope="module")
def broker(certs, tmp_path_factory):
    ssl_port = free_port()
    properties = {
        "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.location": str(certs.broker), "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
        "offsets.topic.num.partitions": "1", "share.coordinator.state.topic.num.partitions": "1",
    }
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("share-acls") / "data", properties=properties) as process:
        process.ssl_port = ssl_port
        yield process


def config(broker, certs, who: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{broker.ssl_port}", "security.protocol": "ssl",
            "ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(certs.client_cert(who)),
            "ssl.key.location": str(certs.client_key(who))}


def grant(admin: AdminClient, principal: str, operation: AclOperation, rtype: ResourceType, name: str) -> None:
    binding = AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", operation, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(30)


def connect(broker, certs, who: str) -> BrokerConnection:
    properties = {k: v for k, v in config(broker, certs, who).items() if k != "bootstrap.servers"}
    return BrokerConnection("127.0.0.1", broker.ssl_port, timeout_s=10,
                            security=ClientSecurity.from_properties(properties))


def heartbeat(conn, group: str, topic: str):
    return conn.request(76, 1, messages.ShareGroupHeartbeatRequest(
        group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rack_id=None, subscribed_topic_names=[topic]))


def share_fetch(conn, group: str, topic_id):
    request = messages.ShareFetchRequest
    return conn.request(78, 2, request(
        group_id=group, member_id=uuid.uuid4().hex, share_session_epoch=0, max_wait_ms=0, min_bytes=1,
        max_bytes=1 << 20, max_records=10, batch_size=10, share_acquire_mode=0, is_renew_ack=False,
        topics=[request.FetchTopic(topic_id=topic_id, partitions=[request.FetchPartition(
            partition_index=0, partition_max_bytes=0, acknowledgement_batches=[])])], forgotten_topics_data=[]))


def test_share_apis_need_read_on_the_group_and_the_topic(broker, certs):
    admin = AdminClient(config(broker, certs, "admin"))
    topic, group = "sacl-" + uuid.uuid4().hex[:6], "sacl-g-" + uuid.uuid4().hex[:6]
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with connect(broker, certs, "admin") as root:
        topic_id = root.request(3, 12, messages.MetadataRequest(
            topics=[messages.MetadataRequest.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=topic)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)).topics[0].topic_id
    with connect(broker, certs, "alice") as alice:
        assert heartbeat(alice, group, topic).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert share_fetch(alice, group, topic_id).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        grant(admin, "User:alice", AclOperation.READ, ResourceType.GROUP, group)
        # READ on the group only: the topic is refused (the heartbeat names it, the fetch asks for it)
        assert heartbeat(alice, group, topic).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        answer = share_fetch(alice, group, topic_id)
        assert answer.error_code == 0
        assert answer.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        grant(admin, "User:alice", AclOperation.READ, ResourceType.TOPIC, topic)
        assert heartbeat(alice, group, topic).error_code == 0
        # the share coordinator's APIs are for brokers
        state = messages.ReadShareGroupStateSummaryRequest
        summary = alice.request(87, 1, state(group_id=group, topics=[state.ReadStateSummaryData(
            topic_id=topic_id, partitions=[state.PartitionData(partition=0, leader_epoch=0)])]))
        assert summary.results[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        found = alice.request(10, 4, messages.FindCoordinatorRequest(key_type=2, coordinator_keys=["g:AAAAAAAAAAAAAAAAAAAAAA:0"]))
        assert found.coordinators[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
