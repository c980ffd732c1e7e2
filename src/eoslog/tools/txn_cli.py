"""`eoslog transactions ...` and `eoslog producers ...` (KIP-664 tools), as click groups the CLI registers.

    eoslog transactions list [--state Ongoing] [--producer-id N] [--min-duration-ms N] [--pattern RE]
    eoslog transactions describe TRANSACTIONAL_ID
    eoslog transactions find-hanging [--topic T] [--max-age-ms N]
    eoslog transactions abort TOPIC-PARTITION --start-offset N
    eoslog producers describe TOPIC-PARTITION

They speak the Kafka protocol (ListTransactions, DescribeTransactions, DescribeProducers,
WriteTxnMarkers, Metadata, FindCoordinator) over plain sockets, so they also work against Kafka; on a
cluster each request goes where Kafka serves it (tools/brokers.py): listings to every broker, a
transactional id to its coordinator, a partition to its leader.
Against eoslog, `list` and `describe` also show check-back transactions' checks (eoslog's ListCheckBacks,
asked only of brokers that advertise it; docs/transactions.md, "Check-back transactions").
A *hanging* transaction is one a partition holds open (it pins the last stable offset) that its
coordinator does not know as Ongoing over that partition, or that has been open longer than the
broker's transaction.max.timeout.ms: only an ABORT marker written to the partition ends it.
"""

from __future__ import annotations

import time

import click

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.tools import leader_requests
from eoslog.tools.brokers import TRANSACTION, Brokers, security_option
from eoslog.tools.common import emit_json, json_option, print_table
from eoslog.tools.hanging import hanging_transactions

__all__ = ["Brokers", "producers_group", "transactions_group"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_MAX_AGE_MS = 900_000  # transaction.max.timeout.ms: no legitimate transaction is older
API_VERSIONS, LIST_CHECK_BACKS = 18, 0x7E13


def parse_topic_partition(text: str) -> tuple[str, int]:
    topic, _, partition = text.rpartition("-")
    if not topic or not partition.isdigit():
        raise click.BadParameter(f"expected TOPIC-PARTITION, got {text!r}")
    return topic, int(partition)


def _check(code: int, what: str) -> None:
    if code != 0:
        raise click.ClickException(f"{what}: {ErrorCode(code).name}")


# ---- requests ---------------------------------------------------------------------------------------

def list_transactions(brokers: Brokers, states=(), producer_ids=(), min_duration_ms: int = -1, pattern=None):
    """Every broker lists the transactional ids it coordinates; the union, by transactional id."""
    request = messages.ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                               duration_filter=min_duration_ms, transactional_id_pattern=pattern)
    rows = {}
    for node_id, wire in brokers.each():
        response = wire.request(66, 2, request)
        _check(response.error_code, f"ListTransactions at broker {node_id}")
        for row in response.transaction_states:
            rows[row.transactional_id] = row
    return [rows[t] for t in sorted(rows)]


def list_check_backs(brokers: Brokers) -> dict:
    """transactional id -> eoslog's ListCheckBacks row, from every broker that serves that API."""
    return {row.transactional_id: row for rows in check_backs_by_broker(brokers).values() for row in rows or ()}


def check_backs_by_broker(brokers: Brokers) -> dict:
    """broker id -> its ListCheckBacks rows, or None where the broker does not serve that API (Kafka, an
    older eoslog: no check-back transactions there)."""
    by_broker = {}
    for node_id, wire in brokers.each():
        versions = wire.request(API_VERSIONS, 0, messages.ApiVersionsRequest())
        if not any(k.api_key == LIST_CHECK_BACKS for k in versions.api_keys):
            by_broker[node_id] = None
            continue
        response = wire.request(LIST_CHECK_BACKS, 0, messages.ListCheckBacksRequest(check_back_groups=[]))
        _check(response.error_code, f"ListCheckBacks at broker {node_id}")
        by_broker[node_id] = list(response.transactions)
    return by_broker


def describe_transactions(brokers: Brokers, transactional_ids):
    """Each id asked of its own coordinator."""
    out = []
    for transactional_id in transactional_ids:
        request = messages.DescribeTransactionsRequest(transactional_ids=[transactional_id])
        out += brokers.coordinator(transactional_id, TRANSACTION).request(65, 0, request).transaction_states
    return out


def describe_producers(brokers: Brokers, topic: str, partitions):
    """DescribeProducers answers for ``partitions`` of ``topic``, in that order, each with its own error
    code; one request per leader (tools/leader_requests.py)."""
    active, errors = leader_requests.describe_producers(brokers, [(topic, p) for p in partitions])
    Result = messages.DescribeProducersResponse.PartitionResponse
    return [Result(partition_index=p, error_code=int(errors.get((topic, p), 0)), error_message=None,
                   active_producers=active.get((topic, p), [])) for p in partitions]


