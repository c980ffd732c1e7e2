"""`eoslog share-groups list|describe|reset-offsets|delete`: share groups (KIP-932), after Kafka's
kafka-share-groups.sh.

    eoslog share-groups list
    eoslog share-groups describe orders-workers                  # members, and start offset and lag per partition
    eoslog share-groups reset-offsets orders-workers --topic orders --to-earliest           # a dry run
    eoslog share-groups reset-offsets orders-workers --topic orders:0 --to-offset 500 --execute
    eoslog share-groups delete orders-workers                    # the group (it must have no members)
    eoslog share-groups delete orders-workers --topic orders     # only its share state of a topic

Over the Kafka protocol, as the other tools: ListGroups (type "share") on every broker,
ShareGroupDescribe and DescribeShareGroupOffsets (v1, with the lag) from the group's coordinator,
AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups to it. As in Kafka, reset-offsets is a
dry run unless ``--execute``, and both it and delete need a group without members (the broker refuses
them otherwise: NON_EMPTY_GROUP).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import click

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.tools import admin_requests as admin
from eoslog.tools.brokers import GROUP, Brokers, security_option
from eoslog.tools.common import bootstrap_option, check, emit_json, json_option, plural, print_table
from eoslog.tools.reset_offsets import Target, parse_topic_spec, plan

LIST_GROUPS, DELETE_GROUPS, SHARE_GROUP_DESCRIBE = 16, 42, 77
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
INACTIVE = ("Empty", "Dead")

TopicPartition = tuple[str, int]


@dataclass
class ShareMemberView:
    member_id: str
    client_id: str
    client_host: str
    assignment: dict[str, list[int]]


@dataclass
class SharePartitionView:
    topic: str
    partition: int
    start_offset: int  # -1: no state
    lag: int  # -1: unknown


@dataclass
class ShareGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: list[ShareMemberView] = field(default_factory=list)
    partitions: list[SharePartitionView] = field(default_factory=list)


@dataclass
class ShareReset:
    topic: str
    partition: int
    current_start_offset: int | None  # None: no state
    new_start_offset: int


def list_share_groups(brokers: Brokers) -> list[tuple[str, str]]:
    """(group id, state) of every share group, each broker answering for the groups it coordinates."""
    groups = {}
    for _, wire in brokers.each():
        answer = wire.request(LIST_GROUPS, 5, messages.ListGroupsRequest(states_filter=[], types_filter=["share"]))
        check(answer.error_code, "ListGroups")
        groups.update({g.group_id: g.group_state for g in answer.groups})
    return sorted(groups.items())


def describe_share_group(brokers: Brokers, group_id: str) -> ShareGroupView:
    call = brokers.coordinator(group_id, GROUP).request
    answer = call(SHARE_GROUP_DESCRIBE, 1, messages.ShareGroupDescribeRequest(
        group_ids=[group_id], include_authorized_operations=False))
    [described] = answer.groups
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        raise click.ClickException(f"share group {group_id} not found (eoslog share-groups list shows them)")
    check(described.error_code, f"ShareGroupDescribe {group_id}", described.error_message)
    view = ShareGroupView(group_id, described.group_state, described.group_epoch, described.assignment_epoch)
    for m in described.members:
        view.members.append(ShareMemberView(m.member_id, m.client_id, m.client_host, {
            tp.topic_name: sorted(tp.partitions) for tp in m.assignment.topic_partitions}))
    starts = start_offsets(call, group_id)
    view.partitions = [SharePartitionView(t, p, start, lag) for (t, p), (start, lag) in sorted(starts.items())]
    return view


def start_offsets(call, group_id: str, topics: dict[str, list[int]] | None = None) -> dict[TopicPartition, tuple]:
    """(start offset, lag) per share partition: the group's (``topics`` None) or those asked."""
    request = messages.DescribeShareGroupOffsetsRequest
    asked = None if topics is None else [request.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
                                         for t, ps in topics.items()]
    answer = call(DESCRIBE_OFFSETS, 1, request(groups=[
        request.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=asked)]))
    [described] = answer.groups
    check(described.error_code, f"DescribeShareGroupOffsets {group_id}", described.error_message)
    out = {}
    for t in described.topics:
        for p in t.partitions:
            check(p.error_code, f"DescribeShareGroupOffsets {group_id} {t.topic_name}-{p.partition_index}",
                  p.error_message)
            out[(t.topic_name, p.partition_index)] = (p.start_offset, p.lag)
    return out


