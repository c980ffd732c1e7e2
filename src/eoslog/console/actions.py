"""The console's write actions, offered only with ``--allow-writes``.

Aborting a transaction its coordinator knows is done as Kafka's ``kafka-transactions.sh force-terminate``
does it: an InitProducerId for that transactional id, which fences the producer (bumps its epoch) and has
the coordinator abort the open transaction, writing ABORT markers to every partition in it. A transaction
that only a partition still holds open (its coordinator lost it) is ended by writing the ABORT marker to
that partition directly (``txn_cli.abort_transaction``, KIP-664).

A check-back transaction still undecided (Ongoing or Checking) is not aborted: its check-back group
decides it (console/check_backs.py).

Resetting a group's offsets and deleting records are the commands' own code (``eoslog groups
reset-offsets``, ``eoslog records delete-before``), so the console refuses what they refuse: a group with
active members keeps its offsets, and a broker's refusal is reported, never retried.
"""

from __future__ import annotations

import click

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.tools import admin_requests as admin
from eoslog.tools import txn_cli
from eoslog.tools.brokers import TRANSACTION, Brokers
from eoslog.tools.common import check
from eoslog.tools.reset_offsets import Reset, Target
from eoslog.tools.reset_offsets import reset_offsets as reset_group_offsets

INIT_PRODUCER_ID = 22


def abort_transaction(brokers: Brokers, transactional_id: str) -> None:
    """Fences ``transactional_id`` and lets its coordinator abort the open transaction. Kafka's coordinator
    answers CONCURRENT_TRANSACTIONS while its abort is under way: that answer means the abort started, so
    the request is not repeated. eoslog's waits for the local abort and answers with the next epoch (the
    transactional id is then Empty, its old producer fenced)."""
    [described] = txn_cli.describe_transactions(brokers, [transactional_id])
    check(described.error_code, f"DescribeTransactions {transactional_id}")
    # The page offers no Abort for a check-back transaction (console/check_backs.py says why); a form
    # posted by hand is refused the same way.
    check_back = txn_cli.list_check_backs(brokers).get(transactional_id)
    if check_back is not None and check_back.state in ("Ongoing", "Checking"):
        raise click.ClickException(f"{transactional_id} is a check-back transaction ({check_back.state}): its group "
                                   f"{check_back.check_back_group} decides it, from the producer's database")
    request = messages.InitProducerIdRequest(transactional_id=transactional_id,
                                             transaction_timeout_ms=described.transaction_timeout_ms,
                                             producer_id=-1, producer_epoch=-1)
    response = brokers.coordinator(transactional_id, TRANSACTION).request(INIT_PRODUCER_ID, 3, request)
    if response.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
        check(response.error_code, f"aborting {transactional_id}")


def abort_partition_transaction(brokers: Brokers, topic: str, partition: int, start_offset: int) -> None:
    txn_cli.abort_transaction(brokers, topic, partition, start_offset)


def reset_offsets(brokers: Brokers, group_id: str, target: Target, topic: str | None) -> list[Reset]:
    """Commits the group's new offsets in ``topic`` (None: every topic it has offsets in); refused
    (ClickException) while the group has active members."""
    return reset_group_offsets(brokers, group_id, target, [topic] if topic else [], all_topics=topic is None,
                               execute=True, show_progress=False)


def delete_records(brokers: Brokers, topic: str, partition: int, before_offset: int) -> int:
    """DeleteRecords at the partition's leader: the new log start offset, or the broker's refusal."""
    [(log_start, error)] = admin.delete_records(brokers, {(topic, partition): before_offset}).values()
    if error:
        raise click.ClickException(f"DeleteRecords {topic}-{partition} before offset {before_offset}: {error}")
    return log_start
