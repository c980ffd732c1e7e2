"""`eoslog configs describe|alter` against a real broker: the tool lists what confluent-kafka's
AdminClient describes, its changes are what the AdminClient then reads, and mistakes are one clear line
with a non-zero exit code."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from eoslog.tools.configs_cli import configs_group

pytestmark = pytest.mark.interop


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(configs_group, list(args))
    assert result.exit_code == code, result.output
    return result


def described(admin: AdminClient, topic: str) -> dict[str, tuple[str, str]]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {name: (entry.value, entry.source) for name, entry in admin.describe_configs([resource])[resource].result(10).items()}


def test_describe_and_alter_topic_configs_as_the_admin_client_sees_them(eoslog_broker):
    bootstrap = eoslog_broker
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("c", 1, 1, config={"retention.ms": "7200000"})])["c"].result(10)

    entries = json.loads(run("describe", "--topic", "c", "-b", bootstrap, "--json").output)
    theirs = described(admin, "c")
    assert {e["name"]: e["value"] for e in entries} == {name: value for name, (value, _) in theirs.items()}
    sources = {e["name"]: e["source"] for e in entries}
    assert sources["retention.ms"] == "topic" and sources["segment.bytes"] == "default"
    assert theirs["retention.ms"][1] == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    overrides = json.loads(run("describe", "--topic", "c", "--overrides-only", "-b", bootstrap, "--json").output)
    assert [(e["name"], e["value"]) for e in overrides] == [("retention.ms", "7200000")]
    table = run("describe", "--topic", "c", "--bootstrap", bootstrap).output
    assert ["retention.ms", "7200000", "topic"] in [line.split() for line in table.splitlines()]

    run("alter", "--topic", "c", "--set", "max.message.bytes=2000000", "--set", "cleanup.policy=compact,delete",
        "--delete", "retention.ms", "-b", bootstrap)
    theirs = described(admin, "c")
    assert theirs["max.message.bytes"][0] == "2000000"
    assert theirs["cleanup.policy"][0] == "compact,delete"
    assert theirs["retention.ms"][0] == "604800000"  # back to the default

    checked = run("alter", "--topic", "c", "--set", "segment.ms=1000", "--validate-only", "-b", bootstrap)
    assert "valid for topic c" in checked.output
    assert described(admin, "c")["segment.ms"][0] == "604800000"  # validate-only changed nothing


def test_unknown_names_and_invalid_values_are_one_line_errors(eoslog_broker):
    bootstrap = eoslog_broker
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("c", 1, 1)])["c"].result(10)

    unknown = run("alter", "--topic", "c", "--set", "retention.msec=5", "-b", bootstrap, code=1)
    assert unknown.output.strip() == ("Error: unknown config 'retention.msec' for topic c; "
                                      "closest: retention.ms, retention.bytes, delete.retention.ms")
    typo = run("alter", "--topic", "c", "--delete", "cleanup.polcy", "-b", bootstrap, code=1)
    assert "closest: cleanup.policy" in typo.output
    invalid = run("alter", "--topic", "c", "--set", "message.timestamp.type=WallClock", "-b", bootstrap, code=1)
    assert invalid.output.strip() == ("Error: altering topic c: INVALID_CONFIG: invalid value 'WallClock' for "
                                      "configuration message.timestamp.type: must be CreateTime or LogAppendTime")
    out_of_range = run("alter", "--topic", "c", "--set", "min.cleanable.dirty.ratio=2", "-b", bootstrap, code=1)
    assert "INVALID_CONFIG" in out_of_range.output and "between 0 and 1" in out_of_range.output
    not_integer = run("alter", "--topic", "c", "--set", "retention.ms=soon", "-b", bootstrap, code=1)
    assert "must be an integer" in not_integer.output
    assert described(admin, "c")["retention.ms"][0] == "604800000"

    missing = run("describe", "--topic", "nope", "-b", bootstrap, code=1)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.output
    both = run("describe", "--topic", "c", "--broker", "0", "-b", bootstrap, code=2)
    assert "exactly one of --topic or --broker" in both.output
    not_an_id = run("describe", "--broker", "zero", "-b", bootstrap, code=1)
    assert "a broker is named by its id" in not_an_id.output