def find_hanging(brokers: Brokers, topic: str | None, max_age_ms: int,
                 errors: dict[tuple[str, int], int] | None = None) -> list[dict]:
    """Open transactions on partitions whose coordinator does not have them Ongoing over that
    partition, or older than ``max_age_ms`` (tools/hanging.py). One Metadata, one DescribeProducers per
    leader, and for the open producers one ListTransactions per broker and a DescribeTransactions per
    transactional id. Partitions that could not be asked go to ``errors`` (partition -> error code)."""
    now = int(time.time() * 1000)
    leader_of = leader_requests.leaders(brokers, None if topic is None else [topic], include_internal=False)
    active, failed = leader_requests.describe_producers(brokers, sorted(leader_of), leader_of)
    if errors is not None:
        errors.update(failed)
    open_ids = sorted({p.producer_id for ps in active.values() for p in ps if p.current_txn_start_offset >= 0})
    ongoing, checking = set(), set()
    if open_ids:
        # Checking: an eoslog check-back transaction waiting for its producer group (docs/transactions.md) --
        # open on purpose, not hanging. A Kafka broker reports the state as unknown and lists the Ongoing.
        listed = list_transactions(brokers, ["Ongoing", "Checking"], open_ids)
        for d in describe_transactions(brokers, [t.transactional_id for t in listed]) if listed else []:
            if d.error_code == 0:  # listed as open; committing or aborting since then is not hanging
                held = {(d.producer_id, t.topic, p) for t in d.topics for p in t.partitions}
                ongoing |= held
                if d.transaction_state == "Checking":
                    checking |= held  # an ABORT marker here could contradict the group's commit
    return hanging_transactions(active, ongoing, max_age_ms, now, frozenset(checking))


def abort_transaction(brokers: Brokers, topic: str, partition: int, start_offset: int) -> None:
    """Writes an ABORT marker for the producer whose open transaction on the partition starts at
    ``start_offset`` (KIP-664's `kafka-transactions.sh abort`)."""
    producers = describe_producers(brokers, topic, [partition])[0]
    _check(producers.error_code, f"DescribeProducers {topic}-{partition}")
    match = [p for p in producers.active_producers if p.current_txn_start_offset == start_offset]
    if not match:
        raise click.ClickException(f"no open transaction starts at offset {start_offset} on {topic}-{partition}")
    producer = match[0]
    marker = messages.WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=producer.producer_id, producer_epoch=producer.producer_epoch, transaction_result=False,
        topics=[messages.WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
        coordinator_epoch=max(producer.coordinator_epoch, 0))
    response = brokers.leader(topic, partition).request(27, 1, messages.WriteTxnMarkersRequest(markers=[marker]))
    _check(response.markers[0].topics[0].partitions[0].error_code, f"WriteTxnMarkers {topic}-{partition}")


# ---- commands ---------------------------------------------------------------------------------------

bootstrap_option = click.option("--bootstrap-server", "--bootstrap", "-b", "bootstrap_server",
                                default=DEFAULT_BOOTSTRAP, show_default=True)


@click.group("transactions")
def transactions_group() -> None:
    """Inspect and repair transactions (KIP-664)."""


@transactions_group.command("list")
@bootstrap_option
@security_option
@click.option("--state", "states", multiple=True, help="Kafka state name, e.g. Ongoing (repeatable)")
@click.option("--producer-id", "producer_ids", multiple=True, type=int)
@click.option("--min-duration-ms", type=int, default=-1, help="only transactions open at least this long")
@click.option("--pattern", default=None, help="transactional id regular expression")
@json_option
def list_command(bootstrap_server, security, states, producer_ids, min_duration_ms, pattern, as_json) -> None:
    with Brokers(bootstrap_server, security=security) as brokers:
        rows = list_transactions(brokers, states, producer_ids, min_duration_ms, pattern)
        checks = list_check_backs(brokers) if rows else {}
    listed = [{"transactional_id": row.transactional_id, "producer_id": row.producer_id,
               "state": row.transaction_state, "checks": _checks(row, checks.get(row.transactional_id))}
              for row in rows]
    if as_json:
        emit_json(listed)
    elif not listed:
        click.echo("none")
    else:
        print_table([[t["transactional_id"], t["producer_id"], t["state"], t["checks"]] for t in listed],
                    ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "CHECKS"])


def _or_dash(value: int) -> str:
    return "-" if value < 0 else str(value)


def _checks(row, check) -> int | None:
    """The checks asked so far while the transaction is Checking; None (shown "-") otherwise: a check that
    decided a transaction resets its count, and a "0" there read as "never checked"."""
    if check is None or check.check_count < 0 or row.transaction_state != "Checking":
        return None
    return check.check_count