def reset_share_offsets(brokers: Brokers, group_id: str, target: Target, topic_specs: list[str], all_topics: bool,
                        execute: bool) -> list[ShareReset]:
    """The new start offsets, set with ``execute`` (the group must have no members)."""
    call = brokers.coordinator(group_id, GROUP).request
    [described] = call(SHARE_GROUP_DESCRIBE, 1, messages.ShareGroupDescribeRequest(
        group_ids=[group_id], include_authorized_operations=False)).groups
    if described.error_code == 0 and described.group_state not in INACTIVE:
        raise click.ClickException(f"share group {group_id} is {described.group_state}: its start offsets can be "
                                   "reset only while it has no members (stop its share consumers first)")
    if described.error_code not in (0, ErrorCode.GROUP_ID_NOT_FOUND):
        check(described.error_code, f"ShareGroupDescribe {group_id}", described.error_message)
    if all_topics:
        held = start_offsets(call, group_id)
        if not held:
            raise click.ClickException(f"share group {group_id} has no share state; name the topics with --topic")
        specs = [(name, None) for name in sorted({t for t, _ in held})]
    else:
        specs = [parse_topic_spec(s) for s in topic_specs]
    views = {v.name: v for v in admin.topics(brokers, sorted({t for t, _ in specs}))}
    tps = []
    for topic, partitions in specs:
        existing = {p.partition for p in views[topic].partitions}
        missing = sorted(set(partitions or ()) - existing)
        if missing:
            raise click.ClickException(f"topic {topic} has no partition {', '.join(map(str, missing))}")
        tps += [(topic, p) for p in (partitions or sorted(existing))]
    by_topic: dict[str, list[int]] = {}
    for topic, p in tps:
        by_topic.setdefault(topic, []).append(p)
    current = {tp: start for tp, (start, _) in start_offsets(call, group_id, by_topic).items() if start >= 0}
    low = admin.list_offsets(brokers, tps, admin.EARLIEST)
    high = admin.list_offsets(brokers, tps, admin.LATEST)
    resets = [ShareReset(r.topic, r.partition, current.get((r.topic, r.partition)), r.new_offset)
              for r in plan(target, {tp: current.get(tp) for tp in tps}, low, high)]
    if execute:
        _alter(call, group_id, resets)
    return resets


def _alter(call, group_id: str, resets: list[ShareReset]) -> None:
    request = messages.AlterShareGroupOffsetsRequest
    by_topic: dict[str, list] = {}
    for r in resets:
        by_topic.setdefault(r.topic, []).append(request.AlterShareGroupOffsetsRequestPartition(
            partition_index=r.partition, start_offset=r.new_start_offset))
    answer = call(ALTER_OFFSETS, 0, request(group_id=group_id, topics=[
        request.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()]))
    check(answer.error_code, f"AlterShareGroupOffsets {group_id}", answer.error_message)
    for t in answer.responses:
        for p in t.partitions:
            check(p.error_code, f"AlterShareGroupOffsets {group_id} {t.topic_name}-{p.partition_index}",
                  p.error_message)


def delete_share_group(brokers: Brokers, group_id: str, topics: list[str]) -> list[str]:
    """DeleteGroups of the whole group, or DeleteShareGroupOffsets of ``topics``; what was deleted."""
    call = brokers.coordinator(group_id, GROUP).request
    if not topics:
        [result] = call(DELETE_GROUPS, 2, messages.DeleteGroupsRequest(groups_names=[group_id])).results
        if result.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            raise click.ClickException(f"share group {group_id} not found (eoslog share-groups list shows them)")
        check(result.error_code, f"DeleteGroups {group_id}")
        return [group_id]
    request = messages.DeleteShareGroupOffsetsRequest
    answer = call(DELETE_OFFSETS, 0, request(group_id=group_id, topics=[
        request.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]))
    if answer.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        raise click.ClickException(f"share group {group_id} not found (eoslog share-groups list shows them)")
    check(answer.error_code, f"DeleteShareGroupOffsets {group_id}", answer.error_message)
    for t in answer.responses:
        check(t.error_code, f"DeleteShareGroupOffsets {group_id} {t.topic_name}", t.error_message)
    return [t.topic_name for t in answer.responses]


