"""The flush policy through a real broker and a real client (docs/durability.md): the topic config
``eoslog.fsync.on.ack`` and its broker default ``log.eoslog.fsync.on.ack`` are accepted by CreateTopics,
IncrementalAlterConfigs and DescribeConfigs, bad values are refused naming the property, and with fsync
on every acks=all acknowledgement is covered by an fsync and survives a broker SIGKILL."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from eoslog.server.config import BrokerConfig, ConfigError
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import BrokerProcess

NAME = "eoslog.fsync.on.ack"
BROKER_NAME = "log.eoslog.fsync.on.ack"


def _describe(admin: AdminClient, topic: str) -> ConfigEntry:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    return configs[NAME]


def _create(admin: AdminClient, topic: str, configs: dict[str, str]) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def _alter(admin: AdminClient, topic: str, value: str) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(NAME, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_topic_setting_through_create_alter_describe():
    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _create(admin, "plain", {})
        entry = _describe(admin, "plain")
        assert (entry.value, entry.source) == ("true", ConfigSource.DEFAULT_CONFIG.value)

        _create(admin, "fast", {NAME: "false"})
        entry = _describe(admin, "fast")
        assert (entry.value, entry.source) == ("false", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert broker.call(lambda: broker.broker.registry.partition("fast", 0).log.config.fsync_on_ack) is False

        _alter(admin, "fast", "true")
        assert _describe(admin, "fast").value == "true"
        assert broker.call(lambda: broker.broker.registry.partition("fast", 0).log.config.fsync_on_ack) is True

        with pytest.raises(KafkaException) as created:
            _create(admin, "bad", {NAME: "sometimes"})
        assert created.value.args[0].name() == "INVALID_CONFIG"
        assert NAME in created.value.args[0].str() and "true or false" in created.value.args[0].str()
        with pytest.raises(KafkaException) as altered:
            _alter(admin, "fast", "sometimes")
        assert altered.value.args[0].name() == "INVALID_CONFIG"
        assert NAME in altered.value.args[0].str()
        assert _describe(admin, "fast").value == "true"


def test_broker_default():
    with EmbeddedBroker(properties={BROKER_NAME: "false"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _create(admin, "t", {})
        entry = _describe(admin, "t")
        assert (entry.value, entry.source) == ("false", ConfigSource.STATIC_BROKER_CONFIG.value)
        assert broker.call(lambda: broker.broker.registry.partition("t", 0).log.config.fsync_on_ack) is False


def test_broker_default_bad_value_and_old_name_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=NAME):
        EmbeddedBroker(data_dir=tmp_path / "a", properties={BROKER_NAME: "sometimes"}).start()
    config = BrokerConfig(data_dir=tmp_path / "b")
    with pytest.raises(ConfigError, match=BROKER_NAME):
        config.set_property(NAME, "false")


@pytest.mark.parametrize("fsync_on_ack", [True, False])
def test_acknowledged_means_fsynced_only_when_on(fsync_on_ack):
    """Observed inside the broker: with the setting on, the high watermark (what acks=all waits for) never
    passes what an fsync covered; with it off it follows the log end at once."""
    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _create(admin, "t", {NAME: str(fsync_on_ack).lower()})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 1})
        for i in range(2000):
            producer.produce("t", value=b"x" * 100, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        partition = broker.call(lambda: broker.broker.registry.partition("t", 0))
        hw, durable, flushed = broker.call(
            lambda: (partition.high_watermark, partition.local_durable_end, partition.log._recovery_point))
        assert hw == 2000
        if fsync_on_ack:
            assert durable >= hw and flushed >= hw
        else:
            assert flushed < hw  # nothing fsync'ed yet: flush.messages / flush.ms are Kafka's "never"


@pytest.mark.interop
@pytest.mark.timeout(120)
def test_acknowledged_records_survive_sigkill(tmp_path):
    """acks=all with fsync on: kill -9 the broker right after acknowledgements arrive, restart, and every
    acknowledged record is there, in order."""
    with BrokerProcess(data_dir=tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _create(admin, "t", {NAME: "true"})
        acked: list[int] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2,
                             "message.timeout.ms": 5000})

        def on_delivery(err, msg):
            if err is None:
                acked.append(int(msg.value()))

        i = 0
        while len(acked) < 5000:  # keep producing: the kill lands with requests in flight
            try:
                producer.produce("t", value=b"%08d" % i, partition=0, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            producer.poll(0)
        broker.kill()
        producer.poll(0.5)  # acknowledgements already read from the socket count too
        producer.purge()
        producer.flush(0)
        broker.start()
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("t", 0, 0)])
        seen: list[int] = []
        _, high = consumer.get_watermark_offsets(TopicPartition("t", 0), timeout=30)
        while len(seen) < high:
            msg = consumer.poll(10)
            assert msg is not None, f"read {len(seen)} of {high}"
            assert msg.error() is None, msg.error()
            seen.append(int(msg.value()))
        consumer.close()
        assert seen == list(range(len(seen))), "out of order or duplicated"
        assert set(acked) <= set(seen), f"{len(set(acked) - set(seen))} acknowledged records lost"
        assert len(acked) >= 5000
