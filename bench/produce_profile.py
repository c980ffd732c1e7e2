"""Where a Produce request's time goes: py-spy samples of an `eoslog serve` process under a steady
confluent-kafka producer (idempotent, acks=all, one partition), turned into microseconds per request
by stage. Results: docs/benchmarks.md, "Where a produce request's time goes".

    PYTHONPATH=src .venv/bin/python bench/produce_profile.py --size 1024 --fsync-on-ack true

Needs py-spy (pip install py-spy) and permission to ptrace the broker (root, or ptrace_scope 0).
Requests are counted as record batches appended during the sampling window (librdkafka sends one
batch per partition per Produce request).
"""

from __future__ import annotations

import argparse
import collections
import glob
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from eoslog.loadgen.bench import BenchSettings, _job_prepare_topic, _job_produce
from eoslog.testing.process import BrokerProcess

TOPIC = "profile"

# (substring of a frame, stage); the frame nearest the leaf that matches decides a sample's stage.
STAGES = [
    ("FlushTask.run", "fsync (worker thread)"),
    ("FsyncThread._run", "fsync thread: waiting for work"),
    ("epoll_wait", "idle: waiting in epoll"),
    ("decode_request", "decode request"),
    ("encode_response", "encode response"),
    ("write_fully", "append: write(2) to the segment"),
    ("Log.append", "append: header parse, CRC, offsets, index"),
    ("Partition.append", "validation: producer state, partition checks"),
    ("Dispatcher.dispatch", "dispatch and produce handler"),
    ("_await_durability", "dispatch and produce handler"),
    ("GroupCommit", "group commit: prepare, schedule, complete"),
    ("_flush_loop", "group commit: prepare, schedule, complete"),
    ("_advance_high_watermark", "high watermark and waiters"),
    ("_write_pieces", "response write"),
    ("_drain_ready", "response write"),
    ("_on_response_ready", "response write"),
    ("UVStream", "response write"),
    ("buffer_updated", "frame read"),
    ("get_buffer", "frame read"),
    ("FrameReader", "frame read"),
    ("uv__read", "frame read"),
    ("_run_once", "event loop"),
    ("run_forever", "event loop"),
    # Without --native, uvloop's C (epoll wait, socket reads and writes) shows as its Python caller.
    ("run (eoslog/server/run.py", "uvloop: epoll wait + socket I/O (C)"),
]


def count_batches(data_dir: Path) -> int:
    total = 0
    for path in glob.glob(str(data_dir / f"{TOPIC}-0" / "*.log")):
        with open(path, "rb") as file:
            data = file.read()
        position = 0
        while position + 12 <= len(data):
            length = struct.unpack_from(">i", data, position + 8)[0]
            if length <= 0 or position + 12 + length > len(data):
                break
            total += 1
            position += 12 + length
    return total


def classify(frames: list[str]) -> str:
    for frame in reversed(frames):
        for needle, stage in STAGES:
            if needle in frame:
                return stage
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--fsync-on-ack", default="true", choices=["true", "false"])
    parser.add_argument("--seconds", type=float, default=8.0, help="sampling window")
    parser.add_argument("--warm-up", type=float, default=3.0)
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--native", action="store_true", help="py-spy --native (C frames of uvloop)")
    parser.add_argument("--raw", help="keep py-spy's raw output here")
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    work = Path(tempfile.mkdtemp(prefix="eoslog-profile-"))
    raw = Path(args.raw) if args.raw else work / "profile.raw"
    settings = BenchSettings(sizes=(args.size,), messages=5_000_000, seconds=args.warm_up + args.seconds + 4,
                             partitions=1, latency_rate=0)
    with BrokerProcess(data_dir=work / "data", properties={"log.eoslog.fsync.on.ack": args.fsync_on_ack}) as broker, \
            ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        pool.submit(_job_prepare_topic, broker.bootstrap, TOPIC, 1, {}, 30.0).result()
        produce = pool.submit(_job_produce, broker.bootstrap, TOPIC, args.size, settings, False)
        time.sleep(args.warm_up)
        before, started = count_batches(broker.data_dir), time.monotonic()
        command = [py_spy, "record", "-p", str(broker.process.pid), "-r", str(args.rate), "-d",
                   str(int(args.seconds)), "-f", "raw", "-o", str(raw), "--idle", "--threads"]
        # --native pauses the broker for each sample (slower, but it names uvloop's C frames)
        command.append("--native" if args.native else "--nonblocking")
        spy = subprocess.run(command, check=False, capture_output=True, text=True)
        if spy.returncode != 0:
            raise SystemExit(f"py-spy failed: {spy.stderr.strip() or spy.stdout.strip()}")
        after, window = count_batches(broker.data_dir), time.monotonic() - started
        result = produce.result()
    requests = after - before
    by_thread: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        by_thread[frames[0]][classify(frames[1:])] += int(count)
    main_thread = max(by_thread, key=lambda t: sum(by_thread[t].values()) if "MainThread" in t else -1)
    print(f"{args.size} B, fsync.on.ack={args.fsync_on_ack}: {result.mb_per_s:.1f} MB/s over the run; "
          f"{requests} Produce requests in {window:.1f} s = {requests / window:.0f}/s, "
          f"{window / max(requests, 1) * 1e6:.0f} us each")
    for thread, stages in by_thread.items():
        total = sum(stages.values())
        label = "event loop thread" if thread == main_thread else thread
        print(f"\n{label}: {total} samples")
        for stage, count in stages.most_common():
            share = count / total
            print(f"  {stage:48s} {100 * share:5.1f}%  {share * window / max(requests, 1) * 1e6:7.0f} us/request")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
