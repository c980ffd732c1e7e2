"""A tiny builder for hand-written histories in tests."""

from __future__ import annotations

from eoslog.verify.history import poll, send

__all__ = ["History", "poll", "send"]


class History:
    def __init__(self) -> None:
        self.lines: list[dict] = []
        self.clock = 1000.0

    def _add(self, process, type_: str, f: str, value=None, final: bool = False) -> None:
        self.clock += 0.01
        line = {"index": len(self.lines), "time": self.clock, "process": process, "type": type_, "f": f}
        if value is not None:
            line["value"] = value
        if final:
            line["final"] = True
        self.lines.append(line)

    def invoke(self, process, mops: list, final: bool = False) -> History:
        self._add(process, "invoke", "txn", mops, final)
        return self

    def complete(self, process, outcome: str, mops: list | None = None, final: bool = False) -> History:
        self._add(process, outcome, "txn", mops, final)
        return self

    def txn(self, process, outcome: str, mops: list, final: bool = False) -> History:
        """An invocation (sends without offsets, polls without results) and its completion ``mops``."""
        invoked = [m[:3] if m[0] == "send" else ["poll"] for m in mops]
        return self.invoke(process, invoked, final).complete(process, outcome, mops, final)

    def event(self, process, f: str, value=None, type_: str = "ok") -> History:
        self._add(process, type_, f, value)
        return self
