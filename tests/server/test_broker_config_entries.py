"""server/broker_configs.py, the pure core behind a broker's DescribeConfigs and its checks of alters, and
server/dynamic_broker_configs.py, a single node's dynamic configs (a file in the data directory)."""

from __future__ import annotations

import asyncio

import pytest

from eoslog.protocol.errors import InvalidConfigError, InvalidRequestError
from eoslog.server.broker_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    check_alterable,
    check_broker_resource,
    describe_broker_configs,
    describe_default_configs,
    implemented_properties,
)
from eoslog.server.config import KAFKA_PROPERTIES_NOT_IMPLEMENTED, BrokerConfig, ConfigError, known_properties
from eoslog.server.dynamic_broker_configs import DYNAMIC_CONFIG_FILE, DynamicBrokerConfigs
from eoslog.server.limits import ConnectionQuotas


def configured(properties: dict[str, str]) -> BrokerConfig:
    config = BrokerConfig()
    config.apply_properties(properties)
    return config


def test_every_implemented_property_is_described_and_none_that_is_only_ignored():
    entries = {e.name: e for e in describe_broker_configs(BrokerConfig())}
    assert set(entries) == set(implemented_properties(BrokerConfig()))
    assert set(entries) <= known_properties()
    assert not set(entries) & KAFKA_PROPERTIES_NOT_IMPLEMENTED
    # and every name a properties file may set is described (its time aliases and the old renamed one as
    # synonyms or not at all)
    from eoslog.server.config import _RENAMED, _TIME_ALIASES, is_ignored_kafka_property

    implemented = {n for n in known_properties() if not is_ignored_kafka_property(n)}
    assert implemented - set(_TIME_ALIASES) - set(_RENAMED) <= set(entries)
    assert not {n for n in entries if is_ignored_kafka_property(n)}  # those only once given
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
        check_alterable(config, ["num.partitions", "num.partition"])
    with pytest.raises(InvalidRequestError, match="Cannot update these configs dynamically: num.partitions, "
                                                  "log.cleanup.policy .the dynamic ones are max.connections, "):
        check_alterable(config, ["num.partitions", "max.connections", "log.cleanup.policy", "log.retention.ms"],
                        dynamic=object())
    check_alterable(config, ["max.connections", "max.connections.per.ip"], dynamic=object())
    with pytest.raises(InvalidRequestError, match="max.connections .this broker has no dynamic configs"):
        check_alterable(config, ["max.connections"])  # no DynamicBrokerConfigs
    check_alterable(config, [])  # nothing to alter, nothing to refuse


# ---- server/dynamic_broker_configs.py -------------------------------------------------------------------

def dynamic(tmp_path, properties: dict[str, str] | None = None, node_id: str = "0"):
    config = configured({"broker.id": node_id, **(properties or {})})
    quotas = ConnectionQuotas(config.max_connections, config.max_connections_per_ip,
                              config.max_connections_per_ip_overrides)
    configs = DynamicBrokerConfigs(config, quotas)
    configs.use_file(tmp_path)
    return config, quotas, configs


def setting(values: dict[str, str]):
    return lambda _current: dict(values)


def test_dynamic_values_win_over_static_ones_per_broker_before_default(tmp_path):
    config, quotas, configs = dynamic(tmp_path, {"max.connections": "1000"})
    asyncio.run(configs.alter(True, setting({"max.connections": "10", "max.connections.per.ip": "3"})))
    assert (quotas.max_connections, quotas.max_per_ip) == (10, 3)
    asyncio.run(configs.alter(False, setting({"max.connections": "20"})))
    assert (quotas.max_connections, config.max_connections) == (20, 20)
    entry = {e.name: e for e in describe_broker_configs(config, ["max.connections"], True, dynamic=configs)}
    assert not entry["max.connections"].read_only and entry["max.connections"].source == DYNAMIC_BROKER_CONFIG
    assert [(s.value, s.source) for s in entry["max.connections"].synonyms] == [
        ("20", DYNAMIC_BROKER_CONFIG), ("10", DYNAMIC_DEFAULT_BROKER_CONFIG), ("1000", STATIC_BROKER_CONFIG),
        ("2147483647", DEFAULT_CONFIG)]
    assert [(e.name, e.value) for e in describe_default_configs(configs)] == [
        ("max.connections", "10"), ("max.connections.per.ip", "3")]

    asyncio.run(configs.alter(False, setting({})))
    asyncio.run(configs.alter(True, setting({"max.connections.per.ip.overrides": "127.0.0.9:1"})))
    assert (quotas.max_connections, quotas.max_per_ip, quotas.per_ip_overrides) == (1000, None, {"127.0.0.9": 1})