# ---- the commands ---------------------------------------------------------------------------------

@click.group("share-groups")
def share_groups_group() -> None:
    """Share groups (KIP-932): members, start offsets and lag; reset and delete."""


@share_groups_group.command("list")
@bootstrap_option
@security_option
@json_option
def list_command(bootstrap: str, security, as_json: bool) -> None:
    """Every share group, with its state."""
    with Brokers(bootstrap, security=security) as brokers:
        groups = list_share_groups(brokers)
    if as_json:
        emit_json([{"group_id": g, "state": s} for g, s in groups])
    elif groups:
        print_table([[g, s] for g, s in groups], ["GROUP", "STATE"])
    else:
        click.echo("none")


@share_groups_group.command("describe")
@click.argument("group_id")
@bootstrap_option
@security_option
@json_option
def describe_command(group_id: str, bootstrap: str, security, as_json: bool) -> None:
    """Members with their assignments, and per share partition its start offset and lag."""
    with Brokers(bootstrap, security=security) as brokers:
        view = describe_share_group(brokers, group_id)
    if as_json:
        emit_json(asdict(view))
        return
    click.echo(f"share group {view.group_id}: {view.state}, group epoch {view.group_epoch}, "
               f"{plural(len(view.members), 'member')}")
    if view.members:
        click.echo("")
        print_table([[m.member_id, m.client_id, m.client_host,
                      " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(m.assignment.items())) or None]
                     for m in view.members], ["MEMBER", "CLIENT", "HOST", "ASSIGNMENT"])
    click.echo("")
    if view.partitions:
        print_table([[p.topic, p.partition, p.start_offset if p.start_offset >= 0 else None,
                      p.lag if p.lag >= 0 else None] for p in view.partitions],
                    ["TOPIC", "PARTITION", "START-OFFSET", "LAG"])
        click.echo(f"\ntotal lag: {sum(p.lag for p in view.partitions if p.lag >= 0)}")
    else:
        click.echo("no share state")


@share_groups_group.command("reset-offsets")
@click.argument("group_id")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,...]", help="Repeatable.")
@click.option("--all-topics", is_flag=True, help="Every topic the group has share state of.")
@click.option("--to-earliest", "kind", flag_value="earliest", help="The log start offset.")
@click.option("--to-latest", "kind", flag_value="latest", help="The high watermark.")
@click.option("--to-offset", type=int, default=None, help="This offset (kept within the log).")
@click.option("--dry-run", "execute", flag_value=False, default=False, help="Show the new start offsets (the default).")
@click.option("--execute", "execute", flag_value=True, help="Set the new start offsets.")
@bootstrap_option
@security_option
@json_option
def reset_offsets_command(group_id, topics, all_topics, kind, to_offset, execute, bootstrap, security, as_json) -> None:
    """Reset GROUP's share-partition start offsets (a dry run unless --execute)."""
    chosen = [t for t in (kind and Target(kind), to_offset is not None and Target("offset", to_offset)) if t]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-offset")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    with Brokers(bootstrap, security=security) as brokers:
        resets = reset_share_offsets(brokers, group_id, chosen[0], list(topics), all_topics, execute)
    if as_json:
        emit_json({"group": group_id, "executed": execute, "partitions": [asdict(r) for r in resets]})
        return
    print_table([[group_id, r.topic, r.partition, r.current_start_offset, r.new_start_offset] for r in resets],
                ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "NEW-START-OFFSET"])
    click.echo(f"\nset {plural(len(resets), 'start offset')}" if execute
               else "\ndry run: nothing changed (add --execute)")


@share_groups_group.command("delete")
@click.argument("group_id")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC",
              help="Delete only the group's share state of this topic (repeatable).")
@bootstrap_option
@security_option
@json_option
def delete_command(group_id: str, topics, bootstrap: str, security, as_json: bool) -> None:
    """Delete GROUP (it must have no members), or with --topic only its share state of those topics."""
    with Brokers(bootstrap, security=security) as brokers:
        deleted = delete_share_group(brokers, group_id, list(topics))
    if as_json:
        emit_json({"group": group_id, "topics": list(topics) or None, "deleted": deleted})
    elif topics:
        click.echo(f"deleted the share state of {group_id} for {', '.join(deleted)}")
    else:
        click.echo(f"deleted share group {group_id}")
