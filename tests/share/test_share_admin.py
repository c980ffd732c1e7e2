"""The share-group admin APIs (keys 90-92) against an embedded broker, over TCP with eoslog's client
(confluent-kafka 2.16's AdminClient has no share-group offset calls): DescribeShareGroupOffsets' start
offset and lag, AlterShareGroupOffsets only for a group without members, DeleteShareGroupOffsets removing
a topic's share state, and the errors Kafka answers. The share partition's leader must act on the new
state at once: the next member's first ShareFetch gets the records from the altered (or reset) offset."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from test_share_wire import acknowledge, acquired, fetch, heartbeat, join, setup_group

from eoslog.client.connection import BrokerConnection
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    ApiVersionsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
)
from eoslog.testing.embedded import EmbeddedBroker

DESCRIBE, ALTER, DELETE = 90, 91, 92
ACCEPT, REJECT = 1, 3
LEAVE = -1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("share-admin")) as embedded:
        yield embedded


@pytest.fixture
def conn(broker):
    with BrokerConnection.from_bootstrap(broker.bootstrap) as connection:
        yield connection


def describe(conn, group: str, topics=None, version: int = 1):
    """{(topic, partition): (start offset, lag, error)} of one group, and the group's error code."""
    request = DescribeShareGroupOffsetsRequest
    asked = None if topics is None else [
        request.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in topics.items()]
    answer = conn.request(DESCRIBE, version, request(groups=[
        request.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=asked)]))
    (described,) = answer.groups
    return {(t.topic_name, p.partition_index): (p.start_offset, getattr(p, "lag", None), p.error_code)
            for t in described.topics for p in t.partitions}, described.error_code


def alter(conn, group: str, offsets: dict):
    """The top-level error and {(topic, partition): error}."""
    request = AlterShareGroupOffsetsRequest
    by_topic: dict = {}
    for (topic, index), start in offsets.items():
        by_topic.setdefault(topic, []).append(request.AlterShareGroupOffsetsRequestPartition(
            partition_index=index, start_offset=start))
    answer = conn.request(ALTER, 0, request(group_id=group, topics=[
        request.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()]))
    return answer.error_code, {(t.topic_name, p.partition_index): p.error_code
                               for t in answer.responses for p in t.partitions}


def delete(conn, group: str, topics):
    """The top-level error and {topic: (error, message)}."""
    request = DeleteShareGroupOffsetsRequest
    answer = conn.request(DELETE, 0, request(group_id=group, topics=[
        request.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]))
    return answer.error_code, {t.topic_name: (t.error_code, t.error_message) for t in answer.responses}


def leave(conn, group: str, member_id: str) -> None:
    assert heartbeat(conn, group, member_id, LEAVE).error_code == 0


def test_the_admin_apis_are_advertised(conn):
    versions = {v.api_key: (v.min_version, v.max_version)
                for v in conn.request(18, 3, ApiVersionsRequest(client_software_name="t",
                                                                client_software_version="1")).api_keys}
    assert versions[DESCRIBE] == (0, 1) and versions[ALTER] == (0, 0) and versions[DELETE] == (0, 0)


def test_describe_alter_and_delete_a_share_group(conn, broker):
    topic, group = setup_group(broker.bootstrap, records=10)
    member, _epoch, topic_id = join(conn, group, topic)
    assert acquired(fetch(conn, group, member, 0, topic_id)) == [(0, 9, 1)]
    # 0-2 accepted and 5-6 rejected: the start offset moves to 3, and 5-6 are done above it
    answer = acknowledge(conn, group, member, 1, topic_id, [(0, 2, ACCEPT), (5, 6, REJECT)])
    assert answer.responses[0].partitions[0].error_code == 0

    offsets, error = describe(conn, group)
    assert error == 0
    assert offsets == {(topic, 0): (3, 10 - 3 - 2, 0)}  # lag: high watermark - start - done above it
    assert describe(conn, group, version=0)[0] == {(topic, 0): (3, -1, 0)}  # v0 carries no lag: the default
    offsets, _ = describe(conn, group, {topic: [0], "no-such-topic": [0, 1]})
    assert offsets == {(topic, 0): (3, 5, 0), ("no-such-topic", 0): (-1, -1, 0), ("no-such-topic", 1): (-1, -1, 0)}

    # a group with a member cannot be altered or have its offsets deleted
    assert alter(conn, group, {(topic, 0): 8})[0] == ErrorCode.NON_EMPTY_GROUP
    assert delete(conn, group, [topic])[0] == ErrorCode.NON_EMPTY_GROUP
    leave(conn, group, member)

    error, partitions = alter(conn, group, {(topic, 0): 8, (topic, 5): 0, ("no-such-topic", 0): 1})
    assert error == 0
    assert partitions == {(topic, 0): 0, (topic, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert describe(conn, group)[0] == {(topic, 0): (8, 2, 0)}
    # the share partition's leader reads the new state: the next member's first fetch starts at 8
    member, _epoch, _ = join(conn, group, topic)
    assert acquired(fetch(conn, group, member, 0, topic_id)) == [(8, 9, 1)]
    leave(conn, group, member)

    error, topics = delete(conn, group, [topic, "no-such-topic"])
    assert error == 0
    assert topics[topic] == (0, None)
    assert topics["no-such-topic"][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert describe(conn, group)[0] == {}  # no initialized share partition left
    assert describe(conn, group, {topic: [0]})[0] == {(topic, 0): (-1, -1, 0)}
    assert delete(conn, group, [topic])[1][topic] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                      "There is no offset information to delete.")
    # the next member starts the partition again by share.auto.offset.reset (earliest here)
    member, _epoch, _ = join(conn, group, topic)
    assert acquired(fetch(conn, group, member, 0, topic_id)) == [(0, 9, 1)]
    leave(conn, group, member)


def test_group_errors(conn, broker):
    topic, _ = setup_group(broker.bootstrap, records=1)
    unknown = "nobody-" + uuid.uuid4().hex[:6]
    assert delete(conn, unknown, [topic])[0] == ErrorCode.GROUP_ID_NOT_FOUND
    assert describe(conn, unknown) == ({}, 0)
    assert describe(conn, "")[1] == ErrorCode.INVALID_GROUP_ID
    # altering an unknown group creates an empty share group holding the offsets (Kafka's rule)
    assert alter(conn, unknown, {(topic, 0): 1}) == (0, {(topic, 0): 0})
    assert describe(conn, unknown)[0] == {(topic, 0): (1, 0, 0)}

    # a consumer group's id is not a share group's
    classic = "classic-" + uuid.uuid4().hex[:6]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": classic, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    assert alter(conn, classic, {(topic, 0): 0})[0] == ErrorCode.GROUP_ID_NOT_FOUND
    assert delete(conn, classic, [topic])[0] == ErrorCode.GROUP_ID_NOT_FOUND
    assert alter(conn, unknown, {(topic, 0): -5})[1] == {(topic, 0): ErrorCode.INVALID_REQUEST}