def test_changes_persist_in_the_data_directory_and_bad_ones_change_nothing(tmp_path):
    _, quotas, configs = dynamic(tmp_path)
    asyncio.run(configs.alter(False, setting({"max.connections.per.ip": "5"})))
    with pytest.raises(InvalidConfigError, match="must be at least 1"):
        asyncio.run(configs.alter(False, setting({"max.connections.per.ip": "0"})))
    with pytest.raises(InvalidConfigError, match="num.partitions is not a dynamic broker config"):
        asyncio.run(configs.alter(True, setting({"num.partitions": "2"})))
    asyncio.run(configs.alter(False, setting({"max.connections.per.ip": "6"}), validate_only=True))
    assert quotas.max_per_ip == 5
    _, quotas, _ = dynamic(tmp_path)  # a restart reads what was acknowledged
    assert quotas.max_per_ip == 5
    _, quotas, _ = dynamic(tmp_path, node_id="1")  # another broker's entry is not this one's
    assert quotas.max_per_ip is None

    (tmp_path / DYNAMIC_CONFIG_FILE).write_text('{"version": 1, "brokers": {"0": {"max.connections": "many"}}}')
    with pytest.raises(ConfigError, match="max.connections: expected an integer"):
        dynamic(tmp_path)
    (tmp_path / DYNAMIC_CONFIG_FILE).write_text("{")
    with pytest.raises(ConfigError, match="unreadable dynamic broker configs"):
        dynamic(tmp_path)


def test_values_read_from_zookeeper_that_do_not_parse_are_left_out(tmp_path, caplog):
    config = configured({"broker.id": "2"})
    quotas = ConnectionQuotas()
    configs = DynamicBrokerConfigs(config, quotas)
    configs.replace_levels({"max.connections": "many", "max.connections.per.ip": "4"}, {"max.connections": "9"})
    assert (quotas.max_connections, quotas.max_per_ip) == (9, 4)  # the default, as the broker's own is invalid
    assert "ignoring dynamic broker config max.connections=many of 2" in caplog.text


def test_kafka_properties_eoslog_ignores_are_kept_where_given_and_survive_a_restart(tmp_path):
    """A Kafka broker property eoslog does not use (server/kafka_broker_properties.py): the properties
    file's value is STATIC_BROKER_CONFIG, a dynamic one wins over it and is persisted, a password is never
    shown, each entry carries the note that eoslog ignores it."""
    from eoslog.server.kafka_broker_properties import IGNORED_NOTE

    config, _, configs = dynamic(tmp_path, {"log.cleaner.threads": "1", "delegation.token.secret.key": "s3"})
    asyncio.run(configs.alter(False, setting({"log.cleaner.threads": "4"})))
    entries = {e.name: e for e in describe_broker_configs(config, None, True, dynamic=configs)}
    cleaner = entries["log.cleaner.threads"]
    assert (cleaner.value, cleaner.source, cleaner.read_only, cleaner.documentation) == (
        "4", DYNAMIC_BROKER_CONFIG, False, IGNORED_NOTE)
    assert [(s.value, s.source) for s in cleaner.synonyms] == [("4", DYNAMIC_BROKER_CONFIG),
                                                                ("1", STATIC_BROKER_CONFIG)]
    secret = entries["delegation.token.secret.key"]
    assert (secret.value, secret.sensitive, secret.read_only) == (None, True, True)
    with pytest.raises(InvalidRequestError, match="Cannot update these configs dynamically"):
        check_alterable(config, ["delegation.token.secret.key"], configs)  # Kafka: read-only
    with pytest.raises(InvalidConfigError, match="Not a number of type INT"):
        asyncio.run(configs.alter(False, setting({"log.cleaner.threads": "four"})))
    config, _, configs = dynamic(tmp_path)  # a restart reads what was acknowledged
    assert {e.name: e.value for e in describe_broker_configs(config, ["log.cleaner.threads"], dynamic=configs)} == {
        "log.cleaner.threads": "4"}
    with pytest.raises(ConfigError, match="Not a number of type INT"):
        configured({"log.cleaner.threads": "four"})
