"""server/broker_configs.py, the pure core behind a broker's DescribeConfigs and its refusal of alters."""

from __future__ import annotations

import pytest

from eoslog.protocol.errors import InvalidConfigError, InvalidRequestError
from eoslog.server.broker_configs import (
    DEFAULT_CONFIG,
    STATIC_BROKER_CONFIG,
    check_broker_resource,
    describe_broker_configs,
    implemented_properties,
    refuse_alter,
)
from eoslog.server.config import KAFKA_PROPERTIES_NOT_IMPLEMENTED, BrokerConfig, known_properties


def configured(properties: dict[str, str]) -> BrokerConfig:
    config = BrokerConfig()
    config.apply_properties(properties)
    return config


def test_every_implemented_property_is_described_and_none_that_is_only_ignored():
    entries = {e.name: e for e in describe_broker_configs(BrokerConfig())}
    assert set(entries) == set(implemented_properties(BrokerConfig()))
    assert set(entries) <= known_properties()
    assert not set(entries) & KAFKA_PROPERTIES_NOT_IMPLEMENTED
    assert all(e.source == DEFAULT_CONFIG and e.read_only for e in entries.values())
    assert entries["log.segment.bytes"].value == "1073741824"  # the topic default it provides
    assert entries["max.connections"].value == str(2**31 - 1)  # Kafka's "no limit"


def test_static_sources_synonyms_and_sensitive_values():
    config = configured({"log.roll.hours": "3", "zookeeper.connect": "127.0.0.1:2181/x",
                           "listeners": "SASL_PLAINTEXT://127.0.0.1:9092",
                           "listener.name.sasl_plaintext.plain.sasl.jaas.config": "secret stuff",
                           "sasl.enabled.mechanisms": "PLAIN"})
    entries = {e.name: e for e in describe_broker_configs(config, include_synonyms=True)}
    roll = entries["log.roll.ms"]
    assert (roll.value, roll.source) == ("10800000", STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in roll.synonyms] == [
        ("log.roll.hours", "3", STATIC_BROKER_CONFIG), ("log.roll.ms", "604800000", DEFAULT_CONFIG)]
    assert entries["zookeeper.connect"].value == "127.0.0.1:2181/x"
    jaas = entries["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas.sensitive and jaas.value is None and all(s.value is None for s in jaas.synonyms)
    assert entries["inter.broker.listener.name"].value == "SASL_PLAINTEXT"
    assert entries["ssl.keystore.password"].sensitive and entries["ssl.keystore.password"].value is None
    assert [e.name for e in describe_broker_configs(config, keys=["broker.id", "nope"])] == ["broker.id"]


def test_resource_names_and_alters_are_checked_as_kafka_does():
    config = configured({"broker.id": "2"})
    assert check_broker_resource(config, "2") is True
    assert check_broker_resource(config, "") is False
    with pytest.raises(InvalidRequestError, match="expected 2 or empty string, but received 1"):
        check_broker_resource(config, "1")
    with pytest.raises(InvalidRequestError, match="must be an integer"):
        check_broker_resource(config, "two")
    with pytest.raises(InvalidConfigError, match="unknown broker config 'num.partition'; closest: num.partitions"):
        refuse_alter(config, ["num.partitions", "num.partition"])
    with pytest.raises(InvalidRequestError, match="Cannot update these configs dynamically: num.partitions, log.retention.ms"):
        refuse_alter(config, ["num.partitions", "log.retention.ms"])
    refuse_alter(config, [])  # nothing to alter, nothing to refuse
