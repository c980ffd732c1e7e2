"""`eoslog acls add|list|remove`: ACLs through CreateAcls, DescribeAcls and DeleteAcls, with the flags of
Kafka's kafka-acls.sh where they fit (--allow-principal, --deny-principal, --operation, --topic, --group,
--transactional-id, --cluster, --resource-pattern-type, --producer, --consumer).

It talks to one broker over the Kafka protocol with eoslog's own codec. ``--command-config`` takes a
client properties file as kafka-acls.sh does; for a TLS listener: ``security.protocol=SSL`` and PEM files
in ``ssl.truststore.location`` (the CA) and ``ssl.keystore.location`` (certificate and key), or librdkafka's
``ssl.ca.location`` / ``ssl.certificate.location`` / ``ssl.key.location``. The principal the tool
connects as must be a super user or hold ALTER (DESCRIBE for list) on the cluster.
"""

from __future__ import annotations

from pathlib import Path

import click

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    InvalidAclError,
    PatternType,
    ResourceType,
    check_principal,
)
from eoslog.security.acl_format import OPERATION_NAMES
from eoslog.tools.common import emit_json, plural

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
VERSION = 2  # flexible, and served by Kafka 2.4+ as by eoslog
CLIENT_ID = "eoslog-acls"

# Kafka's spellings (Read, DescribeConfigs) and ours (READ, DESCRIBE_CONFIGS), any case.
_OPERATIONS = {**{name.lower(): op for op, name in OPERATION_NAMES.items()},
               **{op.name.lower(): op for op in OPERATION_NAMES}}


class AclsToolError(click.ClickException):
    pass


def _check(code: int, what: str, message: str | None = None) -> None:
    if code:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        raise AclsToolError(f"{what}: {name}" + (f" ({message})" if message else ""))


def connect(bootstrap: str, command_config: Path | None) -> BrokerConnection:
    """One connection, with the TLS and SASL settings of ``--command-config`` (security/client.py)."""
    from eoslog.security.client import ClientSecurity, ClientSecurityError

    try:
        security = ClientSecurity.from_file(command_config) if command_config is not None else None
        return BrokerConnection.from_bootstrap(bootstrap, client_id=CLIENT_ID, security=security)
    except ClientSecurityError as exc:
        raise AclsToolError(f"{bootstrap}: {exc}") from exc
    except OSError as exc:
        raise AclsToolError(f"cannot reach {bootstrap}: {exc}") from exc


def _operation(text: str) -> AclOperation:
    try:
        return _OPERATIONS[text.replace("-", "_").lower()]
    except KeyError:
        raise click.BadParameter(f"unknown operation {text!r}; one of {', '.join(OPERATION_NAMES.values())}") from None


