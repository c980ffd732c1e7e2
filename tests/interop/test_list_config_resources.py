"""ListConfigResources (74, KIP-1142) as Kafka 4.1+ answers it, driven by kafka-python's
``list_config_resources`` (confluent-kafka 2.16 has no call for it) against one embedded broker: topics,
brokers and the groups with configs of their own, by type, with Kafka's refusals (issue 41)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient

from eoslog.api.list_config_resources import BROKER, CLIENT_METRICS, GROUP, TOPIC, list_resources
from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop

PROPERTIES = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("configres") / "data", properties=PROPERTIES) as running:
        yield running


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _raw(bootstrap: str, version: int, types: list[int]):
    with BrokerConnection.from_bootstrap(bootstrap) as wire:
        return wire.request(74, version, messages.ListConfigResourcesRequest(resource_types=types))


def test_kafka_python_lists_topics_brokers_and_configured_groups(broker):
    topic, group, plain_group = unique("listed"), unique("configured"), unique("plain")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        everything = client.list_config_resources()
        assert everything["broker"] == ["0"]
        assert topic in everything["topic"]
        assert group in everything["group"] and plain_group not in everything["group"]
        assert client.list_config_resources(["TOPIC"]) == {"topic": everything["topic"]}
        assert client.list_config_resources(["GROUP", "BROKER"]) == {"group": everything["group"], "broker": ["0"]}
    finally:
        client.close()


def test_kafka_order_unknown_types_and_v0(broker):
    rows = _raw(broker.bootstrap, 1, [TOPIC, BROKER, GROUP])
    assert rows.error_code == 0
    types = [r.resource_type for r in rows.config_resources]
    assert types == sorted(types, key=[GROUP, BROKER, TOPIC].index)  # Kafka's order, not the request's
    # a type outside Kafka's five fails the whole request
    refused = _raw(broker.bootstrap, 1, [TOPIC, 64])
    assert (refused.error_code, refused.config_resources) == (ErrorCode.UNSUPPORTED_VERSION, [])
    # v0 (KIP-714's ListClientMetricsResources): client-metrics subscriptions, of which eoslog has none
    assert _raw(broker.bootstrap, 0, []).config_resources == []


def test_needs_describe_configs_on_the_cluster(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    grants = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         operation, permission)
              for operation, permission in ((AclOperation.ALTER, AclPermissionType.ALLOW),
                                            (AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY))]
    for done in admin.create_acls(grants).values():
        done.result(15)
    try:
        refused = _raw(broker.bootstrap, 1, [])
        assert (refused.error_code, refused.config_resources) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    finally:
        undo = AclBindingFilter(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS",
                                "*", AclOperation.ANY, AclPermissionType.ANY)
        admin.delete_acls([undo])[undo].result(15)
    assert _raw(broker.bootstrap, 1, []).error_code == 0


def test_the_pure_core_repeats_no_type_and_keeps_kafka_order():
    names = {TOPIC: ["t"], BROKER: ["1", "2"], GROUP: ["g"]}
    error, rows = list_resources(1, [TOPIC, TOPIC, GROUP], names)
    assert error == ErrorCode.NONE
    assert [(r.resource_type, r.resource_name) for r in rows] == [(GROUP, "g"), (TOPIC, "t")]
    assert list_resources(0, [TOPIC], names) == (ErrorCode.NONE, [])  # v0 ignores types: client metrics
    assert list_resources(1, [CLIENT_METRICS], names) == (ErrorCode.NONE, [])
