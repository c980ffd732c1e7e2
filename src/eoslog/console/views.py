"""What each page shows, gathered with the admin tools' requests (``eoslog.tools``) over the Kafka
protocol. Every function here blocks on sockets: the app runs them in worker threads, one at a time per
:class:`Session`, since a :class:`Brokers` connection carries one request at a time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import click

from eoslog.console.authorization import or_not_authorized, refused
from eoslog.console.check_backs import CHECKING, CheckBack, CheckBacks, check_backs
from eoslog.console.records_view import RecordPage, mark_records
from eoslog.protocol import messages
from eoslog.records.batch import decode_batches
from eoslog.security.client import ClientSecurity
from eoslog.tools import admin_requests as admin
from eoslog.tools import groups_cli, leader_requests, txn_cli
from eoslog.tools.brokers import Brokers
from eoslog.tools.common import check
from eoslog.tools.hanging import hanging_transactions

FETCH, FETCH_VERSION = 1, 11  # the last Fetch version that names topics (12+ may use topic ids)
LIST_TRANSACTIONS, DESCRIBE_TRANSACTIONS = 66, 65
PAGE_MAX_BYTES = 1 << 20  # one page of the browser reads at most this much of a partition
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class Session:
    """The console's connections to the cluster: made on first use, dropped after a connection error so
    the next request reconnects (a broker restarted, a leader moved)."""

    def __init__(self, bootstrap: str, security: ClientSecurity | None = None, timeout: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.timeout = timeout
        self._brokers: Brokers | None = None
        self._lock = threading.Lock()

    def run(self, function, *args):
        with self._lock:
            if self._brokers is None:
                self._brokers = Brokers(self.bootstrap, self.timeout, self.security)
            try:
                return function(self._brokers, *args)
            except (OSError, ConnectionError, click.ClickException):
                # A refused request may have left a connection mid-response: start clean next time.
                self._brokers.close()
                self._brokers = None
                raise

    def close(self) -> None:
        with self._lock:
            if self._brokers is not None:
                self._brokers.close()
                self._brokers = None


# ---- overview and topics ----------------------------------------------------------------------------

@dataclass
class Overview:
    cluster_id: str | None
    controller_id: int
    brokers: list[tuple[int, str, int, str | None]]  # node id, host, port, rack
    topics: int
    partitions: int
    under_replicated: list[tuple[str, int]]
    offline: list[tuple[str, int]]


def overview(brokers: Brokers) -> Overview:
    metadata = brokers.metadata(refresh=True)
    views = admin.topics(brokers)
    partitions = [(v.name, p) for v in views for p in v.partitions]
    return Overview(metadata.cluster_id, metadata.controller_id,
                    sorted((b.node_id, b.host, b.port, b.rack) for b in metadata.brokers), len(views),
                    len(partitions),
                    [(t, p.partition) for t, p in partitions if p.leader >= 0 and len(p.isr) < len(p.replicas)],
                    [(t, p.partition) for t, p in partitions if p.leader < 0])


def records_written(brokers: Brokers) -> int:
    """The high watermarks of every non-internal partition, summed: sampled over time, records/s."""
    return sum(offsets(brokers, [v for v in admin.topics(brokers) if not v.internal], admin.LATEST).values())


@dataclass
class TopicRow:
    name: str
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    records: int | None  # high watermark minus log start, summed: records (and markers) kept


def topic_rows(brokers: Brokers) -> list[TopicRow]:
    topics = admin.topics(brokers)
    start = offsets(brokers, topics, admin.EARLIEST)
    high = offsets(brokers, topics, admin.LATEST)
    rows = []
    for v in topics:
        kept = [high[(v.name, p.partition)] - start[(v.name, p.partition)] for p in v.partitions
                if (v.name, p.partition) in high and (v.name, p.partition) in start]
        rows.append(TopicRow(v.name, v.internal, len(v.partitions), v.replication_factor,
                             sum(1 for p in v.partitions if len(p.isr) < len(p.replicas)),
                             sum(kept) if kept else None))
    return rows


def topic_detail(brokers: Brokers, name: str):
    """(TopicView with log start, high watermark and last stable offset per partition, every config entry
    with its source)."""
    [view] = admin.topics(brokers, [name])
    start = offsets(brokers, [view], admin.EARLIEST)
    high = offsets(brokers, [view], admin.LATEST)
    stable = offsets(brokers, [view], admin.LATEST, admin.READ_COMMITTED)
    for p in view.partitions:
        tp = (name, p.partition)
        p.log_start_offset, p.high_watermark, p.last_stable_offset = start.get(tp), high.get(tp), stable.get(tp)
    return view, or_not_authorized(f"describe the configs of topic {name}", admin.describe_configs, brokers,
                                   admin.TOPIC, name)


def offsets(brokers: Brokers, topics: list[admin.TopicView], timestamp: int,
            isolation_level: int = admin.READ_UNCOMMITTED) -> dict[tuple[str, int], int]:
    """ListOffsets, one request per leader named in ``topics`` (the leaders from the page's Metadata;
    tools/leader_requests.py). A partition its leader would not answer for is left out of this page."""
    leader_of = {(v.name, p.partition): p.leader for v in topics for p in v.partitions if p.leader >= 0}
    return leader_requests.list_offsets(brokers, sorted(leader_of), timestamp, isolation_level, leader_of)[0]


def producers(brokers: Brokers, topic: str, partition: int):
    """DescribeProducers at the partition's leader: the producers whose state the partition keeps."""
    brokers.leader(topic, partition)  # names a refusal (Metadata) where DescribeProducers would say unknown
    [result] = txn_cli.describe_producers(brokers, topic, [partition])
    check(result.error_code, f"DescribeProducers {topic}-{partition}")
    return sorted(result.active_producers, key=lambda p: (p.current_txn_start_offset < 0, p.producer_id))


