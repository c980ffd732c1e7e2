"""`eoslog configs describe|alter`: Kafka's kafka-configs.sh for topics and brokers, over the protocol.

    eoslog configs describe --topic orders            # every config, its value and where it comes from
    eoslog configs alter --topic orders --set retention.ms=3600000 --delete cleanup.policy
    eoslog configs describe --broker 1
    eoslog configs alter --broker 1 --set max.connections=1000   # a dynamic broker config
    eoslog configs alter --broker-defaults --set max.connections.per.ip=100

A name the broker does not list for the resource is refused before anything is sent, naming the closest
valid ones; a value the broker rejects (INVALID_CONFIG) is shown with the broker's reason, which states
the valid range or values.
"""

from __future__ import annotations

from dataclasses import asdict

import click

from eoslog.tools import admin_requests as admin
from eoslog.tools.brokers import Brokers, security_option
from eoslog.tools.common import bootstrap_option, emit_json, json_option, print_table
from eoslog.tools.topics_cli import parse_configs


def _resource(command):
    command = click.option("--broker-defaults", is_flag=True,
                           help="The cluster-wide defaults of the brokers' dynamic configs.")(command)
    command = click.option("--broker", default=None, metavar="ID", help="A broker, by id.")(command)
    return click.option("--topic", default=None, help="A topic.")(command)


def _pick(topic: str | None, broker: str | None, broker_defaults: bool = False) -> tuple[int, str, str]:
    if [topic is not None, broker is not None, broker_defaults].count(True) != 1:
        raise click.UsageError("give exactly one of --topic or --broker (or --broker-defaults)")
    if topic is not None:
        return admin.TOPIC, topic, f"topic {topic}"
    if broker_defaults:  # Kafka's resource for them: a broker named "" (kafka-configs --entity-default)
        return admin.BROKER, "", "the brokers' defaults"
    return admin.BROKER, broker, f"broker {broker}"


@click.group("configs")
def configs_group() -> None:
    """Describe and alter topic and broker configs (Kafka's names)."""


@configs_group.command("describe")
@_resource
@click.option("--overrides-only", is_flag=True, help="Only configs set on the resource itself.")
@bootstrap_option
@security_option
@json_option
def describe_command(topic, broker, broker_defaults, overrides_only, bootstrap, security, as_json) -> None:
    """Every config of a topic or broker: value, source (topic, static-broker, default, ...), read-only."""
    resource_type, name, what = _pick(topic, broker, broker_defaults)
    with Brokers(bootstrap, security=security) as brokers:
        entries = admin.describe_configs(brokers, resource_type, name)
    if overrides_only:  # a broker's own settings are its properties file and --set (static-broker)
        own = ("topic",) if topic is not None else ("dynamic-broker", "dynamic-default-broker", "static-broker")
        entries = [e for e in entries if e.source in own]
    if as_json:
        emit_json([asdict(e) for e in entries])
    elif entries:
        print_table([[e.name, "(sensitive)" if e.sensitive else e.value, e.source, "yes" if e.read_only else ""]
                     for e in entries], ["NAME", "VALUE", "SOURCE", "READ-ONLY"], title=f"configs of {what}")
    else:
        click.echo(f"{what}: {'nothing set on it' if overrides_only else 'the broker describes no configs'}")


@configs_group.command("alter")
@_resource
@click.option("--set", "set_", multiple=True, metavar="NAME=VALUE", help="Set a config (repeatable).")
@click.option("--delete", multiple=True, metavar="NAME", help="Return a config to its default (repeatable).")
@click.option("--validate-only", is_flag=True, help="Ask the broker whether it would accept the change, and stop.")
@bootstrap_option
@security_option
@json_option
def alter_command(topic, broker, broker_defaults, set_, delete, validate_only, bootstrap, security, as_json) -> None:
    """Set and delete configs of a topic or broker (IncrementalAlterConfigs)."""
    resource_type, name, what = _pick(topic, broker, broker_defaults)
    values = parse_configs(set_)
    if not values and not delete:
        raise click.UsageError("nothing to alter: give --set or --delete")
    with Brokers(bootstrap, security=security) as brokers:
        # the defaults resource lists only what is set: a broker's own list has every name
        described = admin.describe_configs(brokers, resource_type, name) if name or resource_type != admin.BROKER \
            else admin.describe_configs(brokers, admin.BROKER, str(brokers.metadata().brokers[0].node_id))
        valid = [e.name for e in described]
        admin.check_config_names([*values, *delete], valid, what)
        admin.alter_configs(brokers, resource_type, name, values, list(delete), validate_only)
    if as_json:
        emit_json({"resource": what, "set": values, "deleted": list(delete), "validate_only": validate_only})
        return
    changes = [f"{k}={v}" for k, v in values.items()] + [f"-{k}" for k in delete]
    click.echo(f"{'valid for' if validate_only else 'altered'} {what}: {' '.join(changes)}")
