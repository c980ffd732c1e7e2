"""DescribeLogDirs (35) and AlterReplicaLogDirs (34) as Kafka 4.x answers them, driven by kafka-python's
admin client (confluent-kafka 2.16 has neither) against one embedded broker: one log directory, the
broker's data directory, with each local replica's size and lag and the volume's bytes (issue 41)."""

from __future__ import annotations

import os
import shutil
import uuid

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaProducer

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop

# kafka-python's own suite runs against a broker with an authorizer that allows what no ACL names
PROPERTIES = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("logdirs") / "data", properties=PROPERTIES) as running:
        yield running


@pytest.fixture(scope="module")
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a dropped client cancels its futures
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_describe_log_dirs_names_the_data_directory_and_each_replica(broker, admin):
    topic = unique("dirs")
    create_topic(broker.bootstrap, topic, 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for n in range(5):
        producer.send(topic, b"v" * 100, partition=0)
    producer.flush(30)
    producer.close()

    (answer,) = admin.describe_log_dirs({topic: [0, 1, 7]})  # 7 does not exist: left out, not an error
    assert answer["broker"] == 0
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    assert os.path.isabs(log_dir["log_dir"]) and os.path.isdir(os.path.join(log_dir["log_dir"], f"{topic}-0"))
    usage = shutil.disk_usage(log_dir["log_dir"])
    assert log_dir["total_bytes"] == usage.total
    assert 0 < log_dir["usable_bytes"] <= usage.total
    (described,) = log_dir["topics"]
    assert described["name"] == topic
    sizes = {p["partition_index"]: p["partition_size"] for p in described["partitions"]}
    assert set(sizes) == {0, 1}
    assert sizes[1] == 0 and sizes[0] > 5 * 100  # five records and their batch headers
    assert all(p["offset_lag"] == 0 and p["is_future_key"] is False for p in described["partitions"])

    # no topics named: every local replica, the internal topics' too
    (everything,) = admin.describe_log_dirs()
    names = {t["name"] for t in everything["log_dirs"][0]["topics"]}
    assert topic in names
    # a topic with none of its partitions here is left out
    (nothing,) = admin.describe_log_dirs({unique("absent"): [0]})
    assert nothing["log_dirs"][0]["topics"] == []


def _describe_log_dirs_raw(bootstrap: str, version: int):
    with BrokerConnection.from_bootstrap(bootstrap) as wire:
        return wire.request(35, version, messages.DescribeLogDirsRequest(topics=None))


def _cluster_acl(operation, permission) -> AclBinding:
    return AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                      operation, permission)


def test_describe_log_dirs_needs_describe_on_the_cluster(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _describe_log_dirs_raw(broker.bootstrap, 4).error_code == 0
    # ALTER kept, so the test may take its ACLs away again (once the cluster has ACLs, none is implied)
    bindings = [_cluster_acl(AclOperation.ALTER, AclPermissionType.ALLOW),
                _cluster_acl(AclOperation.DESCRIBE, AclPermissionType.DENY)]
    for done in admin.create_acls(bindings).values():
        done.result(15)
    try:
        refused = _describe_log_dirs_raw(broker.bootstrap, 4)
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert refused.results == []
        # before v3 there is no error code: the answer is no directories
        assert _describe_log_dirs_raw(broker.bootstrap, 2).results == []
    finally:
        undo = AclBindingFilter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS",
                                "*", AclOperation.ANY, AclPermissionType.ANY)
        admin.delete_acls([undo])[undo].result(15)
    assert _describe_log_dirs_raw(broker.bootstrap, 4).error_code == 0


def test_alter_replica_log_dirs_answers_as_a_kafka_broker_with_one_log_dir(broker, admin):
    """To the one directory (as DescribeLogDirs names it): done, nothing moves; elsewhere:
    LOG_DIR_NOT_FOUND; a partition with no replica here: REPLICA_NOT_AVAILABLE."""
    from kafka import TopicPartitionReplica
    from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError

    topic = unique("move")
    create_topic(broker.bootstrap, topic, 1)
    (answer,) = admin.describe_log_dirs({topic: [0]})
    log_dir = answer["log_dirs"][0]["log_dir"]
    here, absent = TopicPartitionReplica(topic, 0, 0), TopicPartitionReplica(topic, 5, 0)
    assert admin.alter_replica_log_dirs({here: log_dir, absent: log_dir}) == {
        here: NoError, absent: ReplicaNotAvailableError}
    assert admin.alter_replica_log_dirs({here: log_dir + "-elsewhere"}) == {here: LogDirNotFoundError}
    (after,) = admin.describe_log_dirs({topic: [0]})
    assert after["log_dirs"][0]["topics"][0]["partitions"][0]["is_future_key"] is False


def test_alter_replica_log_dirs_needs_alter_on_the_cluster(tmp_path):
    # a broker of its own: a DENY of ALTER on the cluster also denies taking that ACL away
    with EmbeddedBroker(data_dir=tmp_path / "data", properties=PROPERTIES) as own:
        admin = AdminClient({"bootstrap.servers": own.bootstrap})
        deny = _cluster_acl(AclOperation.ALTER, AclPermissionType.DENY)
        admin.create_acls([deny])[deny].result(15)
        Dir = messages.AlterReplicaLogDirsRequest.AlterReplicaLogDir
        request = messages.AlterReplicaLogDirsRequest(dirs=[Dir(path="/x", topics=[
            Dir.AlterReplicaLogDirTopic(name="t", partitions=[0, 1])])])
        with BrokerConnection.from_bootstrap(own.bootstrap) as wire:
            refused = wire.request(34, 2, request)
    assert [(t.topic_name, p.partition_index, p.error_code) for t in refused.results for p in t.partitions] == [
        ("t", 0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED), ("t", 1, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
