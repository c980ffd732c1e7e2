"""`eoslog topics create|list|describe|alter|delete`: Kafka's kafka-topics.sh over the Kafka protocol.

    eoslog topics create orders --partitions 6 --replication-factor 3 --config retention.ms=86400000
    eoslog topics describe orders          # per partition: leader, replicas, ISR, log start, HW, LSO
    eoslog topics alter orders --partitions 12 --config cleanup.policy=compact --delete-config retention.ms

Topic changes go to the controller (tools/admin_requests.py), offsets to the partition leaders, one
request per leader (tools/leader_requests.py).
"""

from __future__ import annotations

from dataclasses import asdict

import click

from eoslog.protocol.errors import ErrorCode
from eoslog.tools import admin_requests as admin
from eoslog.tools import leader_requests
from eoslog.tools.brokers import Brokers, security_option
from eoslog.tools.common import (
    bootstrap_option,
    check,
    emit_json,
    error_name,
    json_option,
    plural,
    print_table,
)


def parse_configs(values: tuple[str, ...]) -> dict[str, str]:
    configs = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--config")
        configs[name.strip()] = value.strip()
    return configs


def _config_option(command):
    return click.option("--config", "configs", multiple=True, metavar="NAME=VALUE",
                        help="A topic config, Kafka's name (repeatable).")(command)


def describe_topics(brokers: Brokers, names: list[str] | None) -> list[admin.TopicView]:
    """Metadata plus, per partition, the log start offset, high watermark and last stable offset (three
    ListOffsets per leader: earliest, latest read_uncommitted, latest read_committed, the leaders taken
    from the same Metadata), and the topic's own configs. A partition its leader would not answer for
    keeps its offsets unset and says why in ``error``."""
    views = admin.topics(brokers, names)
    leader_of = {(v.name, p.partition): p.leader for v in views for p in v.partitions if p.leader >= 0}
    asked = [(level, timestamp) for timestamp, level in ((admin.EARLIEST, admin.READ_UNCOMMITTED),
             (admin.LATEST, admin.READ_UNCOMMITTED), (admin.LATEST, admin.READ_COMMITTED))]
    answers = [leader_requests.list_offsets(brokers, sorted(leader_of), timestamp, level, leader_of)
               if leader_of else ({}, {}) for level, timestamp in asked]
    for view in views:
        for p in view.partitions:
            tp = (view.name, p.partition)
            p.log_start_offset, p.high_watermark, p.last_stable_offset = (offsets.get(tp) for offsets, _ in answers)
            failed = sorted({error_name(errors[tp]) for _, errors in answers if tp in errors})
            p.error = ",".join(failed) or None
    for view in views:
        view.configs = {c.name: c.value for c in admin.describe_configs(brokers, admin.TOPIC, view.name)
                        if c.source == "topic"}
    return views


@click.group("topics")
def topics_group() -> None:
    """Create, list, describe, alter and delete topics."""


@topics_group.command("create")
@click.argument("topic")
@click.option("--partitions", type=int, default=-1, help="Default: the broker's num.partitions.")
@click.option("--replication-factor", type=int, default=-1,
              help="Default: the broker's default.replication.factor.")
@_config_option
@click.option("--if-not-exists", is_flag=True, help="Succeed when the topic already exists.")
@click.option("--validate-only", is_flag=True, help="Ask the broker whether it would create it, and stop.")
@bootstrap_option
@security_option
@json_option
def create_command(topic, partitions, replication_factor, configs, if_not_exists, validate_only, bootstrap,
                   security, as_json) -> None:
    """Create TOPIC."""
    configs = parse_configs(configs)
    with Brokers(bootstrap, security=security) as brokers:
        valid = admin.valid_topic_config_names(brokers)
        admin.check_config_names(list(configs), valid, f"topic {topic}")
        result = admin.create_topic(brokers, topic, partitions, replication_factor, configs, validate_only)
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and if_not_exists:
        outcome = "exists"
    else:
        if result.error_code == ErrorCode.INVALID_CONFIG and valid is None:
            admin.unknown_topic_config(list(configs), f"topic {topic}")
        check(result.error_code, f"creating topic {topic}", result.error_message)
        outcome = "valid" if validate_only else "created"
    if as_json:
        emit_json({"topic": topic, "outcome": outcome, "partitions": result.num_partitions,
                   "replication_factor": result.replication_factor})
    elif outcome == "exists":
        click.echo(f"topic {topic} already exists")
    else:
        click.echo(f"{'would create' if validate_only else 'created'} topic {topic}: "
                   f"{plural(result.num_partitions, 'partition')}, replication factor {result.replication_factor}")


