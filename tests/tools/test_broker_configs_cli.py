"""A broker's configs through DescribeConfigs, IncrementalAlterConfigs and AlterConfigs, against a real
`eoslog serve` started with --set: `eoslog configs describe --broker 0` and confluent-kafka's AdminClient
see the same values and sources, passwords are never sent back, an alter of a static config is refused
with the reason, and the dynamic ones (connection limits) take effect at once and survive a restart."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from click.testing import CliRunner
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.server.dynamic_broker_configs import DYNAMIC_PROPERTIES
from eoslog.testing.process import BrokerProcess
from eoslog.tools.configs_cli import configs_group

pytestmark = pytest.mark.interop

BROKER = ConfigResource.Type.BROKER
STARTED_WITH = {"num.partitions": "3", "log.retention.hours": "2", "ssl.key.password": "not-for-your-eyes",
                "max.connections.per.ip": "500"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("brokercfg") / "data", properties=STARTED_WITH) as running:
        yield running


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(configs_group, list(args))
    assert result.exit_code == code, result.output
    return result


def describe_raw(bootstrap: str, name: str, keys=None, synonyms=False):
    Resource = messages.DescribeConfigsRequest.DescribeConfigsResource
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        [result] = wire.request(32, 4, messages.DescribeConfigsRequest(
            include_synonyms=synonyms, include_documentation=False,
            resources=[Resource(resource_type=4, resource_name=name, configuration_keys=keys)])).results
    finally:
        wire.close()
    return result


def test_describe_shows_how_the_broker_was_started_as_the_admin_client_sees_it(broker):
    entries = {e["name"]: e for e in json.loads(run("describe", "--broker", "0", "-b", broker.bootstrap, "--json").output)}
    assert entries["num.partitions"]["value"] == "3" and entries["num.partitions"]["source"] == "static-broker"
    assert entries["log.retention.ms"]["value"] == "7200000"  # set through its synonym log.retention.hours
    assert entries["log.retention.ms"]["source"] == "static-broker"
    assert entries["max.connections.per.ip"]["value"] == "500"
    assert entries["auto.create.topics.enable"] == {
        "name": "auto.create.topics.enable", "value": "true", "source": "default", "read_only": True,
        "sensitive": False}
    assert entries["ssl.key.password"]["value"] is None and entries["ssl.key.password"]["sensitive"]
    assert entries["listeners"]["value"] == f"PLAINTEXT://{broker.bootstrap}"  # --listen is static too
    assert entries["listeners"]["source"] == "static-broker"
    assert "num.network.threads" not in entries  # a Kafka property eoslog ignores is not described
    table = run("describe", "--broker", "0", "-b", broker.bootstrap).output
    assert ["num.partitions", "3", "static-broker", "yes"] in [line.split() for line in table.splitlines()]
    assert "not-for-your-eyes" not in table
    overrides = json.loads(run("describe", "--broker", "0", "--overrides-only", "-b", broker.bootstrap, "--json").output)
    assert {"num.partitions", "log.retention.ms", "ssl.key.password", "listeners", "log.dirs"} <= \
        {e["name"] for e in overrides}
    assert all(e["source"] == "static-broker" for e in overrides)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(BROKER, "0")
    theirs = admin.describe_configs([resource])[resource].result(10)
    assert {name: e.value for name, e in theirs.items()} == {name: e["value"] for name, e in entries.items()}
    assert theirs["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert theirs["auto.create.topics.enable"].source == \
        ConfigSource.DEFAULT_CONFIG.value
    assert theirs["ssl.key.password"].is_sensitive and theirs["ssl.key.password"].value is None
    assert {name for name, e in theirs.items() if not e.is_read_only} == set(DYNAMIC_PROPERTIES)


def test_synonyms_filtering_and_other_brokers_ids_on_the_wire(broker):
    result = describe_raw(broker.bootstrap, "0", keys=["log.retention.ms", "num.partitions", "no.such.thing"],
                          synonyms=True)
    assert result.error_code == 0
    by_name = {c.name: c for c in result.configs}
    assert sorted(by_name) == ["log.retention.ms", "num.partitions"]
    assert [(s.name, s.value, s.source) for s in by_name["log.retention.ms"].synonyms] == [
        ("log.retention.hours", "2", 4), ("log.retention.ms", "604800000", 5)]  # in force first, default last
    assert by_name["num.partitions"].config_type == 3  # INT

    other = describe_raw(broker.bootstrap, "7")
    assert other.error_code == ErrorCode.INVALID_REQUEST and other.configs == []
    assert other.error_message == "INVALID_REQUEST: Unexpected broker id, expected 0 or empty string, but received 7"
    not_an_id = describe_raw(broker.bootstrap, "zero")
    assert not_an_id.error_code == ErrorCode.INVALID_REQUEST and "must be an integer" in not_an_id.error_message
    cluster_default = describe_raw(broker.bootstrap, "")  # only dynamic defaults, and eoslog has none
    assert cluster_default.error_code == 0 and cluster_default.configs == []


def test_alter_is_refused_with_the_reason_and_changes_nothing(broker):
    unknown = run("alter", "--broker", "0", "--set", "num.partitionz=4", "-b", broker.bootstrap, code=1)
    assert unknown.output.strip().splitlines() == [(
        "Error: unknown config 'num.partitionz' for broker 0; closest: num.partitions, "
        "offsets.topic.num.partitions, transaction.state.log.num.partitions")]
    read_only = run("alter", "--broker", "0", "--set", "num.partitions=4", "-b", broker.bootstrap, code=1)
    assert read_only.output.strip().splitlines() == [(
        "Error: altering broker 0: INVALID_REQUEST: Cannot update these configs dynamically: num.partitions "
        "(the dynamic ones are max.connections, max.connections.per.ip, max.connections.per.ip.overrides, "
        "log.retention.ms, log.retention.bytes, log.segment.bytes, log.roll.ms; set the others in the properties "
        "file or with --set, and restart the broker)")]
    checked = run("alter", "--broker", "0", "--delete", "log.cleanup.policy", "--validate-only", "-b",
                  broker.bootstrap, code=1)
    assert "Cannot update these configs dynamically: log.cleanup.policy" in checked.output

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    change = ConfigResource(BROKER, "0", incremental_configs=[
        ConfigEntry("auto.create.topics.enable", "false", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.connections", "10", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(confluent_kafka.KafkaException,
                       match="Cannot update these configs dynamically: auto.create.topics.enable .the dynamic"):
        admin.incremental_alter_configs([change])[change].result(10)
    typo = ConfigResource(BROKER, "0", incremental_configs=[
        ConfigEntry("log.retention.msec", "10", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        admin.incremental_alter_configs([typo])[typo].result(10)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "unknown broker config 'log.retention.msec'; closest: log.retention.ms" in refused.value.args[0].str()

    entries = {e["name"]: e["value"] for e in json.loads(
        run("describe", "--broker", "0", "-b", broker.bootstrap, "--json").output)}
    assert entries["num.partitions"] == "3" and entries["max.connections"] == "2147483647"  # none of it applied
    assert entries["log.retention.ms"] == "7200000" and entries["auto.create.topics.enable"] == "true"


def test_the_older_alter_configs_sets_a_topic_whole_and_refuses_broker_configs(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("whole", 1, 1, config={"retention.ms": "60000"})])["whole"].result(10)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "whole", set_config={"segment.ms": "3600000"})
    admin.alter_configs([topic])[topic].result(10)  # AlterConfigs (33): the topic's whole set
    described = ConfigResource(ConfigResource.Type.TOPIC, "whole")
    entries = admin.describe_configs([described])[described].result(10)
    assert entries["segment.ms"].value == "3600000"
    # left out, so back to the default as in Kafka: here the broker's log.retention.hours=2
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "7200000", ConfigSource.STATIC_BROKER_CONFIG.value)
    bad = ConfigResource(ConfigResource.Type.TOPIC, "whole", set_config={"retention.ms": "soon"})
    with pytest.raises(confluent_kafka.KafkaException, match="retention.ms"):
        admin.alter_configs([bad])[bad].result(10)
    broker_change = ConfigResource(BROKER, "0", set_config={"num.partitions": "4"})
    with pytest.raises(confluent_kafka.KafkaException, match="Cannot update these configs dynamically: num.partitions"):
        admin.alter_configs([broker_change])[broker_change].result(10)

    Resource, Config = messages.AlterConfigsRequest.AlterConfigsResource, messages.AlterConfigsRequest.AlterableConfig
    wire = BrokerConnection.from_bootstrap(broker.bootstrap)
    try:  # version 2 (flexible), which confluent-kafka does not send
        [refused] = wire.request(33, 2, messages.AlterConfigsRequest(validate_only=True, resources=[
            Resource(resource_type=4, resource_name="0", configs=[Config(name="log.cleanup.policy", value="compact")])])
        ).responses
    finally:
        wire.close()
    assert refused.error_code == ErrorCode.INVALID_REQUEST and "log.cleanup.policy" in refused.error_message
    entries = {e["name"]: e["value"] for e in json.loads(
        run("describe", "--broker", "0", "-b", broker.bootstrap, "--json").output)}
    assert entries["num.partitions"] == "3" and entries["log.retention.ms"] == "7200000"


def test_dynamic_connection_limits_take_effect_and_survive_a_restart(tmp_path):
    from eoslog.testing.wait import wait_until

    with BrokerProcess(data_dir=tmp_path / "data", properties={"max.connections.per.ip": "50"}) as broker:
        run("alter", "--broker", "0", "--set", "max.connections.per.ip=3", "-b", broker.bootstrap)
        entries = {e["name"]: e for e in json.loads(run("describe", "--broker", "0", "-b", broker.bootstrap,
                                                        "--json").output)}
        assert entries["max.connections.per.ip"] == {"name": "max.connections.per.ip", "value": "3",
                                                     "source": "dynamic-broker", "read_only": False,
                                                     "sensitive": False}

        def answered(wire: BrokerConnection) -> bool:
            try:
                wire.request(18, 0, messages.ApiVersionsRequest())
                return True
            except OSError:  # ConnectionError included: the broker closed it, over the limit
                return False

        def refused_after(count: int) -> bool | None:
            """True when ``count`` connections are answered and the next is closed, False when that one is
            answered too; None when one of the first ``count`` was not (connections this test closed a
            moment ago not yet counted out: ask again)."""
            wires = [BrokerConnection.from_bootstrap(broker.bootstrap, timeout_s=10) for _ in range(count + 1)]
            try:
                if not all(answered(wire) for wire in wires[:count]):
                    return None
                return not answered(wires[count])
            finally:
                for wire in wires:
                    wire.close()

        wait_until(lambda: refused_after(3) is True, 15, "a fourth connection refused")
        wait_until(lambda: refused_after(2) is False, 15, "a third connection admitted")
        broker.restart(hard=False)
        wait_until(lambda: refused_after(3) is True, 15, "the limit still in force after a restart")
        run("alter", "--broker-defaults", "--set", "max.connections=1000", "-b", broker.bootstrap)
        defaults = json.loads(run("describe", "--broker-defaults", "-b", broker.bootstrap, "--json").output)
        assert [(e["name"], e["value"], e["source"]) for e in defaults] == [
            ("max.connections", "1000", "dynamic-default-broker")]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(BROKER, "0")
        theirs = admin.describe_configs([resource])[resource].result(10)
        assert (theirs["max.connections"].value, theirs["max.connections"].source) == (
            "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert (theirs["max.connections.per.ip"].value, theirs["max.connections.per.ip"].source) == (
            "3", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        # AlterConfigs (33) sets the broker's whole dynamic set: max.connections.per.ip left out goes back to 50
        whole = ConfigResource(BROKER, "0", set_config={"max.connections.per.ip.overrides": "127.0.0.9:1"})
        admin.alter_configs([whole])[whole].result(10)
        run("alter", "--broker", "0", "--delete", "max.connections.per.ip.overrides", "-b", broker.bootstrap)
        wait_until(lambda: refused_after(3) is False, 15, "back to the static limit, 50")
        entries = {e["name"]: e for e in json.loads(run("describe", "--broker", "0", "-b", broker.bootstrap,
                                                        "--json").output)}
        assert (entries["max.connections.per.ip"]["value"], entries["max.connections.per.ip"]["source"]) == (
            "50", "static-broker")


def test_dynamic_log_defaults_reach_every_log_whose_topic_does_not_set_its_own(eoslog_embedded):
    bootstrap = eoslog_embedded.bootstrap
    registry = eoslog_embedded.broker.registry
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic, config in (("inherits", {}), ("own", {"retention.ms": "60000"})):
        admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)

    def retention_ms(topic: str) -> int:
        return registry.partition(topic, 0).log.config.retention_ms

    def topic_entry(topic: str) -> tuple[str, int]:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        entry = admin.describe_configs([resource])[resource].result(10)["retention.ms"]
        return entry.value, entry.source

    run("alter", "--broker", "0", "--set", "log.retention.ms=3600000", "-b", bootstrap)
    assert retention_ms("inherits") == 3_600_000 and retention_ms("own") == 60_000
    assert topic_entry("inherits") == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    admin.create_topics([NewTopic("later", 1, 1)])["later"].result(10)
    assert retention_ms("later") == 3_600_000
    invalid = run("alter", "--broker", "0", "--set", "log.segment.bytes=10", "-b", bootstrap, code=1)
    assert "INVALID_CONFIG" in invalid.output and "segment.bytes" in invalid.output
    run("alter", "--broker", "0", "--delete", "log.retention.ms", "-b", bootstrap)
    assert retention_ms("inherits") == 604_800_000 and retention_ms("later") == 604_800_000
    assert topic_entry("inherits") == ("604800000", ConfigSource.DEFAULT_CONFIG.value)
