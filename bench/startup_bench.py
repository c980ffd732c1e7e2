"""Time-to-ready of `eoslog serve` against a bare asyncio server (issue 36's measure), of an embedded broker
(in this process), and the child's resident memory once ready.

Each child is timed from spawn to the moment its port file appears: eoslog writes it once its listener
accepts connections (`--port-file`), the bare server (a `python -c` that calls `asyncio.start_server` on
127.0.0.1:0 and nothing else) right after the same. One loop polls both, every millisecond. For eoslog the
bench then times a client's first Metadata answer; the bare server has nothing to answer, so the "answered"
ratio divides eoslog's answer by the bare server's listening. RSS is VmRSS from /proc/<pid>/status once
listening (for eoslog: after the first Metadata answer, an idle, empty broker). "CPU to listen" is the CPU
time the child had run when it was seen listening: load on the machine stretches it far less than wall
time, so it shows where a change went when the wall-time medians swing.

The machine is shared, so only a comparison within one run means much: the children take turns run by run
(the order rotating, so none always goes first), the ratios are of the medians of one run, and in brackets
is the spread of the ratios of the children started in the same turn. `--baseline-src DIR` adds
`eoslog serve` from another source tree (e.g. `git archive <rev> src | tar -x -C DIR`) to the turns.

Both trees are byte-compiled first (as `pip install` does), so the figures do not depend on whether this
shell sets PYTHONDONTWRITEBYTECODE; without .pyc files Python compiles eoslog's ~100 modules on every start.

Usage: python bench/startup_bench.py [--runs 10] [--baseline-src DIR] [--no-embedded]
"""

from __future__ import annotations

import argparse
import compileall
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from confluent_kafka.admin import AdminClient

import eoslog
from eoslog.testing.embedded import EmbeddedBroker

# The reference: what any asyncio server pays to listen on this machine (interpreter, site, asyncio).
BARE_SERVER = """\
import asyncio, os, sys

async def main():
    server = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", 0)
    with open(sys.argv[1] + ".tmp", "w") as port_file:
        port_file.write(f"{server.sockets[0].getsockname()[1]}\\n")
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    await asyncio.Event().wait()

asyncio.run(main())
"""

POLL_S = 0.001



class Run(NamedTuple):
    listening: float  # s from spawn
    answered: float  # s from spawn to the first Metadata answer (nan for the bare server)
    rss: float  # MiB
    cpu: float  # s of CPU the child had used when it was seen listening


def first_metadata(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=10)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """CPU time the process's threads have run so far (schedstat: nanoseconds, unlike /proc/PID/stat's
    10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended meanwhile
    return total / 1e9


class Child:
    """A server process, timed from spawn until its port file appears."""

    def __init__(self, command: list[str], port_file: Path, src: str) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": src}, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not port_file.exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"{command[:4]} exited with {self.process.returncode}")
            if time.perf_counter() - self.started > 30:
                self.process.kill()
                raise TimeoutError(f"{command[:4]} not listening within 30 s")
            time.sleep(POLL_S)
        self.listening = time.perf_counter() - self.started
        self.cpu = cpu_seconds(self.process.pid)
        self.bootstrap = f"127.0.0.1:{int(port_file.read_text())}"

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def bare_once(tmp: Path, src: str) -> Run:
    port_file = tmp / "bare-port"
    port_file.unlink(missing_ok=True)
    child = Child([sys.executable, "-c", BARE_SERVER, str(port_file)], port_file, src)
    rss = rss_mib(child.process.pid)
    child.stop()
    return Run(child.listening, math.nan, rss, child.cpu)


def process_once(data_dir: Path, src: str) -> Run:
    port_file = data_dir.parent / f"{data_dir.name}-port"
    # The command eoslog.tools.local.process.BrokerProcess runs for tests, on a port the system picks.
    child = Child([sys.executable, "-m", "eoslog", "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0",
                   "--port-file", str(port_file), "--set", "group.initial.rebalance.delay.ms=0"], port_file, src)
    try:
        first_metadata(child.bootstrap)
        answered = time.perf_counter() - child.started
        rss = rss_mib(child.process.pid)
    finally:
        child.stop()
    return Run(child.listening, answered, rss, child.cpu)


def embedded_once() -> Run:
    started = time.perf_counter()
    with EmbeddedBroker() as broker:
        listening = time.perf_counter() - started
        first_metadata(broker.bootstrap)
        answered = time.perf_counter() - started
    return Run(listening, answered, math.nan, math.nan)


def median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def report(name: str, runs: list[Run]) -> None:
    listening = [r.listening * 1000 for r in runs]
    line = f"{name:30s} listening after {median(runs, 'listening') * 1000:6.1f} ms ({min(listening):.0f}-" \
           f"{max(listening):.0f})"
    if not math.isnan(median(runs, "answered")):
        line += f"   first Metadata answered after {median(runs, 'answered') * 1000:6.1f} ms"
    if not math.isnan(median(runs, "cpu")):
        line += f"   CPU to listen {median(runs, 'cpu') * 1000:5.1f} ms"
    if not math.isnan(median(runs, "rss")):
        line += f"   RSS {median(runs, 'rss'):5.1f} MiB"
    print(f"{line}   (median of {len(runs)})")


def ratio(name: str, runs: list[Run], reference: list[Run], same_measure: bool) -> None:
    """Ratio of the medians, and in brackets the spread of the ratios of the pairs started in one turn.
    Against the bare server, which only listens, eoslog's answer is divided by the bare server's listening."""
    parts = []
    for field, label in (("listening", "listening"), ("answered", "answered"), ("cpu", "CPU to listen")):
        other = field if same_measure or field == "cpu" else "listening"
        pairs = [getattr(r, field) / getattr(b, other) for r, b in zip(runs, reference)]
        parts.append(f"{label} {median(runs, field) / median(reference, other):.2f}x "
                     f"({min(pairs):.2f}-{max(pairs):.2f})")
    print(f"{name:30s} " + "   ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline-src", default=None, metavar="DIR",
                        help="a source tree (the directory holding eoslog/) to compare `eoslog serve` against")
    parser.add_argument("--no-embedded", action="store_true", help="skip the in-process broker's runs")
    args = parser.parse_args()
    current_src = str(Path(eoslog.__file__).resolve().parent.parent)
    for src in filter(None, (current_src, args.baseline_src)):
        compileall.compile_dir(str(Path(src) / "eoslog"), quiet=1)
    embedded = [] if args.no_embedded else [embedded_once() for _ in range(args.runs)]
    results: dict[str, list[Run]] = {"bare": [], "current": [], "baseline": []}
    with tempfile.TemporaryDirectory() as tmp:
        turns = [("bare", lambda i: bare_once(Path(tmp), current_src)),
                 ("current", lambda i: process_once(Path(tmp) / f"c{i}", current_src))]
        if args.baseline_src:
            turns.append(("baseline", lambda i: process_once(Path(tmp) / f"b{i}", args.baseline_src)))
        for i in range(args.runs):
            shift = i % len(turns)
            for name, once in turns[shift:] + turns[:shift]:
                results[name].append(once(i))
    if embedded:
        report("embedded (in-process thread)", embedded)
    report("bare asyncio server", results["bare"])
    report("eoslog serve", results["current"])
    if args.baseline_src:
        report("eoslog serve, baseline tree", results["baseline"])
    ratio("eoslog serve / bare", results["current"], results["bare"], same_measure=False)
    if args.baseline_src:
        ratio("baseline tree / bare", results["baseline"], results["bare"], same_measure=False)
        ratio("this / baseline tree", results["current"], results["baseline"], same_measure=True)


if __name__ == "__main__":
    main()
