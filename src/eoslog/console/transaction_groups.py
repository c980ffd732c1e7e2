"""The Spark sink's transaction groups (docs/spark.md, "Broker extension: transaction groups"): what a
user needs to tell whether a query's exactly-once output is progressing or stuck.

A group is listed with eoslog's private ListTransactionGroups (0x7E03, asked of every broker); a broker
whose ApiVersions lacks it (Kafka, an older eoslog) does not have the extension, and the page says so.
The members of the last commit come with the group; their state now (DescribeTransactions), and the
transactions of the next batch still open under the group's prefix (the sink's abort prefix, ``{group}-``;
ListTransactions of the Ongoing ones), come from the standard APIs. Everything is filtered by what the principal may describe.

:func:`progress` is the page's judgement, without I/O.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.tools import txn_cli
from eoslog.tools.brokers import TRANSACTION, Brokers
from eoslog.tools.common import check, plural

API_VERSIONS, LIST_TRANSACTION_GROUPS, DESCRIBE_TRANSACTIONS = 18, 0x7E03, 65
# A commit point is rolled forward in milliseconds (markers on each member's partitions); a group still
# PrepareCommit after this long has a member whose partitions cannot take their markers.
STUCK_COMMIT_MS = 10_000


@dataclass
class Member:
    """A transaction of the group's last commit: the identity it was committed under, and its state now
    (None: the principal may not describe it, or its transactional id has expired)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str | None = None


@dataclass
class OpenTransaction:
    """An Ongoing transaction under the group's prefix: a task of a batch not committed yet."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    duration_ms: int | None = None  # None when it could not be described
    partitions: list[str] = field(default_factory=list)
    hanging: bool = False


@dataclass
class Group:
    group_name: str
    state: str  # PrepareCommit or CompleteCommit
    decision_in_flight: bool
    last_committed_sequence: int
    last_commit_timestamp_ms: int
    members: list[Member]
    open: list[OpenTransaction] = field(default_factory=list)
    status: str = ""
    stuck: bool = False

    @property
    def prefix(self) -> str:
        return f"{self.group_name}-"

    @property
    def since_commit_ms(self) -> int | None:
        if self.last_commit_timestamp_ms < 0:
            return None
        return max(0, int(time.time() * 1000) - self.last_commit_timestamp_ms)


@dataclass
class Groups:
    supported: bool
    groups: list[Group]


def progress(group: Group, now_ms: int, hanging_after_ms: int) -> tuple[str, bool]:
    """(what the group is doing, whether it looks stuck) from its state and its open transactions."""
    if group.state == "PrepareCommit":
        if now_ms - group.last_commit_timestamp_ms > STUCK_COMMIT_MS:
            return (f"stuck committing batch {group.last_committed_sequence}: its commit point is logged, "
                    f"members are not all committed"), True
        return f"committing batch {group.last_committed_sequence}", False
    if group.decision_in_flight:
        return "a commit is being decided", False
    hanging = [t for t in group.open if t.hanging]
    if hanging:
        return f"{plural(len(hanging), 'transaction')} of the next batch open longer than the hanging threshold", True
    if group.open:
        return (f"writing the next batch ({plural(len(group.open), 'open transaction')}); "
                f"batch {group.last_committed_sequence} committed"), False
    return f"idle: batch {group.last_committed_sequence} committed, nothing open", False


def supported(brokers: Brokers) -> bool:
    """Whether the broker advertises ListTransactionGroups (the whole extension comes with it)."""
    response = brokers.call(API_VERSIONS, 0, messages.ApiVersionsRequest())
    return any(a.api_key == LIST_TRANSACTION_GROUPS for a in response.api_keys)


def _listed(brokers: Brokers) -> list[Group]:
    groups = {}
    for node_id, wire in brokers.each():
        response = wire.request(LIST_TRANSACTION_GROUPS, 0, messages.ListTransactionGroupsRequest(states_filter=[]))
        check(response.error_code, f"ListTransactionGroups at broker {node_id}")
        for g in response.groups:
            groups[g.group_name] = Group(g.group_name, g.state, g.decision_in_flight, g.last_committed_sequence,
                                         g.last_commit_timestamp_ms,
                                         [Member(m.transactional_id, m.producer_id, m.producer_epoch)
                                          for m in g.members])
    return [groups[name] for name in sorted(groups)]


def _judge(groups: list[Group], ongoing: list, hanging_ids: set[str], hanging_after_ms: int) -> None:
    """Fills each group's open transactions and status from a ListTransactions of the Ongoing ones."""
    now = int(time.time() * 1000)
    for group in groups:
        member_ids = {m.transactional_id for m in group.members}
        group.open = [OpenTransaction(t.transactional_id, t.producer_id, -1, hanging=t.transactional_id in hanging_ids)
                      for t in ongoing
                      if t.transactional_id.startswith(group.prefix) and t.transactional_id not in member_ids]
        group.status, group.stuck = progress(group, now, hanging_after_ms)


