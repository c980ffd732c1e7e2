"""`eoslog bench --plot`: one PNG comparing the targets of a run at a glance (matplotlib, imported only here).

Four panels, each grouped by message size with one bar per target: produce and consume throughput (MB/s),
and the produce latency percentiles of the paced run (the broker's round trip) and of the throughput run
(mostly queueing in the client). A latency bar is the p99, with the p50 drawn over it in full colour.
Like eoslog.verify.plot it uses the Agg canvas directly, not pyplot, so no global state is touched.
"""

from __future__ import annotations

import os
from pathlib import Path

from eoslog.loadgen.report import BenchReport, SizeResult

_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")


def plot(report: BenchReport, path: str | os.PathLike, *, title: str | None = None) -> Path:
    """Writes the PNG and returns its path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    sizes = list(report.settings.sizes)
    figure = Figure(figsize=(12, 8), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, 2)
    panels = [
        (axes[0][0], "produce throughput", "MB/s", lambda r: (r.produce.mb_per_s, None)),
        (axes[0][1], "consume throughput", "MB/s", lambda r: (r.consume.mb_per_s, None)),
        (axes[1][0], f"produce latency, paced run ({report.settings.latency_rate:g} msgs/s)", "ms",
         lambda r: (r.paced.latency.p50_ms, r.paced.latency.p99_ms) if r.paced else (None, None)),
        (axes[1][1], "produce latency, throughput run (p50 over p99)", "ms",
         lambda r: (r.produce.latency.p50_ms, r.produce.latency.p99_ms)),
    ]
    count = max(1, len(report.targets))
    width = 0.8 / count
    for ax, label, unit, values in panels:
        for t, target in enumerate(report.targets):
            colour = _COLOURS[t % len(_COLOURS)]
            for s, size in enumerate(sizes):
                result: SizeResult | None = target.for_size(size)
                if result is None:
                    continue
                main, tail = values(result)
                if main is None:
                    continue
                x = s - 0.4 + width * (t + 0.5)
                if tail is not None:
                    ax.bar(x, tail, width * 0.9, color=colour, alpha=0.35)
                    ax.text(x, tail, f"{tail:.3g}", ha="center", va="bottom", fontsize=7)
                ax.bar(x, main, width * 0.9, color=colour)
                ax.text(x, main, f"{main:.3g}", ha="center", va="bottom" if tail is None else "top",
                        fontsize=7, color="black" if tail is None else "white")
        ax.set_title(label)
        ax.set_ylabel(unit + (" (log scale)" if unit == "ms" else ""))
        ax.set_xticks(range(len(sizes)), [f"{size} B" for size in sizes])
        if unit == "ms":
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
    # The partition count belongs in the legend: the mock always makes 4, whatever the run asked for.
    handles = [Patch(color=_COLOURS[t % len(_COLOURS)],
                     label=target.name + (f" ({target.results[0].partitions} partitions)" if target.results
                                          else ""))
               for t, target in enumerate(report.targets)]
    figure.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    s = report.settings
    configs = "".join(f", {name}={value}" for name, value in s.topic_configs)
    figure.suptitle(title or f"eoslog bench: acks={s.acks} idempotent={s.idempotent}, "
                             f"linger.ms={s.linger_ms:g}{configs}")
    out = Path(path)
    figure.savefig(out)
    return out
