"""Check-back transactions on the transactions page (docs/transactions.md, "Check-back transactions"):
which check-back group decides each one, how many checks it has been asked (of the broker's maximum), when
the next is due, and why the broker aborted one.

The rows come from eoslog's ListCheckBacks, with the code `eoslog transactions list` uses
(``txn_cli.check_backs_by_broker``); like ListTransactions it leaves out the ids the principal may not
describe. A broker that does not serve it (Kafka, an older eoslog) has no check-back transactions: the page
says so. The maximum is each broker's ``eoslog.transaction.check.max.checks`` (DescribeConfigs), shown only
where the principal may describe the broker's configs.

A Checking transaction is open on purpose: the coordinator waits for its group's answer, found in the
producer's own database. So it is never *hanging*, and the page offers no abort for it: fencing it (or an
ABORT marker on its partitions) could discard records whose database row is already committed, which is
exactly what check-back exists to prevent. Its group decides, or the broker after the last check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import click

from eoslog.console.authorization import refusal
from eoslog.tools import admin_requests as admin
from eoslog.tools import txn_cli
from eoslog.tools.brokers import Brokers

MAX_CHECKS_CONFIG = "eoslog.transaction.check.max.checks"
CHECKING = "Checking"


@dataclass
class CheckBack:
    """What ListCheckBacks says of a transactional id whose current or last transaction is a check-back one."""

    group: str
    state: str
    producer_id: int
    producer_epoch: int
    check_count: int  # checks asked while Checking (the last count once decided); -1 before its timeout
    max_checks: int | None  # the coordinator's eoslog.transaction.check.max.checks; None if not describable
    next_check_ms: int  # when the next check is due (ms since the epoch), -1 if none
    abort_reason: str | None  # why the broker aborted it (max checks, rollback answer, fenced)

    @property
    def checking(self) -> bool:
        return self.state == CHECKING

    @property
    def undecided(self) -> bool:
        """Its outcome is its group's to decide (opened as check-back, or being checked)."""
        return self.state in ("Ongoing", CHECKING)


@dataclass
class CheckBacks:
    by_id: dict[str, CheckBack] = field(default_factory=dict)
    unsupported: list[int] = field(default_factory=list)  # brokers without ListCheckBacks
    brokers: int = 0  # brokers asked

    @property
    def supported(self) -> bool:
        return len(self.unsupported) < self.brokers


def check_backs(brokers: Brokers) -> CheckBacks:
    found = CheckBacks()
    for node_id, rows in txn_cli.check_backs_by_broker(brokers).items():
        found.brokers += 1
        if rows is None:
            found.unsupported.append(node_id)
            continue
        # The maximum matters only while checks are still being asked; one DescribeConfigs per such broker.
        max_checks = _max_checks(brokers, node_id) if any(r.state == CHECKING for r in rows) else None
        for r in rows:
            found.by_id[r.transactional_id] = CheckBack(r.check_back_group, r.state, r.producer_id, r.producer_epoch,
                                                        r.check_count, max_checks, r.next_check_timestamp_ms,
                                                        r.abort_reason)
    return found


def _max_checks(brokers: Brokers, node_id: int) -> int | None:
    """The broker's maximum number of checks; None when the principal may not describe its configs."""
    try:
        entries = admin.describe_configs(brokers, admin.BROKER, str(node_id))
    except click.ClickException as exc:
        if refusal(exc) is None:
            raise
        return None
    value = next((e.value for e in entries if e.name == MAX_CHECKS_CONFIG), None)
    return int(value) if value is not None and value.isdigit() else None
