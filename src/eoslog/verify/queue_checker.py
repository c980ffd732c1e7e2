"""The queue checker: judges a share-group history (queue_workload.py writes it) and returns a Report in
the exactly-once checker's style. Pure: no I/O besides reading the history file when given a path.

The history (docs/verification.md, "The queue workload"), one JSON object per line, as history.py writes
them (``index``, ``time``, ``process``, ``type``, ``f``, ``value``):

- ``config`` (ok): ``{"delivery_count_limit": 5, "partitions": 4}``.
- ``produce``: ``invoke`` ``[partition, value]`` before the record is handed to the client, then ``ok``
  ``[partition, value, offset]`` (acknowledged) or ``info`` ``[partition, value]`` (an error); a record
  that has no ``ok`` may or may not be in the log.
- ``deliver`` (ok): ``[[partition, offset, value, delivery count], ...]``, what one poll returned.
- ``ack``: ``invoke`` ``[[partition, offset, value, delivery count, "accept"|"release"|"reject"], ...]``,
  then the same process's completion ``ok`` ``{"partition": "ok"|"fail"|"info", ...}`` per partition
  (``fail``: the broker refused them, nothing changed; ``info``: unknown). An invoke left without a
  completion (a crash, a second invoke, the end of the history) is ``info`` for every partition.
- ``final`` (ok): ``{"partition": [start offset, end offset], ...}`` once the final drain stopped: the
  share group's start offset and the partition's high watermark; ``complete`` when every start offset
  reached its end offset (the broker says every record is done).
- ``crash`` (info): the worker process died.

Transactional mode (queue_workload.py's ``txn-consumer`` workers; queue_txn_checker.py judges it):

- ``txn``: ``invoke`` ``{"id": n, "records": [[partition, offset, value, delivery count], ...]}`` before the
  worker writes one output per record and acknowledges them all (ACCEPT) in transaction ``n`` of its
  process, then the same process's completion: ``ok`` (EndTxn(commit) answered NONE), ``fail`` (aborted:
  EndTxn(abort) answered NONE; ``{"acknowledged": true}`` when every ACCEPT was held by the transaction), or
  ``info`` (unknown; ``{"end": "commit"|"abort"}``, what the worker asked for). A crash leaves it unknown.
- ``outputs`` (runner, ok): ``{"complete": true, "records": [[partition, offset, input partition, input
  offset, input value, process, transaction id], ...]}``, the output topic read with read_committed once
  every transaction ended; ``complete`` when the read reached the end offset of every partition.

A record is (partition, offset). Delivery counts are exact (eoslog persists acquisitions), so each
acquisition of a record has a count of its own, 1, 2, ... A definite ACCEPT or REJECT of the delivery
with count c means the member held the record then, so any delivery with a count above c came after it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eoslog.verify.checker import Report
from eoslog.verify.history import Event
from eoslog.verify.queue_txn_checker import TXN_ANOMALIES, Output, Txn, judge_transactions

ANOMALIES: dict[str, str] = {
    "lost": "an acknowledged record never accepted, rejected nor archived, though the share group is done with it",
    "accepted-twice": "two ACCEPTs of one record both succeeded",
    "redelivered-after-accept": "a record delivered again after an ACCEPT of it succeeded",
    "redelivered-after-reject": "a record delivered again after a REJECT of it succeeded",
    "delivery-limit": "a record delivered more times than group.share.delivery.count.limit",
    "release-not-redelivered": "a record released below the limit that never came back, though the share group is done with it",
    "repeated-delivery-count": "one record delivered twice with the same delivery count (one acquisition handed out twice)",
    "unwritten-delivery": "a delivered value that no producer sent",
    "inconsistent-offset": "one offset delivered with a value other than the one acknowledged there, or with two values",
    **TXN_ANOMALIES,
}
ACK_KINDS = ("accept", "release", "reject")
STATUSES = ("ok", "fail", "info")
EXAMPLES = 5

_Record = tuple[int, int]  # (partition, offset)


class QueueHistoryError(ValueError):
    """A history line that does not follow the queue format (the recorder's fault, not the broker's)."""


@dataclass(frozen=True, slots=True)
class Ack:
    process: Any
    index: int
    record: _Record
    value: Any
    count: int
    kind: str
    status: str  # ok, fail or info
    txn: bool = False  # an ACCEPT (or an abort's implied RELEASE) of a transaction, not a member's own


@dataclass(frozen=True, slots=True)
class Delivery:
    process: Any
    index: int
    record: _Record
    value: Any
    count: int


@dataclass
class QueueHistory:
    limit: int = 5
    produced: dict[_Record, Any] = None  # acknowledged produces: record -> value
    maybe_produced: set[tuple[int, Any]] = None  # (partition, value) of every produce tried
    deliveries: list[Delivery] = None
    acks: list[Ack] = None
    final: dict[int, tuple[int, int]] | None = None  # partition -> (start offset, end offset)
    processes: set = None
    events: int = 0
    txns: dict = None  # (process, id) -> queue_txn_checker.Txn
    outputs: list | None = None  # the final read_committed read of the output topic, or None
    outputs_complete: bool = False


def parse(events: Iterable[Event | dict]) -> QueueHistory:
    """Events (or decoded JSON lines) -> the deliveries and acknowledgements, acks paired per process."""
    history = QueueHistory(5, {}, set(), [], [], None, set(), 0, {}, None, False)
    pending: dict[Any, tuple[int, list]] = {}  # process -> (invoke index, entries)
    open_txns: dict[Any, Any] = {}  # process -> its transaction without a completion yet

    def settle(process: Any, statuses: dict) -> None:
        index, entries = pending.pop(process)
        for entry in entries:
            try:
                partition, offset, value, count, kind = entry
            except (TypeError, ValueError):
                raise QueueHistoryError(f"index {index}: an ack entry is [p, offset, value, count, kind], got {entry!r}") from None
            if kind not in ACK_KINDS:
                raise QueueHistoryError(f"index {index}: unknown acknowledgement {kind!r}")
            status = statuses.get(str(partition), "info")
            if status not in STATUSES:
                raise QueueHistoryError(f"index {index}: unknown status {status!r}")
            history.acks.append(Ack(process, index, (int(partition), int(offset)), value, int(count), kind, status))

    for number, event in enumerate(events):
        line = event.to_json() if isinstance(event, Event) else event
        history.events += 1
        index, process, type_, f, value = (line.get("index", number), line.get("process"), line.get("type"),
                                           line.get("f"), line.get("value"))
        if process != "runner":
            history.processes.add(process)
        if f == "config":
            history.limit = int(value["delivery_count_limit"])
        elif f == "produce":
            if type_ == "ok":
                partition, produced, offset = value
                if not isinstance(offset, int):
                    raise QueueHistoryError(f"index {index}: a produce ok without its offset: {value!r}")
                history.produced[(int(partition), int(offset))] = produced
                history.maybe_produced.add((int(partition), produced))
            else:  # invoke, info: it may be in the log
                history.maybe_produced.add((int(value[0]), value[1]))
        elif f == "deliver":
            for partition, offset, delivered, count in value:
                history.deliveries.append(Delivery(process, index, (int(partition), int(offset)), delivered, int(count)))
        elif f == "ack":
            if type_ == "invoke":
                if process in pending:
                    settle(process, {})
                pending[process] = (index, list(value))
            elif process in pending:
                settle(process, value or {})
        elif f == "crash":
            if process in pending:
                settle(process, {})
            if process in open_txns:
                open_txns.pop(process).settle("info", None, crashed=True)
        elif f == "txn":
            if type_ == "invoke":
                if process in open_txns:
                    open_txns.pop(process).settle("info", None)
                try:
                    txn = Txn.begin(process, index, value)
                except ValueError as exc:
                    raise QueueHistoryError(str(exc)) from None
                if (process, txn.id) in history.txns:
                    raise QueueHistoryError(f"index {index}: transaction {txn.id} of process {process} twice")
                history.txns[(process, txn.id)] = open_txns[process] = txn
            elif process in open_txns:
                if type_ not in STATUSES:
                    raise QueueHistoryError(f"index {index}: unknown transaction outcome {type_!r}")
                open_txns.pop(process).settle(type_, value)
        elif f == "outputs":
            try:
                history.outputs = [Output.parse(index, entry) for entry in value["records"]]
            except (ValueError, TypeError, KeyError) as exc:
                raise QueueHistoryError(f"index {index}: bad outputs line ({exc})") from None
            history.outputs_complete = bool(value.get("complete"))
        elif f == "final":
            history.final = {int(p): (int(start), int(end)) for p, (start, end) in value.items()}
        else:
            raise QueueHistoryError(f"index {index}: unknown f {f!r}")
    for process in list(pending):
        settle(process, {})
    for txn in open_txns.values():
        txn.settle("info", None)
    return history


def check(source: str | os.PathLike | Iterable[Event | dict]) -> Report:
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as stream:
            source = [json.loads(line) for line in stream if line.strip()]
    return check_history(parse(source))


def check_history(h: QueueHistory) -> Report:
    found: dict[str, list[dict]] = defaultdict(list)

    def report(name: str, **details: Any) -> None:
        found[name].append(details)

    # first the transactions: their outcome (inferred from the output where the client could not tell)
    # becomes the ACCEPTs (or, aborted, the implied RELEASEs) the checks below count like a member's own
    implied, txn_stats = judge_transactions(h, report)
    h = dataclasses.replace(h, acks=h.acks + [Ack(process, index, record, value, count, kind, status, True)
                                              for record, value, count, kind, status, process, index in implied])
    done_partitions = {p for p, (start, end) in (h.final or {}).items() if start >= end}
    # every sighting of a record: deliveries, and the acks (a worker killed between its poll and the
    # line that records it still names the delivery in its ack, or not at all)
    seen: dict[_Record, dict[int, set]] = defaultdict(lambda: defaultdict(set))  # record -> count -> processes
    values: dict[_Record, set] = defaultdict(set)
    for d in h.deliveries:
        seen[d.record][d.count].add((d.process, d.index))
        values[d.record].add(d.value)
    for a in h.acks:
        seen[a.record].setdefault(a.count, set())
        values[a.record].add(a.value)

    for record, counts in sorted(seen.items()):
        for count, sightings in sorted(counts.items()):
            if count > h.limit:
                report("delivery-limit", partition=record[0], offset=record[1], delivery_count=count, limit=h.limit)
            if len({process for process, _ in sightings}) > 1 or len(sightings) > 1:
                report("repeated-delivery-count", partition=record[0], offset=record[1], delivery_count=count,
                       deliveries=sorted([str(p), i] for p, i in sightings))
        for value in sorted(values[record], key=repr):
            if (record[0], value) not in h.maybe_produced:
                report("unwritten-delivery", partition=record[0], offset=record[1], value=value)
        produced = h.produced.get(record)
        if len(values[record]) > 1 or (produced is not None and values[record] - {produced}):
            report("inconsistent-offset", partition=record[0], offset=record[1], acknowledged=produced,
                   delivered=sorted(values[record], key=repr))

    acks_of: dict[_Record, list[Ack]] = defaultdict(list)
    for a in h.acks:
        acks_of[a.record].append(a)
    for record, acks in sorted(acks_of.items()):
        top = max(seen[record]) if seen[record] else 0
        accepted = [a for a in acks if a.kind == "accept" and a.status == "ok"]
        if len(accepted) > 1:
            report("accepted-twice", partition=record[0], offset=record[1],
                   acks=[[str(a.process), a.index, a.count] for a in accepted])
        for name, kind in (("redelivered-after-accept", "accept"), ("redelivered-after-reject", "reject")):
            final = [a for a in acks if a.kind == kind and a.status == "ok"]
            if final and top > min(a.count for a in final):
                first = min(final, key=lambda a: a.count)
                report(name, partition=record[0], offset=record[1], acknowledged_at_count=first.count,
                       by=str(first.process), index=first.index, delivered_again_with_count=top)
        for a in acks:
            # one delivery nobody recorded (a worker killed between poll and record, a lost response)
            # can be the one at the limit, after which the record is archived unseen: only a release
            # two or more below the limit must come back where we can see it
            if (a.kind == "release" and a.status == "ok" and a.count <= h.limit - 2
                    and record[0] in done_partitions and top <= a.count):
                report("release-not-redelivered", partition=record[0], offset=record[1], released_at_count=a.count,
                       by=str(a.process), index=a.index)

    finished = Counter()
    for record, produced in sorted(h.produced.items()):
        acks = acks_of.get(record, [])
        kinds = {(a.kind, a.status) for a in acks}
        top = max(seen[record]) if seen.get(record) else 0
        if any(k == "accept" and s != "fail" for k, s in kinds):
            finished["accepted" if ("accept", "ok") in kinds else "maybe accepted"] += 1
        elif any(k == "reject" and s != "fail" for k, s in kinds):
            finished["rejected" if ("reject", "ok") in kinds else "maybe rejected"] += 1
        elif top >= h.limit - 1:  # as above: its last delivery may be one nobody recorded
            finished["archived"] += 1
        elif record[0] in done_partitions:
            report("lost", partition=record[0], offset=record[1], value=produced, highest_delivery_count=top,
                   acks=[[a.kind, a.status, a.count] for a in acks])
        else:
            finished["unknown (final drain incomplete)"] += 1

    anomalies = {name: len(items) for name, items in found.items()}
    stats = {
        "produced": len(h.produced), "produced_indefinite": len(h.maybe_produced) - len(h.produced),
        "deliveries": len(h.deliveries), "records_delivered": len(seen),
        "acks": Counter(f"{'txn ' if a.txn else ''}{a.kind} {a.status}" for a in h.acks), "finished": finished,
        "delivery_count_limit": h.limit, "processes": len(h.processes), "events": h.events,
        "final": h.final, "partitions_done": len(done_partitions), **txn_stats,
    }
    return QueueReport(valid=not anomalies, anomalies=anomalies,
                       examples={name: items[:EXAMPLES] for name, items in found.items()}, stats=stats,
                       has_final_read=h.final is not None)


class QueueReport(Report):
    """The exactly-once Report with the queue's figures."""

    def render_text(self) -> str:
        s = self.stats
        acks = s["acks"]
        lines = [
            f"queue check: {'VALID' if self.valid else 'INVALID'}",
            (f"  produced {s['produced']} acknowledged (+{s['produced_indefinite']} unacknowledged), "
            f"{s['deliveries']} deliveries of {s['records_delivered']} records, delivery count limit "
            f"{s['delivery_count_limit']}"),
            "  acknowledgements: " + (", ".join(f"{k} {n}" for k, n in sorted(acks.items())) or "none"),
            "  acknowledged records ended: " + (", ".join(f"{k} {n}" for k, n in sorted(s["finished"].items())) or "-"),
            f"  processes {s['processes']}, events {s['events']}"
            + ("" if self.has_final_read else "; no final drain: lost records are not judged"),
        ]
        if s.get("transactions"):
            lines.append("  transactions: " + ", ".join(f"{k} {n}" for k, n in sorted(s["transactions"].items()))
                         + (f"; {s['outputs_visible']} outputs visible to read_committed" if s["outputs_read"]
                            else "; no complete read of the output topic: outputs are not judged"))
        if self.has_final_read:
            lines.append(f"  final drain: {s['partitions_done']} of {len(s['final'])} partitions done "
                         "(start offset at the high watermark)")
        if not self.anomalies:
            lines.append("  no anomalies")
        for name in sorted(self.anomalies):
            lines.append(f"  ERROR {name}: {self.anomalies[name]} ({ANOMALIES[name]})")
            for example in self.examples.get(name, [])[:3]:
                lines.append(f"      e.g. {json.dumps(example, default=str)}")
        return "\n".join(lines)


__all__ = ["ANOMALIES", "QueueHistoryError", "QueueReport", "check", "check_history", "parse"]
