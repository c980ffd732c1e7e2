"""`eoslog groups reset-offsets`: Kafka's kafka-consumer-groups.sh --reset-offsets.

    eoslog groups reset-offsets GROUP --topic orders --to-earliest              # a dry run: shows the plan
    eoslog groups reset-offsets GROUP --topic orders:0,1 --to-offset 500 --execute
    eoslog groups reset-offsets GROUP --all-topics --to-datetime 2026-11-25T08:00:00Z --execute

As in Kafka, nothing is committed without ``--execute``, and a group with active members is refused (they
would overwrite the new offsets with their own commits). Targets are kept within each partition's log
start offset and high watermark. ``plan`` is the arithmetic without I/O.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import click

from eoslog.protocol import messages
from eoslog.tools import admin_requests as admin
from eoslog.tools.brokers import GROUP, Brokers, security_option
from eoslog.tools.common import bootstrap_option, check, emit_json, json_option, print_table, progress

OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS = 8, 9, 15
INACTIVE = ("Empty", "Dead")

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Target:
    """What to reset to: kind is earliest, latest, datetime (value: ms), offset or shift (value: N)."""

    kind: str
    value: int = 0


@dataclass
class Reset:
    topic: str
    partition: int
    current_offset: int | None  # None: nothing committed
    new_offset: int


def plan(target: Target, current: dict[TopicPartition, int | None], log_start: dict[TopicPartition, int],
         high_watermark: dict[TopicPartition, int], by_time: dict[TopicPartition, int] | None = None) -> list[Reset]:
    """The new offset of each partition, within [log start, high watermark]. A datetime with no record
    that new resets to the high watermark; a shift of a partition with nothing committed starts from
    the log start (Kafka's rules)."""
    resets = []
    for tp in sorted(current):
        low, high = log_start[tp], high_watermark[tp]
        if target.kind == "earliest":
            offset = low
        elif target.kind == "latest":
            offset = high
        elif target.kind == "datetime":
            found = (by_time or {}).get(tp, -1)
            offset = high if found < 0 else found
        elif target.kind == "offset":
            offset = target.value
        elif target.kind == "shift":
            base = current[tp]
            offset = (low if base is None or base < 0 else base) + target.value
        else:
            raise ValueError(f"unknown reset target {target.kind!r}")
        resets.append(Reset(tp[0], tp[1], current[tp], min(max(offset, low), high)))
    return resets


def parse_datetime(text: str) -> int:
    """ISO 8601 to milliseconds since the epoch; a time without a zone is UTC."""
    try:
        moment = datetime.fromisoformat(text)  # 3.11 reads a trailing Z
    except ValueError as exc:
        raise click.BadParameter(f"expected ISO 8601 such as 2026-11-25T08:00:00Z, got {text!r}",
                                 param_hint="--to-datetime") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def parse_topic_spec(text: str) -> tuple[str, list[int] | None]:
    """``T`` (every partition) or ``T:0,1,2``."""
    topic, sep, partitions = text.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in partitions.split(",") if p.strip()})
    except ValueError:
        raise click.BadParameter(f"expected TOPIC or TOPIC:P[,P...], got {text!r}", param_hint="--topic") from None


def _group_state(call, group_id: str) -> str:
    [described] = call(DESCRIBE_GROUPS, 5, messages.DescribeGroupsRequest(groups=[group_id])).groups
    check(described.error_code, f"DescribeGroups {group_id}")
    return described.group_state


def _committed(call, group_id: str) -> dict[TopicPartition, int]:
    fetched = call(OFFSET_FETCH, 7, messages.OffsetFetchRequest(group_id=group_id, topics=None))
    check(fetched.error_code, f"OffsetFetch {group_id}")
    return {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions
            if p.committed_offset >= 0}