@transactions_group.command("describe")
@bootstrap_option
@security_option
@click.argument("transactional_id")
@json_option
def describe_command(bootstrap_server, security, transactional_id, as_json) -> None:
    with Brokers(bootstrap_server, security=security) as brokers:
        (found,) = describe_transactions(brokers, [transactional_id])
        check = list_check_backs(brokers).get(transactional_id) if found.error_code == 0 else None
    _check(found.error_code, f"DescribeTransactions {transactional_id}")
    if as_json:
        emit_json({"transactional_id": found.transactional_id, "state": found.transaction_state,
                   "producer_id": found.producer_id, "producer_epoch": found.producer_epoch,
                   "timeout_ms": found.transaction_timeout_ms, "start_time_ms": found.transaction_start_time_ms,
                   "partitions": [f"{t.topic}-{p}" for t in found.topics for p in t.partitions],
                   "check_back": None if check is None else {
                       "group": check.check_back_group,
                       "check_count": None if check.check_count < 0 else check.check_count,
                       "next_check_time_ms": None if check.next_check_timestamp_ms < 0 else check.next_check_timestamp_ms,
                       "abort_reason": check.abort_reason or None}})
        return
    partitions = ", ".join(f"{t.topic}-{p}" for t in found.topics for p in t.partitions) or "-"
    click.echo(f"TransactionalId: {found.transactional_id}\nState: {found.transaction_state}\n"
               f"ProducerId: {found.producer_id}\nProducerEpoch: {found.producer_epoch}\n"
               f"TimeoutMs: {found.transaction_timeout_ms}\nStartTimeMs: {found.transaction_start_time_ms}\n"
               f"Partitions: {partitions}")
    if check is not None:
        # -1: not Checking (no count, no next check), shown as "-" like every other empty field
        click.echo(f"CheckBackGroup: {check.check_back_group}\nCheckCount: {_or_dash(check.check_count)}\n"
                   f"NextCheckTimeMs: {_or_dash(check.next_check_timestamp_ms)}\n"
                   f"AbortReason: {check.abort_reason or '-'}")


@transactions_group.command("find-hanging")
@bootstrap_option
@security_option
@click.option("--topic", default=None)
@click.option("--max-age-ms", type=int, default=DEFAULT_MAX_AGE_MS, show_default=True)
@json_option
def find_hanging_command(bootstrap_server, security, topic, max_age_ms, as_json) -> None:
    errors: dict[tuple[str, int], int] = {}
    with Brokers(bootstrap_server, security=security) as brokers:
        rows = find_hanging(brokers, topic, max_age_ms, errors)
    for (name, partition), code in sorted(errors.items()):
        click.echo(f"could not ask {name}-{partition}: {ErrorCode(code).name}", err=True)
    if as_json:
        emit_json(rows)
    elif not rows:
        click.echo("none")
    else:
        print_table([[f"{row['topic']}-{row['partition']}", row["producer_id"], row["producer_epoch"],
                      row["start_offset"]] for row in rows], ["PARTITION", "PRODUCER-ID", "EPOCH", "START-OFFSET"])


@transactions_group.command("abort")
@bootstrap_option
@security_option
@click.argument("topic_partition")
@click.option("--start-offset", type=int, required=True, help="first offset of the hanging transaction")
@json_option
def abort_command(bootstrap_server, security, topic_partition, start_offset, as_json) -> None:
    topic, partition = parse_topic_partition(topic_partition)
    with Brokers(bootstrap_server, security=security) as brokers:
        abort_transaction(brokers, topic, partition, start_offset)
    if as_json:
        emit_json({"topic": topic, "partition": partition, "start_offset": start_offset, "aborted": True})
        return
    click.echo(f"aborted the transaction starting at {start_offset} on {topic}-{partition}")


@click.group("producers")
def producers_group() -> None:
    """Inspect producer state of partitions."""


@producers_group.command("describe")
@bootstrap_option
@security_option
@click.argument("topic_partition")
@json_option
def producers_describe_command(bootstrap_server, security, topic_partition, as_json) -> None:
    topic, partition = parse_topic_partition(topic_partition)
    with Brokers(bootstrap_server, security=security) as brokers:
        (result,) = describe_producers(brokers, topic, [partition])
    _check(result.error_code, f"DescribeProducers {topic_partition}")
    producers = [{"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                  "last_sequence": p.last_sequence, "last_timestamp": p.last_timestamp,
                  "coordinator_epoch": p.coordinator_epoch, "current_txn_start_offset": p.current_txn_start_offset}
                 for p in result.active_producers]
    if as_json:
        emit_json(producers)
    elif not producers:
        click.echo("none")
    else:
        print_table([list(p.values()) for p in producers],
                    ["PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "COORDINATOR-EPOCH",
                     "CURRENT-TXN-START-OFFSET"])
