"""The queue checker's transactional mode (docs/verification.md, "The queue workload", transactional
mode): judges the ``txn`` and ``outputs`` lines of a queue history (queue_checker.py documents them)
against the promise of acknowledgements inside a transaction: each input a transaction ACCEPTs has its
output visible to read_committed exactly when that transaction commits, and once. Pure.

What the client could not tell, the output does: a transaction whose outcome is unknown (its EndTxn's
answer lost, its worker killed) committed if any of its outputs is visible, and aborted if the complete
read shows none. Transactions are atomic, so either all of a committed transaction's outputs are
visible or it is an anomaly.

Each transaction then becomes acknowledgements that queue_checker.py counts like a member's own: a
committed one an ACCEPT (``ok``) of each input at its delivery count, so a second accepted transaction
or a later delivery is ``accepted-twice`` or ``redelivered-after-accept``; an aborted one a RELEASE at
that count (``ok`` when the abort is known, or inferred from the output, and the records were held by
the transaction), so an input that never comes back is ``release-not-redelivered`` or ``lost``; an
unknown one an ACCEPT that may have happened (``info``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TXN_ANOMALIES: dict[str, str] = {
    "output-without-accept": "an output visible to read_committed whose transaction did not accept its input "
                             "(aborted, another transaction's or member's ACCEPT, the input delivered again)",
    "accept-without-output": "an input ACCEPTed by a committed transaction whose output is not visible",
    "output-twice": "one input's output visible twice to read_committed",
}

_Record = tuple[int, int]


@dataclass
class Txn:
    """One transaction of a worker: its inputs (record -> (value, delivery count)) and its outcome."""

    process: Any
    index: int
    id: int
    inputs: dict[_Record, tuple[Any, int]]
    status: str = "info"  # ok (committed), fail (aborted) or info (unknown)
    end: str | None = None  # what the worker asked for, when the outcome is unknown: commit, abort or None
    acknowledged: bool = False  # every ACCEPT held by the transaction (known for aborts only)
    crashed: bool = False  # its worker died with it open
    settled: bool = field(default=False, repr=False)

    @classmethod
    def begin(cls, process: Any, index: int, value: Any) -> Txn:
        try:
            inputs = {(int(p), int(o)): (v, int(c)) for p, o, v, c in value["records"]}
            return cls(process, index, int(value["id"]), inputs)
        except (TypeError, ValueError, KeyError):
            raise ValueError(f"index {index}: a txn invoke is {{id, records: [[p, offset, value, count]...]}}, "
                             f"got {value!r}") from None

    def settle(self, status: str, value: Any, crashed: bool = False) -> None:
        if self.settled:
            return
        self.crashed = crashed
        self.settled = True
        self.status = status
        value = value if isinstance(value, dict) else {}
        self.end = "commit" if status == "ok" else "abort" if status == "fail" else value.get("end")
        self.acknowledged = bool(value.get("acknowledged"))


@dataclass(frozen=True, slots=True)
class Output:
    partition: int
    offset: int
    input: _Record
    value: Any
    process: Any
    txn: int

    @classmethod
    def parse(cls, index: int, entry: Any) -> Output:
        try:
            partition, offset, in_partition, in_offset, value, process, txn = entry
            return cls(int(partition), int(offset), (int(in_partition), int(in_offset)), value, process, int(txn))
        except (TypeError, ValueError):
            raise ValueError(f"index {index}: an output is [p, offset, input p, input offset, value, process, "
                             f"txn], got {entry!r}") from None


# (record, value, delivery count, kind, status) for queue_checker.py to count with the members' acks
ImpliedAck = tuple[_Record, Any, int, str, str, Any, int]


def judge_transactions(h: Any, report: Callable[..., None]) -> tuple[list[ImpliedAck], dict]:
    """Reports the transactional anomalies of ``h`` (a QueueHistory) through ``report(name, **details)``;
    returns the acknowledgements the transactions amount to, and the figures."""
    outcomes: Counter[str] = Counter()
    if not h.txns:
        return [], {"transactions": outcomes, "outputs_visible": 0, "outputs_read": False}
    read = h.outputs is not None and h.outputs_complete
    visible_of: dict[tuple[Any, int], list[Output]] = defaultdict(list)
    outputs_of: dict[_Record, list[Output]] = defaultdict(list)
    for out in h.outputs or ():
        visible_of[(out.process, out.txn)].append(out)
        outputs_of[out.input].append(out)

    def where(out: Output) -> dict:
        return {"output": [out.partition, out.offset], "input": list(out.input), "process": str(out.process),
                "txn": out.txn}

    for key, outs in visible_of.items():
        if key not in h.txns:
            for out in outs:
                report("output-without-accept", **where(out), why="no such transaction in the history")

    implied: list[ImpliedAck] = []
    committed: dict[_Record, list[Txn]] = defaultdict(list)
    for key, txn in sorted(h.txns.items(), key=lambda kv: kv[1].index):
        visible = visible_of.get(key, [])
        if txn.status == "ok":
            state = "committed"
        elif txn.status == "fail":
            state = "aborted"
        elif visible:
            state = "committed (inferred from its output)"
        elif read:
            state = "aborted (inferred from its output)"
        else:
            state = "unknown"
        outcomes[state] += 1
        if txn.crashed:
            outcomes["open when its worker died"] += 1
        for out in visible:
            if out.input not in txn.inputs:
                report("output-without-accept", **where(out), why="not an input of that transaction")
            elif txn.end == "abort":
                report("output-without-accept", **where(out),
                       why="its transaction was aborted" if txn.status == "fail" else "the worker aborted it")
        if state.startswith("committed") and txn.end != "abort":
            shown = {out.input for out in visible}
            for record, (value, count) in sorted(txn.inputs.items()):
                implied.append((record, value, count, "accept", "ok", txn.process, txn.index))
                committed[record].append(txn)
                if read and record not in shown:
                    report("accept-without-output", partition=record[0], offset=record[1], value=value,
                           process=str(txn.process), txn=txn.id, committed=txn.status == "ok")
        elif state.startswith("aborted") and not visible:
            # held by the transaction (a known abort after its acknowledgement, or no commit at all), the
            # inputs come back: a RELEASE at their count. Otherwise unknown, like a lost answer.
            held = txn.acknowledged or state.endswith("output)")
            for record, (value, count) in sorted(txn.inputs.items()):
                implied.append((record, value, count, "release", "ok" if held else "info", txn.process, txn.index))
        else:
            for record, (value, count) in sorted(txn.inputs.items()):
                implied.append((record, value, count, "accept", "info", txn.process, txn.index))

    # a visible output of a committed transaction whose ACCEPT did not hold: someone else accepted the
    # input too, or the input was handed out again after it
    member_accepts: dict[_Record, list] = defaultdict(list)
    for a in h.acks:
        if a.kind == "accept" and a.status == "ok":
            member_accepts[a.record].append(a)
    top: dict[_Record, int] = defaultdict(int)
    for d in h.deliveries:
        top[d.record] = max(top[d.record], d.count)
    for record, txns in sorted(committed.items()):
        for txn in txns:
            outs = [o for o in visible_of.get((txn.process, txn.id), []) if o.input == record]
            if not outs:
                continue
            others = [f"process {a.process} at index {a.index}" for a in member_accepts.get(record, [])]
            others += [f"transaction {t.id} of process {t.process}" for t in txns if t is not txn]
            count = txn.inputs[record][1]
            if others:
                report("output-without-accept", **where(outs[0]), why="its input was accepted by " + ", ".join(others))
            elif top[record] > count:
                report("output-without-accept", **where(outs[0]),
                       why=f"its input was delivered again (count {top[record]}) after this ACCEPT (count {count})")

    for record, outs in sorted(outputs_of.items()):
        if len(outs) > 1:
            report("output-twice", partition=record[0], offset=record[1],
                   outputs=[[o.partition, o.offset, str(o.process), o.txn] for o in outs])
    stats = {"transactions": outcomes, "outputs_visible": len(h.outputs or ()), "outputs_read": read}
    return implied, stats


__all__ = ["TXN_ANOMALIES", "Output", "Txn", "judge_transactions"]
