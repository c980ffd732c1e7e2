"""The verifier's history: what clients tried and what they were told, one JSON object per line.

The format is documented once, in docs/reliability.md ("The history format"). In short::

    {"index": 0, "time": 1731.20, "process": 3, "type": "invoke", "f": "txn",
     "value": [["send", "t-0", 17], ["poll"]]}
    {"index": 1, "time": 1731.25, "process": 3, "type": "ok", "f": "txn",
     "value": [["send", "t-0", 17, 42], ["poll", {"t-1": [[5, 8], [6, 9]]}]]}
    {"index": 2, "time": 1731.30, "process": 3, "type": "ok", "f": "assign", "value": ["t-0", "t-1"]}
    {"index": 3, "time": 1731.90, "process": 3, "type": "info", "f": "crash"}

This module parses and writes lines and pairs each invocation with its completion; it judges nothing.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import threading
import time as _time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Self

TXN = "txn"
# Per-process events that reset what a consumer may be expected to poll next.
EVENT_FUNCTIONS = frozenset({"assign", "subscribe", "rebalance", "crash"})
TYPES = frozenset({"invoke", "ok", "fail", "info"})
OUTCOMES = ("ok", "fail", "info")


class HistoryError(ValueError):
    """A history line that does not follow the documented format (the recorder's fault, not the broker's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """One line of a history, as written."""

    index: int
    process: Any
    type: str
    f: str
    value: Any = None
    time: float | None = None
    final: bool = False

    def to_json(self) -> dict:
        line: dict = {"index": self.index, "time": self.time, "process": self.process,
                      "type": self.type, "f": self.f}
        if self.value is not None:
            line["value"] = self.value
        if self.final:
            line["final"] = True
        return line


@dataclasses.dataclass(frozen=True, slots=True)
class Send:
    key: str
    value: Any
    offset: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Poll:
    # key -> [(offset, value), ...] in the order the consumer returned them
    results: dict[str, list[tuple[int, Any]]]


@dataclasses.dataclass(slots=True)
class Txn:
    """An invocation paired with its completion. ``outcome`` is "ok" (committed), "fail" (definitely
    did not happen) or "info" (indefinite: may or may not have happened, including never completed)."""

    id: int  # position in the list of transactions
    index: int  # history index of the invoke line (or of the completion when the invoke is missing)
    process: Any
    outcome: str
    mops: list[Send | Poll]
    invoke_time: float | None = None
    complete_time: float | None = None
    complete_index: int | None = None
    final: bool = False

    def sends(self) -> Iterator[tuple[int, Send]]:
        for position, mop in enumerate(self.mops):
            if isinstance(mop, Send):
                yield position, mop

    def polls(self) -> Iterator[tuple[int, Poll]]:
        for position, mop in enumerate(self.mops):
            if isinstance(mop, Poll):
                yield position, mop


# ---------------------------------------------------------------------------------------------- parsing


def parse_event(obj: dict, index: int) -> Event:
    """One decoded JSON line -> Event; ``index`` is used when the line has none."""
    if not isinstance(obj, dict):
        raise HistoryError(f"line {index}: expected a JSON object, got {type(obj).__name__}")
    try:
        process, type_, f = obj["process"], obj["type"], obj["f"]
    except KeyError as missing:
        raise HistoryError(f"line {index}: missing field {missing}") from None
    if type_ not in TYPES:
        raise HistoryError(f"line {index}: type must be one of {sorted(TYPES)}, got {type_!r}")
    if f != TXN and f not in EVENT_FUNCTIONS:
        raise HistoryError(f"line {index}: unknown f {f!r}")
    time_ = obj.get("time")
    return Event(int(obj.get("index", index)), process, type_, f, obj.get("value"),
                 None if time_ is None else float(time_), bool(obj.get("final", False)))


def parse_mops(value: Any, where: str = "") -> list[Send | Poll]:
    """A transaction's value -> micro-ops. Sends are ["send", key, value] or ["send", key, value, offset];
    polls are ["poll"] or ["poll", {key: [[offset, value], ...]}]."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise HistoryError(f"{where}: a transaction's value must be a list of micro-ops")
    mops: list[Send | Poll] = []
    for mop in value:
        if not isinstance(mop, list) or not mop:
            raise HistoryError(f"{where}: bad micro-op {mop!r}")
        if mop[0] == "send":
            if len(mop) not in (3, 4):
                raise HistoryError(f"{where}: send is [\"send\", key, value(, offset)], got {mop!r}")
            offset = mop[3] if len(mop) == 4 else None
            mops.append(Send(str(mop[1]), _hashable(mop[2]), None if offset is None else int(offset)))
        elif mop[0] == "poll":
            results: dict[str, list[tuple[int, Any]]] = {}
            if len(mop) > 1 and mop[1] is not None:
                if not isinstance(mop[1], dict):
                    raise HistoryError(f"{where}: poll results must be an object, got {mop[1]!r}")
                for key, pairs in mop[1].items():
                    results[str(key)] = [(int(offset), _hashable(v)) for offset, v in pairs]
            mops.append(Poll(results))
        else:
            raise HistoryError(f"{where}: unknown micro-op {mop[0]!r}")
    return mops


def _hashable(value: Any) -> Any:
    # JSON lists cannot be dict keys; values are compared by identity of content anyway.
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def iter_history(stream: io.TextIOBase | Iterable[str]) -> Iterator[Event]:
    for number, line in enumerate(stream):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as error:
            raise HistoryError(f"line {number}: not JSON: {error}") from None
        yield parse_event(obj, number)


def read_history(path: str | os.PathLike) -> list[Event]:
    with open(path, encoding="utf-8") as stream:
        return list(iter_history(stream))


def write_history(path: str | os.PathLike, events: Iterable[Event | dict]) -> None:
    with open(path, "w", encoding="utf-8") as stream:
        for event in events:
            line = event.to_json() if isinstance(event, Event) else event
            stream.write(json.dumps(line, separators=(",", ":")) + "\n")


class HistoryWriter:
    """Appends history lines as they happen; safe to share between threads. Each line is flushed so a
    crash of the recording process loses at most the line being written."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._stream = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the writer
        self._lock = threading.Lock()
        self._next_index = 0

    def record(self, process: Any, type_: str, f: str, value: Any = None, *, time: float | None = None,
               final: bool = False) -> int:
        """Write one line; returns its index. ``time`` defaults to ``time.time()``."""
        if type_ not in TYPES:
            raise HistoryError(f"type must be one of {sorted(TYPES)}, got {type_!r}")
        with self._lock:
            index = self._next_index
            self._next_index += 1
            event = Event(index, process, type_, f, value, _time.time() if time is None else time, final)
            self._stream.write(json.dumps(event.to_json(), separators=(",", ":")) + "\n")
            self._stream.flush()
            return index

    def close(self) -> None:
        with self._lock:
            self._stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def send(key: str, value: Any, offset: int | None = None) -> list:
    """A send micro-op as written in a history line."""
    return ["send", key, value] if offset is None else ["send", key, value, offset]


def poll(results: dict[str, list[tuple[int, Any]]] | None = None) -> list:
    """A poll micro-op as written in a history line."""
    if results is None:
        return ["poll"]
    return ["poll", {key: [[offset, value] for offset, value in pairs] for key, pairs in results.items()}]


# ---------------------------------------------------------------------------------------------- pairing


def pair(events: Iterable[Event]) -> tuple[list[Txn], list[Event]]:
    """Pairs each process's invoke with its next completion.

    Returns the transactions (in invocation order) and the per-process events (assign, subscribe,
    rebalance, crash) that happened. A crash, a second invoke before a completion, or the end of the
    history leaves the pending transaction indefinite ("info"): it may have committed. A completion
    without a value takes the invocation's micro-ops.
    """
    txns: list[Txn] = []
    process_events: list[Event] = []
    pending: dict[Any, tuple[Txn, Event]] = {}

    def leave_indefinite(process: Any) -> None:
        txn, invoke = pending.pop(process)
        txn.outcome = "info"
        txn.mops = parse_mops(invoke.value, f"history index {invoke.index}")

    for event in events:
        if event.f != TXN:
            if event.type == "invoke" or event.type == "fail":
                continue  # only events that (may have) happened reset expectations
            process_events.append(event)
            if event.f == "crash" and event.process in pending:
                leave_indefinite(event.process)
            continue
        if event.type == "invoke":
            if event.process in pending:
                leave_indefinite(event.process)
            # Micro-ops are parsed once, from the completion when it carries them (the usual case).
            txn = Txn(len(txns), event.index, event.process, "info", [], invoke_time=event.time,
                      final=event.final)
            txns.append(txn)
            pending[event.process] = (txn, event)
            continue
        if event.process in pending:
            txn, invoke = pending.pop(event.process)
        else:  # a completion whose invocation was not recorded
            txn, invoke = Txn(len(txns), event.index, event.process, "info", []), None
            txns.append(txn)
        txn.outcome = event.type
        txn.complete_time = event.time
        txn.complete_index = event.index
        txn.final = txn.final or event.final
        source = event if event.value is not None or invoke is None else invoke
        txn.mops = parse_mops(source.value, f"history index {source.index}")
    for process in list(pending):
        leave_indefinite(process)
    return txns, process_events