@topics_group.command("list")
@click.option("--exclude-internal", is_flag=True, help="Leave out __consumer_offsets and the like.")
@bootstrap_option
@security_option
@json_option
def list_command(exclude_internal, bootstrap, security, as_json) -> None:
    """Every topic, with its partition count and replication factor."""
    with Brokers(bootstrap, security=security) as brokers:
        views = [v for v in admin.topics(brokers) if not (exclude_internal and v.internal)]
    if as_json:
        emit_json([{"topic": v.name, "partitions": len(v.partitions), "replication_factor": v.replication_factor,
                    "internal": v.internal} for v in views])
    elif views:
        print_table([[v.name, len(v.partitions), v.replication_factor, "yes" if v.internal else ""] for v in views],
                    ["TOPIC", "PARTITIONS", "REPLICATION", "INTERNAL"])
    else:
        click.echo("none")


@topics_group.command("describe")
@click.argument("topics", nargs=-1)
@bootstrap_option
@security_option
@json_option
def describe_command(topics, bootstrap, security, as_json) -> None:
    """Per partition: leader, replicas, in-sync replicas, log start offset, high watermark and last
    stable offset; and the configs set on the topic. Every topic when none is named."""
    with Brokers(bootstrap, security=security) as brokers:
        views = describe_topics(brokers, list(topics) or None)
    if as_json:
        emit_json([asdict(v) | {"replication_factor": v.replication_factor} for v in views])
        return
    for n, view in enumerate(views):
        if n:
            click.echo("")
        configs = ",".join(f"{k}={v}" for k, v in sorted(view.configs.items())) or "-"
        click.echo(f"topic {view.name}: {plural(len(view.partitions), 'partition')}, replication factor "
                   f"{view.replication_factor}{' (internal)' if view.internal else ''}, configs {configs}")
        errors = any(p.error for p in view.partitions)  # the column only when a partition has one
        print_table([[p.partition, p.leader if p.leader >= 0 else "none", ",".join(map(str, p.replicas)),
                      ",".join(map(str, p.isr)), ",".join(map(str, p.offline)) or None, p.log_start_offset,
                      p.high_watermark, p.last_stable_offset] + [p.error] * errors for p in view.partitions],
                    ["PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE", "LOG-START", "HIGH-WATERMARK",
                     "LAST-STABLE"] + ["ERROR"] * errors)


@topics_group.command("alter")
@click.argument("topic")
@click.option("--partitions", type=int, default=None, help="The new (larger) partition count.")
@_config_option
@click.option("--delete-config", "deleted", multiple=True, metavar="NAME",
              help="Return a config to its default (repeatable).")
@bootstrap_option
@security_option
@json_option
def alter_command(topic, partitions, configs, deleted, bootstrap, security, as_json) -> None:
    """Add partitions to TOPIC, or set and delete its configs (IncrementalAlterConfigs)."""
    configs = parse_configs(configs)
    if partitions is None and not configs and not deleted:
        raise click.UsageError("nothing to alter: give --partitions, --config or --delete-config")
    with Brokers(bootstrap, security=security) as brokers:
        if configs or deleted:
            admin.check_config_names([*configs, *deleted], admin.valid_topic_config_names(brokers, topic),
                                     f"topic {topic}")
            admin.alter_configs(brokers, admin.TOPIC, topic, configs, list(deleted))
        if partitions is not None:
            admin.create_partitions(brokers, topic, partitions)
    if as_json:
        emit_json({"topic": topic, "configs_set": configs, "configs_deleted": list(deleted), "partitions": partitions})
        return
    done = [f"{plural(len(configs), 'config')} set"] * bool(configs) + [f"{len(deleted)} deleted"] * bool(deleted)
    done += [plural(partitions, "partition")] * (partitions is not None)
    click.echo(f"altered topic {topic}: {', '.join(done)}")


@topics_group.command("delete")
@click.argument("topic")
@click.option("--if-exists", is_flag=True, help="Succeed when there is no such topic.")
@bootstrap_option
@security_option
@json_option
def delete_command(topic, if_exists, bootstrap, security, as_json) -> None:
    """Delete TOPIC and its data."""
    with Brokers(bootstrap, security=security) as brokers:
        try:
            admin.delete_topic(brokers, topic)
            outcome = "deleted"
        except click.ClickException as exc:
            if not (if_exists and "UNKNOWN_TOPIC_OR_PARTITION" in exc.message):
                raise
            outcome = "absent"
    if as_json:
        emit_json({"topic": topic, "outcome": outcome})
    else:
        click.echo(f"deleted topic {topic}" if outcome == "deleted" else f"no topic {topic}")