def transaction_groups(brokers: Brokers, hanging_after_ms: int) -> Groups:
    """Every group with its status: one ApiVersions, then per broker one ListTransactionGroups and two
    ListTransactions of Ongoing transactions (all, and those open longer than the threshold). Only open
    transactions are listed: the sink names each batch's transactions anew, so the completed ones pile
    up until transactional.id.expiration.ms (7 days by default) and a listing of all would grow with them."""
    if not supported(brokers):
        return Groups(False, [])
    groups = _listed(brokers)
    if groups:
        _judge(groups, txn_cli.list_transactions(brokers, ["Ongoing"]),
               {t.transactional_id for t in txn_cli.list_transactions(brokers, ["Ongoing"],
                                                                     min_duration_ms=hanging_after_ms)},
               hanging_after_ms)
    return Groups(True, groups)


def _describe(brokers: Brokers, coordinator_key: str, transactional_ids: list[str]) -> dict[str, object]:
    """DescribeTransactions of ids coordinated with ``coordinator_key`` (the sink makes its members so,
    spark/task_writer.py) in one request; ids its coordinator does not serve are asked of their own."""
    if not transactional_ids:
        return {}
    request = messages.DescribeTransactionsRequest(transactional_ids=transactional_ids)
    answered = brokers.coordinator(coordinator_key, TRANSACTION).request(DESCRIBE_TRANSACTIONS, 0, request)
    described = {d.transactional_id: d for d in answered.transaction_states}
    elsewhere = [t for t, d in described.items() if d.error_code == ErrorCode.NOT_COORDINATOR]
    for d in txn_cli.describe_transactions(brokers, elsewhere) if elsewhere else ():
        described[d.transactional_id] = d
    return {t: d for t, d in described.items() if not d.error_code}


def transaction_group(brokers: Brokers, group_name: str, hanging_after_ms: int) -> Groups:
    """One group (absent when unknown or not describable), its members and open transactions described."""
    if not supported(brokers):
        return Groups(False, [])
    groups = [g for g in _listed(brokers) if g.group_name == group_name]
    if not groups:
        return Groups(True, [])
    [group] = groups
    now = int(time.time() * 1000)
    # the open transactions under the group's prefix only (ListTransactions v2's transactional id pattern)
    _judge(groups, txn_cli.list_transactions(brokers, ["Ongoing"], pattern=re.escape(group.prefix) + ".*"), set(),
           hanging_after_ms)
    described = _describe(brokers, group_name, [m.transactional_id for m in group.members]
                          + [t.transactional_id for t in group.open])
    for member in group.members:
        d = described.get(member.transactional_id)
        member.state = d.transaction_state if d is not None else None
    for t in group.open:
        d = described.get(t.transactional_id)
        if d is None:
            continue
        t.producer_epoch = d.producer_epoch
        if d.transaction_start_time_ms >= 0:
            t.duration_ms = now - d.transaction_start_time_ms
            t.hanging = t.duration_ms > hanging_after_ms
        t.partitions = [f"{x.topic}-{p}" for x in d.topics for p in sorted(x.partitions)]
    group.open.sort(key=lambda t: (-(t.duration_ms or 0), t.transactional_id))
    group.status, group.stuck = progress(group, now, hanging_after_ms)
    return Groups(True, groups)
