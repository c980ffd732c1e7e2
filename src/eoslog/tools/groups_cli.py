"""`eoslog groups list` and `eoslog groups describe GROUP`: consumer groups as the broker sees them.

Talks to a running broker over the Kafka protocol (ListGroups, DescribeGroups, OffsetFetch,
ListOffsets) with eoslog's own codec, so it needs no client library. On a cluster (tools/brokers.py)
every broker lists the groups it coordinates, a group is described by its coordinator, and each
partition's last stable offset comes from its leader. Lag is measured to the last
stable offset (ListOffsets with read_committed): what a read_committed consumer can still read,
which for topics without transactions is the high watermark. The lead registers ``groups_group``
on the main CLI.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass, field

import click

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import codec, messages
from eoslog.protocol.errors import ErrorCode
from eoslog.tools.brokers import GROUP, Brokers, security_option
from eoslog.tools.common import plural, print_table

LIST_OFFSETS, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS = 2, 9, 15, 16
CONSUMER_GROUP_DESCRIBE = 69
LATEST = -1
READ_COMMITTED = 1


class GroupsToolError(click.ClickException):
    pass


def _check(code: int, what: str) -> None:
    if code:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        raise GroupsToolError(f"{what}: {name}")


# ---- the views ------------------------------------------------------------------------------------

@dataclass
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # or "consumer" (KIP-848)


@dataclass
class MemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: dict[str, list[int]]


@dataclass
class PartitionView:
    topic: str
    partition: int
    committed_offset: int  # -1: nothing committed
    last_stable_offset: int
    lag: int | None  # None when nothing is committed
    member_id: str | None
    metadata: str


@dataclass
class GroupView:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the classic group's chosen protocol, or a consumer group's server-side assignor
    members: list[MemberView] = field(default_factory=list)
    partitions: list[PartitionView] = field(default_factory=list)
    group_type: str = "classic"  # or "consumer" (KIP-848)


def _calls(conn: BrokerConnection | Brokers):
    """The request functions of every broker to ask (one for a plain connection)."""
    if isinstance(conn, Brokers):
        return [wire.request for _, wire in conn.each()]
    return [conn.request]


def list_groups(conn: BrokerConnection | Brokers) -> list[GroupListing]:
    groups = {}
    for call in _calls(conn):
        resp = call(LIST_GROUPS, 5, messages.ListGroupsRequest(states_filter=[], types_filter=[]))
        _check(resp.error_code, "ListGroups")
        for g in resp.groups:
            groups[g.group_id] = GroupListing(g.group_id, g.protocol_type, g.group_state, g.group_type)
    return [groups[g] for g in sorted(groups)]


def _decode_assignment(data: bytes) -> dict[str, list[int]]:
    if len(data) < 2:
        return {}
    version = struct.unpack_from(">h", data)[0]
    try:
        assignment = codec.decode_data("ConsumerProtocolAssignment", min(version, 3), memoryview(data)[2:])
    except ValueError:
        return {}
    return {tp.topic: sorted(tp.partitions) for tp in assignment.assigned_partitions}


def describe_group(conn: BrokerConnection | Brokers, group_id: str) -> GroupView:
    call = conn.coordinator(group_id, GROUP).request if isinstance(conn, Brokers) else conn.request
    resp = call(DESCRIBE_GROUPS, 5, messages.DescribeGroupsRequest(groups=[group_id]))
    [described] = resp.groups
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        view = _describe_consumer_group(call, group_id)  # DescribeGroups describes classic groups only
    else:
        _check(described.error_code, f"DescribeGroups {group_id}")
        view = GroupView(group_id, described.group_state, described.protocol_type, described.protocol_data)
        for m in described.members:
            assignment = _decode_assignment(bytes(m.member_assignment)) if view.protocol_type == "consumer" else {}
            view.members.append(MemberView(m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment))
    owner = {(topic, p): m.member_id for m in view.members for topic, ps in m.assignment.items() for p in ps}
    fetched = call(OFFSET_FETCH, 7, messages.OffsetFetchRequest(group_id=group_id, topics=None))
    _check(fetched.error_code, f"OffsetFetch {group_id}")
    committed = {(t.name, p.partition_index): (p.committed_offset, p.metadata or "")
                 for t in fetched.topics for p in t.partitions}
    tps = sorted(set(committed) | set(owner))
    stable = _last_stable_offsets(conn, tps)
    for tp in tps:
        offset, metadata = committed.get(tp, (-1, ""))
        lso = stable.get(tp, -1)
        lag = max(lso - offset, 0) if offset >= 0 and lso >= 0 else None
        view.partitions.append(PartitionView(tp[0], tp[1], offset, lso, lag, owner.get(tp), metadata))
    return view


def _describe_consumer_group(call, group_id: str) -> GroupView:
    resp = call(CONSUMER_GROUP_DESCRIBE, 0, messages.ConsumerGroupDescribeRequest(
        group_ids=[group_id], include_authorized_operations=False))
    [described] = resp.groups
    _check(described.error_code, f"ConsumerGroupDescribe {group_id}")
    view = GroupView(group_id, described.group_state, "consumer", described.assignor_name, group_type="consumer")
    for m in described.members:
        assignment = {tp.topic_name: sorted(tp.partitions) for tp in m.assignment.topic_partitions}
        view.members.append(MemberView(m.member_id, m.instance_id, m.client_id, m.client_host, assignment))
    return view


def _last_stable_offsets(conn: BrokerConnection | Brokers, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """ListOffsets(latest, read_committed), each partition asked of its leader on a cluster."""
    if not tps:
        return {}
    Topic, Partition = messages.ListOffsetsRequest.ListOffsetsTopic, messages.ListOffsetsRequest.ListOffsetsPartition
    by_call: dict = {}
    # One Metadata for every topic of the group, not one per partition (a 1,000-partition group's page)
    leaders = ({(t.name, p.partition_index): p.leader_id for t in conn.metadata(sorted({t for t, _ in tps})).topics
                if t.error_code == 0 for p in t.partitions} if isinstance(conn, Brokers) else None)
    for topic, p in tps:
        if leaders is None:
            call = conn.request
        elif leaders.get((topic, p), -1) < 0:
            continue  # no leader right now: shown without a last stable offset
        else:
            call = conn.node(leaders[(topic, p)]).request
        by_call.setdefault(call, {}).setdefault(topic, []).append(p)
    out = {}
    for call, by_topic in by_call.items():
        resp = call(LIST_OFFSETS, 2, messages.ListOffsetsRequest(
            replica_id=-1, isolation_level=READ_COMMITTED, topics=[
                Topic(name=topic, partitions=[Partition(partition_index=p, timestamp=LATEST) for p in ps])
                for topic, ps in by_topic.items()]))
        out.update({(t.name, p.partition_index): p.offset for t in resp.topics for p in t.partitions
                    if p.error_code == 0})
    return out


# ---- the commands ---------------------------------------------------------------------------------

_bootstrap_option = click.option("--bootstrap-server", "--bootstrap", "-b", "bootstrap_server",
                                 default="127.0.0.1:9092", show_default=True,
                                 help="HOST:PORT of the broker.")
_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


@click.group("groups")
def groups_group() -> None:
    """Consumer groups: members, assignments, committed offsets and lag."""


@groups_group.command("list")
@_bootstrap_option
@security_option
@_json_option
def list_command(bootstrap_server: str, security, as_json: bool) -> None:
    """Every group the broker coordinates, with its state."""
    with Brokers(bootstrap_server, security=security) as brokers:
        groups = list_groups(brokers)
    if as_json:
        click.echo(json.dumps([asdict(g) for g in groups]))
    elif groups:
        print_table([[g.group_id, g.protocol_type, g.state, g.group_type] for g in groups],
                    ["GROUP", "TYPE", "STATE", "GROUP-TYPE"])
    else:
        click.echo("none")


@groups_group.command("describe")
@click.argument("group_id")
@_bootstrap_option
@security_option
@_json_option
def describe_command(group_id: str, bootstrap_server: str, security, as_json: bool) -> None:
    """Members with their assignments, and per partition the committed offset and the lag to the
    last stable offset."""
    with Brokers(bootstrap_server, security=security) as brokers:
        view = describe_group(brokers, group_id)
    if view.state == "Dead" and not view.members and not view.partitions:
        # What DescribeGroups answers for a group id it does not know, as Kafka does; not a group to show
        raise click.ClickException(f"group {group_id} not found (eoslog groups list shows the groups)")
    if as_json:
        click.echo(json.dumps(asdict(view)))
        return
    click.echo(f"group {view.group_id} ({view.group_type}): {view.state}"
               + (f", protocol {view.protocol_type}/{view.protocol}" if view.protocol else "")
               + f", {plural(len(view.members), 'member')}")
    if view.members:
        click.echo("")
        print_table([[m.member_id, m.group_instance_id, m.client_id, m.client_host,
                      " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(m.assignment.items())) or None]
                     for m in view.members],
                    ["MEMBER", "INSTANCE", "CLIENT", "HOST", "ASSIGNMENT"])
    click.echo("")
    if view.partitions:
        print_table([[p.topic, p.partition, p.committed_offset if p.committed_offset >= 0 else None,
                      p.last_stable_offset, p.lag, p.member_id] for p in view.partitions],
                    ["TOPIC", "PARTITION", "COMMITTED", "LAST-STABLE", "LAG", "MEMBER"])
        total = sum(p.lag for p in view.partitions if p.lag is not None)
        click.echo(f"\ntotal lag: {total}")
    else:
        click.echo("no committed offsets")


def _register_reset_offsets() -> None:
    # Its own module (tools/reset_offsets.py), a subcommand here as in kafka-consumer-groups.sh.
    from eoslog.tools.reset_offsets import reset_offsets_command

    groups_group.add_command(reset_offsets_command)


_register_reset_offsets()
