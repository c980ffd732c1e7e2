"""A timeline of `eoslog serve`'s produce path: request frames in, appends, syncfs rounds, answers written.

    .venv/bin/python bench/produce_timeline.py record --out T.json -- serve --data-dir D --listen H:P
    (drive it, e.g. eoslog bench --bootstrap H:P --partitions 1 --sizes 1024 --latency-rate 0;
     then kill -USR1 <pid>: the timeline is written to T.json and the broker exits)
    .venv/bin/python bench/produce_timeline.py show T.json [--at SECONDS] [--span MS]

``record`` runs the broker as `eoslog serve ARGS` does, with the event loop's steps wrapped: each complete
request frame (its size), each append to a log (bytes, time taken), each syncfs round started (how many
logs it covers), the syncfs call itself (in its thread: its length), the round's completion on the loop,
and each write of responses. ``show`` summarises the phase of large appends (the throughput run) and
prints the events of a window of it, in ms from its start. It answers what a probe of medians cannot:
whether a producer's requests overlap, or each waits for the previous answer (one producer on one
connection: answers are written in request order) (docs/benchmarks.md, "Target 1 measured again
on 2026-11-27"). The wrappers cost the broker a little; compare timelines with timelines.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

if not os.environ.get("PYTHONPATH"):  # PYTHONPATH=<tree>/src records that tree's broker
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

_events: list[tuple] = []


def _watch() -> None:
    from eoslog.log import flusher
    from eoslog.log import log as log_module
    from eoslog.server import network

    clock, record = time.perf_counter, _events.append  # list.append is atomic under the GIL
    append_checked = log_module.Log.append_checked

    def timed_append(self, view, headers, **kwargs):
        started = clock()
        result = append_checked(self, view, headers, **kwargs)
        record((started, "append", len(view), clock() - started))
        return result

    start_round = flusher.GroupCommit._start_round

    def timed_start_round(self):
        record((clock(), "round_start", len(self._next_round)))
        return start_round(self)

    run_round = flusher._SyncfsRound.run

    def timed_run(self):
        started = clock()
        run_round(self)
        record((started, "syncfs", clock() - started))

    finished = flusher.GroupCommit._round_finished

    def timed_finished(self, current, exc):
        record((clock(), "round_done", len(current.tasks)))
        return finished(self, current, exc)

    on_frame = network.KafkaConnection._on_frame

    def timed_frame(self, frame):
        record((clock(), "frame", len(frame)))
        return on_frame(self, frame)

    write_pieces = network.KafkaConnection._write_pieces

    def timed_write(self, pieces):
        record((clock(), "write", len(pieces)))
        return write_pieces(self, pieces)

    log_module.Log.append_checked = timed_append
    flusher.GroupCommit._start_round = timed_start_round
    flusher._SyncfsRound.run = timed_run
    flusher.GroupCommit._round_finished = timed_finished
    network.KafkaConnection._on_frame = timed_frame
    network.KafkaConnection._write_pieces = timed_write


def record(out: str, eoslog_args: list[str]) -> None:
    def dump(*_):
        with open(out, "w") as f:
            json.dump(_events, f)
        os._exit(0)

    signal.signal(signal.SIGUSR1, dump)  # the broker handles TERM and INT itself
    _watch()
    from eoslog.cli import main as eoslog_main

    sys.argv = ["eoslog", *eoslog_args]
    eoslog_main(prog_name="eoslog")


def show(path: str, at: float, span_ms: float) -> None:
    with open(path) as f:
        events = sorted(json.load(f), key=lambda e: e[0])
    large = [e for e in events if e[1] == "append" and e[2] > 100_000]
    if not large:
        sys.exit("no append over 100 KB in this timeline")
    first, last = large[0][0], large[-1][0]
    phase = [e for e in events if first - 0.01 <= e[0] <= last + 0.05]
    seconds = last - first
    syncs = sorted(e[2] for e in phase if e[1] == "syncfs")
    print(f"phase {seconds:.3f} s: {len(large)} appends, {sum(e[2] for e in large) / 1e6:.1f} MB; append "
          f"p50 {1000 * statistics.median(e[3] for e in large):.2f} ms, busy {sum(e[3] for e in large) / seconds:.0%}")
    if syncs:
        print(f"syncfs: {len(syncs)} rounds, p50 {1000 * statistics.median(syncs):.2f} ms, "
              f"p90 {1000 * syncs[int(0.9 * len(syncs))]:.2f} ms, busy {sum(syncs) / seconds:.0%}")
    frames = [e[0] for e in phase if e[1] == "frame" and e[2] > 100_000]
    writes = [e[0] for e in phase if e[1] == "write"]
    overlapped, gaps = 0, []
    for index, arrived in enumerate(frames):
        written = bisect.bisect_left(writes, arrived)  # writes of answers before this frame was complete
        overlapped += index > written
        if written:
            gaps.append(arrived - writes[written - 1])
    print(f"large frames complete while an earlier one was still unanswered: {overlapped} of {len(frames)}")
    if gaps:
        gaps.sort()
        print("from the last answer written to the next large frame complete: p10 / p50 / p90 "
              + " / ".join(f"{1000 * gaps[int(q * len(gaps))]:.2f}" for q in (0.1, 0.5, 0.9)) + " ms")
    start = first + at
    for e in phase:
        if start <= e[0] <= start + span_ms / 1000:
            print(f"{1000 * (e[0] - start):8.2f}  {e[1]:<11} {' '.join(str(round(v, 5)) for v in e[2:])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("--out", required=True)
    rec.add_argument("eoslog_args", nargs=argparse.REMAINDER, help="-- then the eoslog command line")
    sh = sub.add_parser("show")
    sh.add_argument("path")
    sh.add_argument("--at", type=float, default=2.0, help="seconds into the phase of large appends")
    sh.add_argument("--span", type=float, default=25.0, help="ms of events to print")
    args = parser.parse_args()
    if args.command == "record":
        eoslog_args = args.eoslog_args[1:] if args.eoslog_args[:1] == ["--"] else args.eoslog_args
        record(args.out, eoslog_args)
    else:
        show(args.path, args.at, args.span)


if __name__ == "__main__":
    main()
