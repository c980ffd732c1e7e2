"""The exactly-once checker: reads a history (see history.py), returns a Report. Pure: no I/O besides
reading the history file when given a path.

What each anomaly means, what counts as committed, and which anomalies Kafka allows are documented
once, in docs/reliability.md ("The checker"). The shape follows Jepsen's checker for Kafka-like queues:
per key (a partition), a version order built from every offset any client was told about; per process,
the order of its polls and sends; and a dependency graph between committed transactions.

Everything is a pass over dicts keyed by (key, value) or (key, offset), so ~10^5 transactions check in
seconds; only the poll-skip check sorts (once per key) and bisects.
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eoslog.verify.cycles import find_cycle, strongly_connected_components
from eoslog.verify.history import Event, Poll, Send, Txn, pair, parse_event, read_history

ANOMALIES: dict[str, str] = {
    "inconsistent-offsets": "one offset of a key holds two different values",
    "duplicate": "one value of a key sits at two offsets",
    "G1a": "a read returned a value whose transaction definitely aborted",
    "precommitted-read": "a transaction read its own send before committing",
    "unwritten-read": "a read returned a value that no transaction sent",
    "lost-write": "a committed value below the highest offset read on its key that no read returned",
    "unseen": "a committed value that no read returned (the final read, when there is one, decides)",
    "poll-skip": "a process's next poll on a key jumped over offsets known to hold values",
    "nonmonotonic-poll": "a process's next poll on a key went back, with no assign/rebalance/crash between",
    "nonmonotonic-send": "a process's sends to a key got offsets that went backwards",
    "G0": "a cycle of write-write edges (Kafka does not isolate writes: allowed)",
    "G1c": "a cycle of write-read edges between committed transactions",
    "G1c-ww": "a cycle of write-read edges that needs write-write edges too (allowed, as G0)",
    "reused-value": "two transactions sent the same value to one key (the workload broke uniqueness)",
}
# Kafka's transactions order each partition's writes at send time, not at commit: write-write edges
# taken from offsets say nothing about isolation, so cycles through them are expected.
KAFKA_ALLOWED = frozenset({"G0", "G1c-ww"})

_Kv = tuple[str, Any]


@dataclass
class Report:
    valid: bool
    anomalies: dict[str, int]  # name -> count, only the names that occurred
    examples: dict[str, list[dict]]  # name -> the first few occurrences
    stats: dict[str, int]
    allowed: frozenset[str] = frozenset()  # names reported for information, not making the run invalid
    has_final_read: bool = False

    @property
    def errors(self) -> dict[str, int]:
        return {name: count for name, count in self.anomalies.items() if name not in self.allowed}

    def to_json(self) -> dict:
        return {"valid": self.valid, "anomalies": self.anomalies, "examples": self.examples,
                "stats": self.stats, "allowed": sorted(self.allowed), "has_final_read": self.has_final_read}

    def render_text(self) -> str:
        stats = self.stats
        lines = [
            f"exactly-once check: {'VALID' if self.valid else 'INVALID'}",
            (f"  transactions {stats['ops']}: committed {stats['committed']}, aborted {stats['aborted']}, "
            f"indefinite {stats['indefinite']} (of which {stats['indefinite_visible']} seen committed)"),
            f"  sends {stats['sends']}, distinct values read {stats['values_read']}, keys {stats['keys']}, "
            f"processes {stats['processes']}, events {stats['events']}"
            + ("" if self.has_final_read else "; no final read: unseen values are information only"),
        ]
        if not self.anomalies:
            lines.append("  no anomalies")
        for name in sorted(self.anomalies, key=lambda n: (n in self.allowed, n)):
            verdict = "allowed" if name in self.allowed else "ERROR"
            lines.append(f"  {name:<22} {self.anomalies[name]:>8}  {verdict}: {ANOMALIES.get(name, '')}")
            for example in self.examples.get(name, []):
                text = json.dumps(example, default=str, separators=(", ", ": "))
                lines.append(f"      e.g. {text if len(text) <= 300 else text[:297] + '...'}")
        return "\n".join(lines)


class _Findings:
    def __init__(self, max_examples: int) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[dict]] = defaultdict(list)
        self.max_examples = max_examples

    def add(self, name: str, example: dict) -> None:
        self.counts[name] += 1
        if len(self.examples[name]) < self.max_examples:
            self.examples[name].append(example)


def check(history: str | os.PathLike | Iterable[Event | dict], *, allowed: Iterable[str] | None = None,
          max_examples: int = 5, ww_edges: bool = True,
          damaged: Mapping[str, Iterable[tuple[int, int]]] | None = None) -> Report:
    """Check a history (a path to a JSON-lines file, or its events). ``allowed`` replaces the default
    set of anomalies that do not make the run invalid (Kafka's allowances, plus "unseen" when the
    history has no final read). ``ww_edges=False`` leaves write-write edges out of the cycle search.
    ``damaged``: per key, (first, last) offsets of batches a fault corrupted on purpose (a single node's
    bitflip, faults.json): the broker refuses them, so their values count as neither lost nor unseen,
    and a poll that steps over them is no skip. Nothing else is excused: a damaged value that *is* read
    still has to be one that was written, at its offset."""
    if isinstance(history, (str, os.PathLike)):
        events = read_history(history)
    else:
        events = [e if isinstance(e, Event) else parse_event(e, i) for i, e in enumerate(history)]
    txns, process_events = pair(events)
    findings = _Findings(max_examples)
    analysis = _Analysis(txns, findings, damaged or {})
    analysis.check_version_orders()
    analysis.check_reads()
    analysis.check_lost_and_unseen()
    analysis.check_process_orders(process_events)
    analysis.check_cycles(ww_edges)

    has_final = bool(analysis.final_txns)
    if allowed is None:
        allowed_set = set(KAFKA_ALLOWED) | (set() if has_final else {"unseen"})
    else:
        allowed_set = set(allowed)
    anomalies = {name: count for name, count in sorted(findings.counts.items()) if count}
    valid = all(name in allowed_set for name in anomalies)
    return Report(valid, anomalies, {name: findings.examples[name] for name in anomalies},
                  analysis.stats(process_events), frozenset(allowed_set), has_final)


class _Analysis:
    """The intermediate indexes of one history, built once and shared by the checks."""

    def __init__(self, txns: list[Txn], findings: _Findings,
                 damaged: Mapping[str, Iterable[tuple[int, int]]]) -> None:
        self.txns = txns
        self.findings = findings
        self.damaged = {key: [tuple(r) for r in ranges] for key, ranges in damaged.items()}
        self.excused_damaged = 0  # committed values in damaged batches: neither lost nor unseen
        self.writer: dict[_Kv, int] = {}  # (key, value) -> id of the transaction that sent it
        self.offset_of: dict[_Kv, int] = {}  # (key, value) -> the first offset anyone reported for it
        self.value_at: dict[tuple[str, int], Any] = {}  # (key, offset) -> the first value reported there
        self.inconsistent: dict[tuple[str, int], set] = {}
        self.duplicates: dict[_Kv, set[int]] = {}
        self.readers: dict[_Kv, list[int]] = defaultdict(list)  # (key, value) -> reading transaction ids
        self.max_read: dict[str, int] = {}  # key -> highest offset any read returned
        self.final_txns = [t for t in txns if t.final and t.outcome == "ok"]
        self.final_seen: set[_Kv] = set()
        self.keys: set[str] = set()
        self.sends = 0

        for txn in txns:
            for _, mop in txn.sends():
                self.sends += 1
                kv = (mop.key, mop.value)
                self.keys.add(mop.key)
                previous = self.writer.setdefault(kv, txn.id)
                if previous != txn.id:
                    findings.add("reused-value", {"key": mop.key, "value": mop.value,
                                                  "txns": [txns[previous].index, txn.index]})
                if mop.offset is not None:
                    self._place(mop.key, mop.offset, mop.value)
            for _, mop in txn.polls():
                for key, pairs in mop.results.items():
                    self.keys.add(key)
                    for offset, value in pairs:
                        self._place(key, offset, value)
                        self.readers[(key, value)].append(txn.id)
                        if offset > self.max_read.get(key, -1):
                            self.max_read[key] = offset
                        if txn.final and txn.outcome == "ok":
                            self.final_seen.add((key, value))

        # Committed: ok, or indefinite with any of its values seen (a transaction is all or nothing).
        self.committed = [t.outcome == "ok" for t in txns]
        self.indefinite_visible = 0
        for txn in txns:
            if txn.outcome == "info" and any((m.key, m.value) in self.readers for _, m in txn.sends()):
                self.committed[txn.id] = True
                self.indefinite_visible += 1

    def _place(self, key: str, offset: int, value: Any) -> None:
        prior = self.value_at.setdefault((key, offset), value)
        if prior != value:
            self.inconsistent.setdefault((key, offset), {prior}).add(value)
        prior_offset = self.offset_of.setdefault((key, value), offset)
        if prior_offset != offset:
            self.duplicates.setdefault((key, value), {prior_offset}).add(offset)

    def _describe(self, txn_id: int) -> dict:
        txn = self.txns[txn_id]
        return {"index": txn.index, "process": txn.process, "outcome": txn.outcome}

    # ---------------------------------------------------------------------------------- checks

    def check_version_orders(self) -> None:
        for (key, offset), values in self.inconsistent.items():
            self.findings.add("inconsistent-offsets", {"key": key, "offset": offset,
                                                       "values": sorted(values, key=repr)})
        for (key, value), offsets in self.duplicates.items():
            self.findings.add("duplicate", {"key": key, "value": value, "offsets": sorted(offsets)})

    def check_reads(self) -> None:
        for kv, reader_ids in self.readers.items():
            writer_id = self.writer.get(kv)
            key, value = kv
            if writer_id is None:
                self.findings.add("unwritten-read", {"key": key, "value": value,
                                                     "reader": self._describe(reader_ids[0])})
                continue
            if self.txns[writer_id].outcome == "fail":
                self.findings.add("G1a", {"key": key, "value": value, "writer": self._describe(writer_id),
                                          "reader": self._describe(reader_ids[0])})
            if writer_id in reader_ids:
                self.findings.add("precommitted-read", {"key": key, "value": value,
                                                        "txn": self._describe(writer_id)})

    def check_lost_and_unseen(self) -> None:
        has_final = bool(self.final_txns)
        for txn in self.txns:
            if not self.committed[txn.id]:
                continue
            for _, mop in txn.sends():
                kv = (mop.key, mop.value)
                seen = kv in self.readers
                offset = self.offset_of.get(kv)
                highest = self.max_read.get(mop.key, -1)
                example = {"key": mop.key, "value": mop.value, "offset": offset,
                           "writer": self._describe(txn.id)}
                if self._is_damaged(mop.key, offset):
                    # Refused since the fault, so missing from reads after it (the final read's included).
                    if not ((kv in self.final_seen) if has_final else seen):
                        self.excused_damaged += 1
                    continue
                if not seen and offset is not None and offset < highest:
                    self.findings.add("lost-write", {**example, "highest_offset_read": highest})
                elif (kv not in self.final_seen) if has_final else not seen:
                    self.findings.add("unseen", example)

    def _is_damaged(self, key: str, offset: int | None) -> bool:
        return offset is not None and any(first <= offset <= last for first, last in self.damaged.get(key, ()))

    def check_process_orders(self, process_events: list[Event]) -> None:
        """Per process, in history order: polls must continue where the previous poll stopped, sends
        must get increasing offsets. Assign/subscribe/rebalance/crash reset the poll position (crash
        resets the producer too); so does a transaction that did not commit, since the consumer may
        rewind after an abort or an unknown outcome."""
        visible: dict[str, set[int]] = defaultdict(set)
        for (key, value), offset in self.offset_of.items():
            writer_id = self.writer.get((key, value))
            if self._is_damaged(key, offset):
                continue  # refused by the broker after the fault, even if read before it: a reader steps over it
            if (key, value) in self.readers or (writer_id is not None and self.committed[writer_id]):
                visible[key].add(offset)
        visible_sorted = {key: sorted(offsets) for key, offsets in visible.items()}

        timelines: dict[Any, list[tuple[int, int, Txn | Event]]] = defaultdict(list)
        for txn in self.txns:
            timelines[txn.process].append((txn.index, 1, txn))
        for event in process_events:
            timelines[event.process].append((event.index, 0, event))
        for process, timeline in timelines.items():
            timeline.sort(key=lambda item: (item[0], item[1]))
            last_poll: dict[str, int] = {}
            last_send: dict[str, int] = {}
            for _, _, item in timeline:
                if isinstance(item, Event):
                    last_poll.clear()
                    if item.f == "crash":
                        last_send.clear()
                    continue
                if item.outcome != "ok":
                    last_poll.clear()
                    continue
                for mop in item.mops:
                    if isinstance(mop, Poll):
                        for key in sorted(mop.results):
                            for offset, _ in mop.results[key]:
                                self._check_poll_step(item, key, last_poll.get(key), offset,
                                                      visible_sorted.get(key, []))
                                last_poll[key] = offset
                    elif isinstance(mop, Send) and mop.offset is not None:
                        previous = last_send.get(mop.key)
                        if previous is not None and mop.offset <= previous:
                            self.findings.add("nonmonotonic-send", {
                                "process": process, "key": mop.key, "previous_offset": previous,
                                "offset": mop.offset, "txn": self._describe(item.id)})
                        last_send[mop.key] = mop.offset

    def _check_poll_step(self, txn: Txn, key: str, previous: int | None, offset: int,
                         visible: list[int]) -> None:
        if previous is None:
            return
        if offset <= previous:
            self.findings.add("nonmonotonic-poll", {"process": txn.process, "key": key,
                                                    "previous_offset": previous, "offset": offset,
                                                    "txn": self._describe(txn.id)})
        elif offset > previous + 1:
            low = bisect.bisect_right(visible, previous)
            high = bisect.bisect_left(visible, offset)
            if high > low:
                self.findings.add("poll-skip", {"process": txn.process, "key": key,
                                                "previous_offset": previous, "offset": offset,
                                                "skipped_offsets": visible[low:min(high, low + 5)],
                                                "skipped_count": high - low, "txn": self._describe(txn.id)})

    def check_cycles(self, ww_edges: bool) -> None:
        wr: dict[int, set[int]] = defaultdict(set)
        ww: dict[int, set[int]] = defaultdict(set)
        why: dict[tuple[str, int, int], tuple[str, Any]] = {}  # (kind, from, to) -> (key, value)
        for kv, reader_ids in self.readers.items():
            writer_id = self.writer.get(kv)
            if writer_id is None or not self.committed[writer_id]:
                continue
            for reader_id in reader_ids:
                if reader_id != writer_id and self.txns[reader_id].outcome == "ok":
                    wr[writer_id].add(reader_id)
                    why.setdefault(("wr", writer_id, reader_id), kv)
        if ww_edges:
            by_key: dict[str, list[tuple[int, int, Any]]] = defaultdict(list)
            for (key, value), offset in self.offset_of.items():
                writer_id = self.writer.get((key, value))
                if writer_id is not None and self.committed[writer_id]:
                    by_key[key].append((offset, writer_id, value))
            for key, order in by_key.items():
                order.sort(key=lambda item: item[0])
                for (_, before, _), (_, after, value) in itertools.pairwise(order):
                    if before != after:
                        ww[before].add(after)
                        why.setdefault(("ww", before, after), (key, value))

        def explain(cycle: list[int], graph_kinds: tuple[str, ...]) -> dict:
            steps = []
            for a, b in itertools.pairwise(cycle):
                kind = next(k for k in graph_kinds if (k, a, b) in why)
                key, value = why[(kind, a, b)]
                steps.append({"type": kind, "key": key, "value": value})
            return {"cycle": [self._describe(t) for t in cycle], "steps": steps}

        for component in strongly_connected_components(wr):
            self.findings.add("G1c", explain(find_cycle(wr, component), ("wr",)))
        for component in strongly_connected_components(ww):
            self.findings.add("G0", explain(find_cycle(ww, component), ("ww",)))
        if not ww:
            return
        wr_component: dict[int, int] = {}
        for number, component in enumerate(strongly_connected_components(wr)):
            for node in component:
                wr_component[node] = number
        union: dict[int, set[int]] = defaultdict(set)
        for graph in (wr, ww):
            for node, successors in graph.items():
                union[node] |= successors
        for component in strongly_connected_components(union):
            members = set(component)
            crossing = next(((a, b) for a in component for b in wr.get(a, ())
                             if b in members and wr_component.get(a, ~a) != wr_component.get(b, ~b)), None)
            if crossing is not None:  # any cycle through this wr edge must use a ww edge
                self.findings.add("G1c-ww", explain(find_cycle(union, component, crossing), ("wr", "ww")))

    def stats(self, process_events: list[Event]) -> dict[str, int]:
        outcomes = Counter(txn.outcome for txn in self.txns)
        return {
            "ops": len(self.txns),
            "committed": outcomes["ok"],
            "aborted": outcomes["fail"],
            "indefinite": outcomes["info"],
            "indefinite_visible": self.indefinite_visible,
            "sends": self.sends,
            "values_read": len(self.readers),
            "keys": len(self.keys),
            "processes": len({txn.process for txn in self.txns} | {e.process for e in process_events}),
            "events": len(process_events),
            "excused_damaged": self.excused_damaged,
        }


def main(argv: list[str] | None = None) -> int:
    """``python -m eoslog.verify HISTORY [--plot PNG] [--json]``: print the report; exit 1 if invalid."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m eoslog.verify", description=main.__doc__)
    parser.add_argument("history")
    parser.add_argument("--plot", help="also write a throughput plot (PNG) here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    events = read_history(args.history)
    report = check(events)
    print(json.dumps(report.to_json(), default=str, indent=2) if args.json else report.render_text())
    if args.plot:
        from eoslog.verify.plot import plot

        plot(events, [], args.plot)
    return 0 if report.valid else 1