def _resources(topics, groups, transactional_ids, cluster) -> list[tuple[ResourceType, str]]:
    return [*((ResourceType.TOPIC, t) for t in topics), *((ResourceType.GROUP, g) for g in groups),
            *((ResourceType.TRANSACTIONAL_ID, x) for x in transactional_ids),
            *([(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else [])]


def _pattern_type(text: str) -> PatternType:
    return PatternType[text.upper()]


def _principals(values) -> list[str]:
    for value in values:
        try:
            check_principal(value)
        except InvalidAclError as exc:
            raise click.BadParameter(str(exc)) from None
    return list(values)


# ---- the commands ---------------------------------------------------------------------------------

def _connection_options(command):
    command = click.option("--bootstrap-server", "--bootstrap", "-b", "bootstrap_server",
                           default="127.0.0.1:9092", show_default=True,
                           help="A broker's HOST:PORT.")(command)
    return click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                        default=None, help="Client properties for a secured listener (security.protocol, sasl.*, ssl.*).")(command)


def _resource_options(command):
    for option in reversed([
        click.option("--topic", "topics", multiple=True, help="A topic (or prefix); repeatable."),
        click.option("--group", "groups", multiple=True, help="A consumer group (or prefix); repeatable."),
        click.option("--transactional-id", "transactional_ids", multiple=True,
                     help="A transactional id (or prefix); repeatable."),
        click.option("--cluster", is_flag=True, help="The cluster resource (kafka-cluster)."),
    ]):
        command = option(command)
    return command


@click.group()
def acls_group() -> None:
    """Add, list and remove ACLs (the broker needs authorizer.class.name; docs/security.md)."""


@acls_group.command("add")
@_connection_options
@_resource_options
@click.option("--allow-principal", multiple=True, help="Type:name to allow (User:alice); repeatable.")
@click.option("--deny-principal", multiple=True, help="Type:name to deny; repeatable.")
@click.option("--allow-host", multiple=True, help="Hosts the allow applies to (default *).")
@click.option("--deny-host", multiple=True, help="Hosts the deny applies to (default *).")
@click.option("--operation", "operations", multiple=True, help="Read, Write, Create, Delete, Alter, Describe, "
              "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite or All; repeatable.")
@click.option("--resource-pattern-type", type=click.Choice(["literal", "prefixed"], case_sensitive=False),
              default="literal", show_default=True)
@click.option("--producer", is_flag=True, help="Kafka's producer shorthand: WRITE, DESCRIBE, CREATE on the "
              "topics; WRITE, DESCRIBE on the transactional ids; IDEMPOTENT_WRITE on the cluster with --idempotent.")
@click.option("--idempotent", is_flag=True, help="With --producer: IDEMPOTENT_WRITE on the cluster.")
@click.option("--consumer", is_flag=True, help="Kafka's consumer shorthand: READ, DESCRIBE on the topics, READ on "
              "the groups.")
@click.option("--json", "as_json", is_flag=True, help="Print the ACLs added as JSON instead of a count.")
def add_command(bootstrap_server, command_config, topics, groups, transactional_ids, cluster, allow_principal,
                deny_principal, allow_host, deny_host, operations, resource_pattern_type, producer, idempotent,
                consumer, as_json) -> None:
    """Create ACL bindings: every principal x host x operation x resource given."""
    pattern_type = _pattern_type(resource_pattern_type)
    wanted: list[tuple[ResourceType, str, AclOperation]] = []
    ops = [_operation(o) for o in operations]
    for rtype, name in _resources(topics, groups, transactional_ids, cluster):
        wanted.extend((rtype, name, op) for op in ops)
    if producer:
        wanted += [(ResourceType.TOPIC, t, op) for t in topics
                   for op in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)]
        wanted += [(ResourceType.TRANSACTIONAL_ID, x, op) for x in transactional_ids
                   for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
        if idempotent:
            wanted.append((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE))
    if consumer:
        wanted += [(ResourceType.TOPIC, t, op) for t in topics for op in (AclOperation.READ, AclOperation.DESCRIBE)]
        wanted += [(ResourceType.GROUP, g, AclOperation.READ) for g in groups]
    entries = [(p, h, AclPermissionType.ALLOW) for p in _principals(allow_principal) for h in (allow_host or ("*",))]
    entries += [(p, h, AclPermissionType.DENY) for p in _principals(deny_principal) for h in (deny_host or ("*",))]
    if not wanted or not entries:
        raise click.UsageError("give a resource (--topic, --group, --transactional-id, --cluster), an operation "
                               "(or --producer / --consumer) and --allow-principal or --deny-principal")
    creation = messages.CreateAclsRequest.AclCreation
    creations = [creation(resource_type=int(rtype), resource_name=name, resource_pattern_type=int(pattern_type),
                          principal=principal, host=host, operation=int(op), permission_type=int(permission))
                 for rtype, name, op in dict.fromkeys(wanted) for principal, host, permission in entries]
    wire = connect(bootstrap_server, command_config)
    try:
        response = wire.request(CREATE_ACLS, VERSION, messages.CreateAclsRequest(creations=creations))
    finally:
        wire.close()
    for c, result in zip(creations, response.results):
        _check(result.error_code, f"{ResourceType(c.resource_type).name} {c.resource_name} {c.principal}",
               result.error_message)
    if as_json:
        emit_json([_rows(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                         c.operation, c.permission_type) for c in creations])
    else:
        click.echo(f"added {plural(len(creations), 'ACL')}")


def _filter_options(command):
    for option in reversed([
        click.option("--principal", default=None, help="Only ACLs of this principal."),
        click.option("--resource-pattern-type", type=click.Choice(["any", "match", "literal", "prefixed"],
                                                                   case_sensitive=False),
                     default="literal", show_default=True,
                     help="How the resource names given match (any/match select across pattern types)."),
        click.option("--operation", "operation", default=None, help="Only ACLs for this operation."),
    ]):
        command = option(command)
    return command


def _filters(topics, groups, transactional_ids, cluster, principal, resource_pattern_type, operation):
    resources = _resources(topics, groups, transactional_ids, cluster)
    pattern_type = _pattern_type(resource_pattern_type)
    if not resources:  # everything (Kafka's --list without a resource)
        resources, pattern_type = [(ResourceType.ANY, None)], PatternType.ANY
    op = _operation(operation) if operation else AclOperation.ANY
    return [{"resource_type_filter": int(rtype), "resource_name_filter": name,
             "pattern_type_filter": int(pattern_type), "principal_filter": principal, "host_filter": None,
             "operation": int(op), "permission_type": int(AclPermissionType.ANY)} for rtype, name in resources]


def _rows(resource_type, name, pattern_type, principal, host, operation, permission) -> dict:
    return {"resource_type": ResourceType(resource_type).name, "name": name,
            "pattern_type": PatternType(pattern_type).name, "principal": principal, "host": host,
            "operation": AclOperation(operation).name, "permission": AclPermissionType(permission).name}


def _print(rows: list[dict], as_json: bool) -> None:
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo("none")
    current = None
    for row in rows:
        pattern = (row["resource_type"], row["name"], row["pattern_type"])
        if pattern != current:
            current = pattern
            click.echo(f"ACLs for {row['resource_type']} {row['name']!r} ({row['pattern_type']}):")
        click.echo(f"    {row['permission']:<5} {row['principal']} {row['operation']} from host {row['host']}")


@acls_group.command("list")
@_connection_options
@_resource_options
@_filter_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def list_command(bootstrap_server, command_config, topics, groups, transactional_ids, cluster, principal,
                 resource_pattern_type, operation, as_json) -> None:
    """The ACLs on the resources given (all ACLs when none is given)."""
    rows = []
    wire = connect(bootstrap_server, command_config)
    try:
        for f in _filters(topics, groups, transactional_ids, cluster, principal, resource_pattern_type, operation):
            response = wire.request(DESCRIBE_ACLS, VERSION, messages.DescribeAclsRequest(**f))
            _check(response.error_code, "DescribeAcls", response.error_message)
            rows += [_rows(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                           a.permission_type) for r in response.resources for a in r.acls]
    finally:
        wire.close()
    _print(sorted(rows, key=lambda r: tuple(r.values())), as_json)


@acls_group.command("remove")
@_connection_options
@_resource_options
@_filter_options
@click.option("--json", "as_json", is_flag=True, help="Print the removed ACLs as JSON.")
@click.option("--force", is_flag=True, help="Needed to remove every ACL (no resource, principal or operation).")
def remove_command(bootstrap_server, command_config, topics, groups, transactional_ids, cluster, principal,
                   resource_pattern_type, operation, as_json, force) -> None:
    """Remove the ACLs the options select."""
    if not (topics or groups or transactional_ids or cluster or principal or operation or force):
        raise click.UsageError("nothing selected: this would remove every ACL; add --force to mean it")
    filters = _filters(topics, groups, transactional_ids, cluster, principal, resource_pattern_type, operation)
    wire = connect(bootstrap_server, command_config)
    try:
        response = wire.request(DELETE_ACLS, VERSION, messages.DeleteAclsRequest(
            filters=[messages.DeleteAclsRequest.DeleteAclsFilter(**f) for f in filters]))
    finally:
        wire.close()
    rows = []
    for result in response.filter_results:
        _check(result.error_code, "DeleteAcls", result.error_message)
        rows += [_rows(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                       m.permission_type) for m in result.matching_acls]
    _print(rows, as_json)
    if not as_json:
        click.echo(f"removed {plural(len(rows), 'ACL')}")
