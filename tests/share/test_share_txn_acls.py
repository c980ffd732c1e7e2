"""Issue 37 step 6's APIs under ACLs (a real broker process with mutual TLS, as tests/share/test_share_acls.py
sets it up): AddSharePartitionsToTxn needs WRITE on the transactional id and READ on the group;
ShareAcknowledgeTxn the same, then READ on each topic (its partitions answer TOPIC_AUTHORIZATION_FAILED).
Authorization comes before anything else, so no transaction needs to exist."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from tests.share.test_share_acls import broker, certs, config, connect, grant  # noqa: F401 - fixtures

pytestmark = pytest.mark.interop


def register(conn, transactional_id: str, group: str, topic_id: uuid.UUID) -> int:
    R = messages.AddSharePartitionsToTxnRequest
    return conn.request(0x7E20, 0, R(transactional_id=transactional_id, producer_id=1, producer_epoch=0,
                                     group_id=group, topics=[R.SharePartitionsTopic(topic_id=topic_id,
                                                                                    partitions=[0])])).error_code


def acknowledge(conn, transactional_id: str, group: str, topic_id: uuid.UUID):
    R = messages.ShareAcknowledgeTxnRequest
    return conn.request(0x7E21, 0, R(
        group_id=group, member_id=None, transactional_id=transactional_id, producer_id=1, producer_epoch=0,
        transaction_timeout_ms=60_000, topics=[R.AcknowledgeTopic(topic_id=topic_id, partitions=[
            R.AcknowledgePartition(partition_index=0, acknowledgement_batches=[R.AcknowledgementBatch(
                first_offset=0, last_offset=0, acknowledge_types=[1])])])]))


def test_the_transactional_id_the_group_and_the_topic_are_checked(broker, certs):  # noqa: F811
    admin = AdminClient(config(broker, certs, "admin"))
    topic, group, transactional_id = ("t-" + uuid.uuid4().hex[:8], "g-" + uuid.uuid4().hex[:8],
                                      "x-" + uuid.uuid4().hex[:8])
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with connect(broker, certs, "admin") as root:
        topic_id = root.request(3, 12, messages.MetadataRequest(
            topics=[messages.MetadataRequest.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=topic)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)).topics[0].topic_id
    with connect(broker, certs, "alice") as conn:
        assert register(conn, transactional_id, group, topic_id) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert acknowledge(conn, transactional_id, group, topic_id).error_code \
            == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        grant(admin, "User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
        assert register(conn, transactional_id, group, topic_id) == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert acknowledge(conn, transactional_id, group, topic_id).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        grant(admin, "User:alice", AclOperation.READ, ResourceType.GROUP, group)
        # past authorization: the producer id is unknown to the transaction coordinator
        assert register(conn, transactional_id, group, topic_id) not in (
            0, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        answer = acknowledge(conn, transactional_id, group, topic_id)
        assert answer.error_code == 0
        assert answer.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        grant(admin, "User:alice", AclOperation.READ, ResourceType.TOPIC, topic)
        answer = acknowledge(conn, transactional_id, group, topic_id)
        assert answer.responses[0].partitions[0].error_code not in (0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
