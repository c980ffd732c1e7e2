"""What the clients' own integration suites found against eoslog (issue 41; docs/clients.md, "External
suites"), each reproduced here with the real client that found it, against one embedded broker.

- confluent-kafka-python's ``test_incremental_alter_configs``: SUBTRACT of ``delete`` from a topic whose
  cleanup.policy is ``delete`` leaves an empty list, which Kafka accepts (its ``ValidList`` allows none:
  neither retention nor compaction, the log keeps everything) and eoslog refused with INVALID_CONFIG.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("suite-findings")) as running:
        yield running


def _described(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return {name: entry.value for name, entry in admin.describe_configs([resource])[resource].result(30).items()}


def test_subtracting_the_only_cleanup_policy_leaves_an_empty_one(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    kept, compacted = f"keep-{uuid.uuid4().hex[:8]}", f"both-{uuid.uuid4().hex[:8]}"
    for topic in (kept, compacted):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    subtract = ConfigResource(ResourceType.TOPIC, kept, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)])
    append = ConfigResource(ResourceType.TOPIC, compacted, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    for future in admin.incremental_alter_configs([subtract, append]).values():
        assert future.result(30) is None
    assert _described(admin, kept)["cleanup.policy"] == ""
    assert _described(admin, compacted)["cleanup.policy"] == "delete,compact"  # Kafka keeps the list's order
    # the topic still takes writes, keyless ones too (it does not compact)
    producer, outcome = Producer({"bootstrap.servers": broker.bootstrap}), []
    producer.produce(kept, b"v", on_delivery=lambda error, message: outcome.append(error))
    producer.flush(30)
    assert outcome == [None]
    # a value that is not a policy is still refused
    wrong = ConfigResource(ResourceType.TOPIC, kept, incremental_configs=[
        ConfigEntry("cleanup.policy", "never", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="INVALID_CONFIG"):
        admin.incremental_alter_configs([wrong])[wrong].result(30)