# ---- the message browser ----------------------------------------------------------------------------

@dataclass
class BrowsePage:
    topic: str
    partition: int
    from_offset: int
    read_committed: bool
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    page: RecordPage = field(default_factory=RecordPage)


def _fetch(brokers: Brokers, topic: str, partition: int, offset: int, isolation_level: int):
    F = messages.FetchRequest
    request = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=PAGE_MAX_BYTES, isolation_level=isolation_level,
                session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                    partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                    partition_max_bytes=PAGE_MAX_BYTES)])])
    response = brokers.leader(topic, partition).request(FETCH, FETCH_VERSION, request)
    check(response.error_code, f"Fetch {topic}-{partition}")
    [data] = [p for t in response.responses for p in t.partitions if t.topic == topic]
    check(data.error_code, f"Fetch {topic}-{partition} at offset {offset}")
    return data


def browse(brokers: Brokers, topic: str, partition: int, from_offset: int, limit: int,
           read_committed: bool) -> BrowsePage:
    """One page from ``from_offset`` (clamped to the log), read from the leader with at most two Fetches:
    read_committed for the aborted transactions (a broker lists them only at that level), and for the
    read_uncommitted view a second one at that level for the records past the last stable offset."""
    tp = (topic, partition)
    brokers.leader(topic, partition)  # names a refusal (Metadata) where ListOffsets would say unknown
    start = admin.list_offsets(brokers, [tp], admin.EARLIEST)[tp]
    high = admin.list_offsets(brokers, [tp], admin.LATEST)[tp]
    offset = min(max(from_offset, start), high)
    view = BrowsePage(topic, partition, offset, read_committed, start, high, high)
    if offset >= high:
        return view
    committed = _fetch(brokers, topic, partition, offset, READ_COMMITTED)
    view.last_stable_offset = committed.last_stable_offset if committed.last_stable_offset >= 0 else high
    data = committed if read_committed else _fetch(brokers, topic, partition, offset, READ_UNCOMMITTED)
    aborted = [(a.producer_id, a.first_offset) for a in committed.aborted_transactions or ()]
    batches = decode_batches(bytes(data.records or b""))
    view.page = mark_records(batches, aborted, view.last_stable_offset, offset, limit, hide_aborted=read_committed)
    return view


def offset_for_timestamp(brokers: Brokers, topic: str, partition: int, timestamp_ms: int) -> int:
    """The first offset whose timestamp is at least ``timestamp_ms``; the log end when none is."""
    tp = (topic, partition)
    brokers.leader(topic, partition)  # as in browse: a refusal by name
    found = admin.list_offsets(brokers, [tp], timestamp_ms)[tp]
    return found if found >= 0 else admin.list_offsets(brokers, [tp], admin.LATEST)[tp]


# ---- groups ---------------------------------------------------------------------------------------

def groups(brokers: Brokers):
    return groups_cli.list_groups(brokers)


def group(brokers: Brokers, group_id: str):
    view = groups_cli.describe_group(brokers, group_id)
    return _describable_topics_only(brokers, view)


def _describable_topics_only(brokers: Brokers, view):
    """Members' assignments are the group's own bytes and name every topic they consume: the ones the
    principal may not describe (absent from Metadata, or refused there) are left out of the page, as
    OffsetFetch already leaves out their committed offsets."""
    topics = sorted({t for m in view.members for t in m.assignment} | {p.topic for p in view.partitions})
    if not topics:
        return view
    visible = {t.name for t in brokers.metadata(topics).topics if t.error_code == 0}
    for member in view.members:
        member.assignment = {t: ps for t, ps in member.assignment.items() if t in visible}
    view.partitions = [p for p in view.partitions if p.topic in visible]
    return view


