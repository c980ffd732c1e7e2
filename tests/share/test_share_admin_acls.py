"""The share-group admin APIs under ACLs, as Kafka's KafkaApis checks them (a broker process with mutual
TLS, test_share_acls.py's set-up): DescribeShareGroupOffsets needs DESCRIBE on the group and on each
topic, AlterShareGroupOffsets READ on both, DeleteShareGroupOffsets DELETE on the group and READ on each
topic. A refused group is a group-level (or top-level) GROUP_AUTHORIZATION_FAILED; a refused topic
answers TOPIC_AUTHORIZATION_FAILED on its rows and is never touched."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType
from test_share_acls import broker, certs, config, connect, grant  # noqa: F401 - fixtures
from test_share_admin import alter, delete, describe

from eoslog.protocol.errors import ErrorCode

pytestmark = pytest.mark.interop


def test_the_admin_apis_check_the_group_and_the_topics(broker, certs):  # noqa: F811
    admin = AdminClient(config(broker, certs, "admin"))
    topic, group = "sadm-" + uuid.uuid4().hex[:6], "sadm-g-" + uuid.uuid4().hex[:6]
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with connect(broker, certs, "admin") as root:
        assert alter(root, group, {(topic, 0): 0}) == (0, {(topic, 0): 0})
    with connect(broker, certs, "alice") as alice:
        assert describe(alice, group)[1] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert alter(alice, group, {(topic, 0): 0})[0] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert delete(alice, group, [topic])[0] == ErrorCode.GROUP_AUTHORIZATION_FAILED

        grant(admin, "User:alice", AclOperation.DESCRIBE, ResourceType.GROUP, group)
        # the group may be described, the topic not: left out of "all", refused when named
        assert describe(alice, group) == ({}, 0)
        assert describe(alice, group, {topic: [0]})[0] == {(topic, 0): (-1, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
        assert alter(alice, group, {(topic, 0): 0})[0] == ErrorCode.GROUP_AUTHORIZATION_FAILED  # needs READ
        grant(admin, "User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
        assert describe(alice, group) == ({(topic, 0): (0, 0, 0)}, 0)

        grant(admin, "User:alice", AclOperation.READ, ResourceType.GROUP, group)
        assert alter(alice, group, {(topic, 0): 0}) == (0, {(topic, 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED})
        assert delete(alice, group, [topic])[0] == ErrorCode.GROUP_AUTHORIZATION_FAILED  # needs DELETE
        grant(admin, "User:alice", AclOperation.DELETE, ResourceType.GROUP, group)
        assert delete(alice, group, [topic])[1][topic][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert describe(alice, group)[0] == {(topic, 0): (0, 0, 0)}  # the refused calls changed nothing

        grant(admin, "User:alice", AclOperation.READ, ResourceType.TOPIC, topic)
        assert alter(alice, group, {(topic, 0): 0}) == (0, {(topic, 0): 0})
        assert delete(alice, group, [topic])[1][topic] == (0, None)
        assert describe(alice, group) == ({}, 0)
