"""`eoslog serve` with probes: what the event loop waits for, one JSON line a second.

    .venv/bin/python bench/loop_probe.py --out probe.jsonl [--census-every 5] -- serve --data-dir D --listen H:P

Runs the broker as `eoslog serve ARGS` does, plus daemon threads that record, per second:
- ``lag``: how late a callback posted from another thread every 2 ms runs on the loop (count, p50, p99,
  max in ms): the time the loop is busy or stopped;
- ``gc0``/``gc1``/``gc2``: each collection of the garbage collector per generation, and how long it took;
- ``round``, ``deliver``, ``wait``: each syncfs round's length, the time from its end to its completion
  running on the loop, and the time a log waited from asking for a flush to the round that covered it;
- ``ready_to_write``: how long a response that became ready waited for its write (loop turns);
- ``write_buffered_mb``: the MB the connections' transports hold unsent (responses waiting for slow
  sockets) at the end of each second: in all, on the fullest connection, and how many connections have a
  file region parked until their socket drains;
- every ``--census-every`` seconds, the number of objects the collector tracks and the most common types.
Drive it with any load (e.g. bench/many_partitions_bench.py --bootstrap H:P --broker-pid PID). The probes
cost the broker something themselves (a thread that wakes every 2 ms, a callback per collection): compare
runs of the probe with each other, not with runs without it. This is how the section "The garbage
collector at 1,000 partitions" in docs/benchmarks.md found its cause.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import sys
import threading
import time
import weakref
from pathlib import Path

if not os.environ.get("PYTHONPATH"):  # PYTHONPATH=<tree>/src probes that tree's broker
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from eoslog.log import flusher
from eoslog.server import network, run

_connections: weakref.WeakSet = weakref.WeakSet()

_samples: dict[str, list[float]] = collections.defaultdict(list)


def _record(kind: str, seconds: float) -> None:
    _samples[kind].append(seconds)  # list.append is atomic under the GIL: safe from any thread


def _summary(values: list[float]) -> list[float]:
    values.sort()
    ms = [1000 * values[len(values) // 2], 1000 * values[min(len(values) - 1, int(0.99 * len(values)))],
          1000 * values[-1]]
    return [len(values), *(round(v, 2) for v in ms)]


def _watch_gc() -> None:
    started = [0.0]

    def on_collection(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            _record(f"gc{info['generation']}", time.perf_counter() - started[0])

    gc.callbacks.append(on_collection)


def _watch_rounds() -> None:
    """Wraps the group commit's syncfs round: its length, its hand-off to the loop, each log's wait."""
    asked: dict = {}
    run_round, join_round = flusher._SyncfsRound.run, flusher.GroupCommit._join_round
    finished = flusher.GroupCommit._round_finished

    def timed_run(self) -> None:
        run_round(self)
        self.ended = time.perf_counter()

    def timed_join(self, log, target):
        asked.setdefault(log, time.perf_counter())
        return join_round(self, log, target)

    def timed_finished(self, current, exc):
        now = time.perf_counter()
        _record("round", current.seconds)
        _record("deliver", now - getattr(current, "ended", now))
        for log in current.tasks:
            since = asked.pop(log, None)
            if since is not None:
                _record("wait", now - since)
        return finished(self, current, exc)

    flusher._SyncfsRound.run = timed_run
    flusher.GroupCommit._join_round = timed_join
    flusher.GroupCommit._round_finished = timed_finished


def _watch_connections() -> None:
    made = network.KafkaConnection.connection_made

    def connection_made(self, transport):
        _connections.add(self)
        return made(self, transport)

    network.KafkaConnection.connection_made = connection_made


def _watch_writes() -> None:
    """``ready_to_write``: from a response becoming ready (its future settled) to the drain that hands it to
    the transport: the turns a finished answer still waits on the loop."""
    ready_at: dict = {}
    on_ready, drain = network.KafkaConnection._on_response_ready, network.KafkaConnection._drain_ready

    def timed_ready(self, entry, future):
        ready_at[id(entry)] = time.perf_counter()
        return on_ready(self, entry, future)

    def timed_drain(self):
        now = time.perf_counter()
        for entry in self._pending:
            if entry[0] is None:
                break
            since = ready_at.pop(id(entry), None)
            if since is not None:
                _record("ready_to_write", now - since)
        return drain(self)

    network.KafkaConnection._on_response_ready = timed_ready
    network.KafkaConnection._drain_ready = timed_drain


def _write_buffered(loop) -> float:
    """MB the transports hold unsent; read on the loop (transports belong to it)."""
    done = threading.Event()
    total = [0, 0, 0]  # bytes, largest on one connection, connections with a region parked

    def count() -> None:
        for connection in list(_connections):
            transport = connection._transport
            if transport is not None and not connection.closed:
                size = transport.get_write_buffer_size()
                total[0] += size
                total[1] = max(total[1], size)
                total[2] += bool(getattr(connection, "_unsent", None))
        done.set()

    loop.call_soon_threadsafe(count)
    done.wait(5)
    return [round(total[0] / 1e6, 1), round(total[1] / 1e6, 1), total[2]]


def _watch_loop(out_path: str, census_every: float) -> None:
    make_loop = run.new_event_loop

    def new_event_loop():
        loop = make_loop()

        def lag() -> None:
            while True:
                posted = time.perf_counter()
                loop.call_soon_threadsafe(lambda posted=posted: _record("lag", time.perf_counter() - posted))
                time.sleep(0.002)

        def dump() -> None:
            last_census = 0.0
            with open(out_path, "a") as out:
                while True:
                    time.sleep(1.0)
                    line: dict = {"t": round(time.time(), 3), "write_buffered_mb": _write_buffered(loop)}
                    for kind in list(_samples):
                        values, _samples[kind] = _samples[kind], []
                        if values:
                            line[kind] = _summary(values)
                    if census_every and time.monotonic() - last_census >= census_every:
                        last_census = time.monotonic()
                        objects = gc.get_objects()
                        line["tracked"] = len(objects)
                        line["types"] = collections.Counter(type(o).__name__ for o in objects).most_common(10)
                        del objects
                    out.write(json.dumps(line) + "\n")
                    out.flush()

        threading.Thread(target=lag, name="probe-lag", daemon=True).start()
        threading.Thread(target=dump, name="probe-dump", daemon=True).start()
        return loop

    run.new_event_loop = new_event_loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON lines, one a second (appended)")
    parser.add_argument("--census-every", type=float, default=5.0, help="seconds; 0: never")
    parser.add_argument("eoslog_args", nargs=argparse.REMAINDER, help="-- then the eoslog command line")
    args = parser.parse_args()
    eoslog_args = args.eoslog_args[1:] if args.eoslog_args[:1] == ["--"] else args.eoslog_args
    _watch_gc()
    _watch_rounds()
    _watch_connections()
    _watch_writes()
    _watch_loop(args.out, args.census_every)
    from eoslog.cli import main as eoslog_main

    sys.argv = ["eoslog", *eoslog_args]
    eoslog_main(prog_name="eoslog")


if __name__ == "__main__":
    main()