def _commit(call, group_id: str, resets: list[Reset]) -> None:
    Topic, Partition = messages.OffsetCommitRequest.OffsetCommitRequestTopic, messages.OffsetCommitRequest.OffsetCommitRequestPartition
    by_topic: dict[str, list[Reset]] = {}
    for r in resets:
        by_topic.setdefault(r.topic, []).append(r)
    # generation -1 and no member id: a commit from outside the group, which Kafka takes only while
    # the group is empty (the refusal above makes sure of that).
    request = messages.OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        retention_time_ms=-1, topics=[Topic(name=t, partitions=[
            Partition(partition_index=r.partition, committed_offset=r.new_offset, committed_leader_epoch=-1,
                      committed_metadata="") for r in rs]) for t, rs in by_topic.items()])
    for t in call(OFFSET_COMMIT, 7, request).topics:
        for p in t.partitions:
            check(p.error_code, f"OffsetCommit {group_id} {t.name}-{p.partition_index}")


def reset_offsets(brokers: Brokers, group_id: str, target: Target, topic_specs: list[str], all_topics: bool,
                  execute: bool, show_progress: bool = True) -> list[Reset]:
    """The new offsets (committed with ``execute``); ``show_progress``: a bar on a terminal's stderr (the
    command's, not the web console's)."""
    call = brokers.coordinator(group_id, GROUP).request
    state = _group_state(call, group_id)
    if state not in INACTIVE:
        raise click.ClickException(f"group {group_id} is {state}: offsets can be reset only while it has no "
                                   "active members (stop its consumers first)")
    committed = _committed(call, group_id)
    if all_topics:
        names = sorted({t for t, _ in committed})
        if not names:
            raise click.ClickException(f"group {group_id} has no committed offsets; name the topics with --topic")
        specs = [(name, None) for name in names]
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
    low = admin.list_offsets(brokers, tps, admin.EARLIEST)
    high = admin.list_offsets(brokers, tps, admin.LATEST)
    by_time = admin.list_offsets(brokers, tps, target.value) if target.kind == "datetime" else None
    resets = plan(target, {tp: committed.get(tp) for tp in tps}, low, high, by_time)
    if execute:
        bar, task = progress(len(resets) if show_progress else 1, f"resetting {group_id}")  # 1: no bar
        with bar:
            for start in range(0, len(resets), 500):  # one request per 500 partitions: progress on a big group
                _commit(call, group_id, resets[start:start + 500])
                bar.advance(task, len(resets[start:start + 500]))
    return resets


def _target_options(command):
    for option in reversed([
        click.option("--to-earliest", "kind", flag_value="earliest", help="The log start offset."),
        click.option("--to-latest", "kind", flag_value="latest", help="The high watermark."),
        click.option("--to-datetime", default=None, metavar="ISO", help="The first offset at or after this time."),
        click.option("--to-offset", type=int, default=None, help="This offset (kept within the log)."),
        click.option("--shift-by", type=int, default=None, help="The committed offset plus N (N may be negative)."),
    ]):
        command = option(command)
    return command


@click.command("reset-offsets")
@click.argument("group_id")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,...]", help="Repeatable.")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@_target_options
@click.option("--dry-run", "execute", flag_value=False, default=False, help="Show the new offsets (the default).")
@click.option("--execute", "execute", flag_value=True, help="Commit the new offsets.")
@bootstrap_option
@security_option
@json_option
def reset_offsets_command(group_id, topics, all_topics, kind, to_datetime, to_offset, shift_by, execute, bootstrap,
                          security, as_json) -> None:
    """Reset GROUP's committed offsets (a dry run unless --execute)."""
    chosen = [t for t in (kind and Target(kind), to_datetime and Target("datetime", parse_datetime(to_datetime)),
                          to_offset is not None and Target("offset", to_offset),
                          shift_by is not None and Target("shift", shift_by)) if t]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    with Brokers(bootstrap, security=security) as brokers:
        resets = reset_offsets(brokers, group_id, chosen[0], list(topics), all_topics, execute)
    if as_json:
        emit_json({"group": group_id, "executed": execute, "partitions": [asdict(r) for r in resets]})
        return
    print_table([[group_id, r.topic, r.partition, r.current_offset, r.new_offset] for r in resets],
                ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"])
    click.echo(f"\ncommitted {len(resets)} new offsets" if execute else "\ndry run: nothing committed (add --execute)")
