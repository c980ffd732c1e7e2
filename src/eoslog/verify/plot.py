"""Throughput over time with fault windows shaded, as a PNG (matplotlib, imported only here).

Uses matplotlib's object API with the Agg canvas directly: no pyplot, so no global backend or figure
state is touched in the process that calls it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eoslog.verify.history import Event, pair, parse_event, read_history

_OUTCOME_STYLE = {"ok": ("committed", "tab:green"), "fail": ("aborted", "tab:orange"),
                  "info": ("indefinite", "tab:red")}
_FAULT_COLOURS = ("tab:gray", "tab:purple", "tab:blue", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")


def _fault_window(fault: Any) -> tuple[float, float, str]:
    """(start, end, label) from a tuple, a dict with start/end/label (or kind), or an object with
    ``time`` and ``kind`` (a point event, such as a FaultProxy FaultEvent)."""
    if isinstance(fault, dict):
        start = float(fault["start"] if "start" in fault else fault["time"])
        return start, float(fault.get("end", start)), str(fault.get("label", fault.get("kind", "fault")))
    if hasattr(fault, "time") and hasattr(fault, "kind"):
        return float(fault.time), float(fault.time), str(fault.kind)
    start, end, label = fault
    return float(start), float(end), str(label)


def plot(history: str | os.PathLike | Iterable[Event | dict], faults: Iterable[Any], path: str | os.PathLike,
         *, bin_seconds: float | None = None, title: str | None = None) -> Path:
    """Write a PNG of transactions completed per second (committed / aborted / indefinite) over time,
    with each fault window shaded and point faults drawn as thin lines. ``faults`` share the history's
    time base (``time.time()`` seconds), e.g. ``FaultProxy.fault_windows()``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if isinstance(history, (str, os.PathLike)):
        events = read_history(history)
    else:
        events = [e if isinstance(e, Event) else parse_event(e, i) for i, e in enumerate(history)]
    txns, _ = pair(events)
    times = [event.time for event in events if event.time is not None]
    windows = [_fault_window(fault) for fault in faults]
    origin = min(times + [start for start, _, _ in windows], default=0.0)
    end = max(times + [stop for _, stop, _ in windows], default=origin + 1.0)
    span = max(end - origin, 1e-3)
    if bin_seconds is None:  # about 100 bins, rounded to a readable width
        bin_seconds = max(span / 100.0, 0.001)
        bin_seconds = 10 ** math.floor(math.log10(bin_seconds)) * (
            1 if bin_seconds < 2 * 10 ** math.floor(math.log10(bin_seconds)) else 5)
    bins = int(span // bin_seconds) + 1
    counts = {outcome: [0] * bins for outcome in _OUTCOME_STYLE}
    for txn in txns:
        at = txn.complete_time if txn.complete_time is not None else txn.invoke_time
        if at is not None:
            counts[txn.outcome][min(int((at - origin) // bin_seconds), bins - 1)] += 1

    figure = Figure(figsize=(11, 4.5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    xs = [i * bin_seconds for i in range(bins)]
    for outcome, (label, colour) in _OUTCOME_STYLE.items():
        if any(counts[outcome]):
            axes.step(xs, [c / bin_seconds for c in counts[outcome]], where="post", label=label, color=colour)
    colours: dict[str, str] = {}
    for start, stop, label in windows:
        colour = colours.setdefault(label, _FAULT_COLOURS[len(colours) % len(_FAULT_COLOURS)])
        first = label not in axes.get_legend_handles_labels()[1]
        if stop > start:
            axes.axvspan(start - origin, stop - origin, color=colour, alpha=0.18, label=label if first else None)
        else:
            axes.axvline(start - origin, color=colour, alpha=0.5, linewidth=0.8, label=label if first else None)
    axes.set_xlabel("seconds since start")
    axes.set_ylabel(f"transactions / s ({bin_seconds:g} s bins)")
    axes.set_title(title or "throughput and faults")
    axes.set_xlim(0, span)
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    handles, _labels = axes.get_legend_handles_labels()
    if handles:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    figure.tight_layout()
    output = Path(path)
    figure.savefig(output, format="png")
    return output