# ---- transactions ---------------------------------------------------------------------------------

@dataclass
class TransactionRow:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    duration_ms: int | None  # how long the transaction has been open; None between transactions
    partitions: list[str]
    hanging: bool  # open longer than the console's --hanging-after-ms (never a Checking one: check_backs.py)
    check_back: CheckBack | None = None  # a check-back transaction's group, checks, abort reason


@dataclass
class Transactions:
    rows: list[TransactionRow]
    hanging_partitions: list[dict]  # entries as txn_cli.find_hanging makes them
    hanging_after_ms: int
    # partitions whose producers the principal may not describe (DescribeProducers needs Read on the topic)
    not_authorized: list[tuple[str, int]] = field(default_factory=list)
    check_backs: CheckBacks = field(default_factory=CheckBacks)


def described_transactions(brokers: Brokers) -> list:
    """DescribeTransactions of every transactional id, asked of each broker for the ids it lists: a
    broker lists the ids it coordinates, so one request describes them all (no FindCoordinator and
    request per id, which cost about 0.2 ms an id: the Spark sink names every batch's transactions anew)."""
    described = []
    for node_id, wire in brokers.each():
        listed = wire.request(LIST_TRANSACTIONS, 0, messages.ListTransactionsRequest(state_filters=[],
                                                                                 producer_id_filters=[]))
        check(listed.error_code, f"ListTransactions at broker {node_id}")
        ids = sorted(t.transactional_id for t in listed.transaction_states)
        if ids:
            request = messages.DescribeTransactionsRequest(transactional_ids=ids)
            described += wire.request(DESCRIBE_TRANSACTIONS, 0, request).transaction_states
    return described


def transactions(brokers: Brokers, hanging_after_ms: int) -> Transactions:
    now = int(time.time() * 1000)
    described = described_transactions(brokers)
    checks = check_backs(brokers)
    rows = []
    for d in described:
        if d.error_code:
            continue  # gone or not ours to describe since it was listed
        open_ = d.transaction_state in ("Ongoing", CHECKING) and d.transaction_start_time_ms >= 0
        duration = now - d.transaction_start_time_ms if open_ else None
        check_back = checks.by_id.get(d.transactional_id)
        # A check-back transaction's timeout hands it to its group, which decides: never hanging (check_backs.py)
        hanging = (d.transaction_state == "Ongoing" and duration is not None and duration > hanging_after_ms
                   and not (check_back is not None and check_back.undecided))
        rows.append(TransactionRow(d.transactional_id, d.transaction_state, d.producer_id, d.producer_epoch,
                                   d.transaction_timeout_ms, duration,
                                   [f"{t.topic}-{p}" for t in d.topics for p in sorted(t.partitions)],
                                   hanging, check_back))
    rows.sort(key=lambda r: (not r.hanging, r.duration_ms is None, -(r.duration_ms or 0), r.transactional_id))
    not_authorized: list[tuple[str, int]] = []
    return Transactions(rows, hanging_partitions(brokers, rows, hanging_after_ms, now, not_authorized),
                        hanging_after_ms, not_authorized, checks)


def hanging_partitions(brokers: Brokers, rows: list[TransactionRow], hanging_after_ms: int, now: int,
                       not_authorized: list | None = None) -> list[dict]:
    """``txn_cli.find_hanging``'s judgement (tools/hanging.py) with one DescribeProducers per leader and
    the transactions already described for the page (not a ListTransactions of their own): a page over
    1,000 partitions costs a request per broker. Partitions that could not be asked are left out; those
    refused for lack of rights are added to ``not_authorized``."""
    ongoing, checked = set(), set()  # checked: check-back transactions, open or Checking
    for r in rows:
        if r.state in ("Ongoing", CHECKING):
            check_back = r.state == CHECKING or r.check_back is not None and r.check_back.undecided
            for tp in r.partitions:
                topic, _, partition = tp.rpartition("-")
                (checked if check_back else ongoing).add((r.producer_id, topic, int(partition)))
    leader_of = leader_requests.leaders(brokers, include_internal=False)
    active, errors = leader_requests.describe_producers(brokers, sorted(leader_of), leader_of)
    if not_authorized is not None:
        not_authorized += refused(errors)
    # A check-back transaction's partitions are left out even when older than the threshold (find-hanging's
    # age rule): the page would offer an ABORT marker there, and its group may yet answer commit.
    return [h for h in hanging_transactions(active, ongoing | checked, hanging_after_ms, now)
            if (h["producer_id"], h["topic"], h["partition"]) not in checked]
