"""Partition-log throughput against the raw system calls it is built on, measured in the same run.

    .venv/bin/python bench/log_bench.py [--quick] [--dir DIR]

Rows: Log.append (validate + copy once + offsets + os.write) vs os.write of the same bytes, without and
with an fsync per append; Log.read (index lookup + header walk -> FileRegions, then os.pread of them) vs
os.pread of the same ranges; GroupCommit with N concurrent acks=all producers (appends/s, fsyncs). Disk
figures on a shared VM swing run to run: compare the ratios, which come from one run, not the absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import struct
import sys
import tempfile
import time

from crc32c import crc32c

from eoslog.log import Log, LogConfig
from eoslog.log.flusher import GroupCommit
from eoslog.records.header import HEADER

MiB = 1024 * 1024


def make_batch(size: int, seed: int) -> bytes:
    """One uncompressed batch of about ``size`` bytes holding a single record (the log never looks
    inside, so one record is as good as many)."""
    value = bytes([seed % 251]) * max(size - 61 - 20, 1)
    body = bytearray(b"\x00\x00\x00")  # attributes, timestamp delta, offset delta
    body += b"\x01" + _varint(len(value)) + value + b"\x00"  # null key, value, no headers
    record = _varint(len(body)) + bytes(body)
    header = bytearray(HEADER.size)
    HEADER.pack_into(
        header,
        0,
        0,
        HEADER.size - 12 + len(record),
        -1,
        2,
        0,
        0,
        0,
        1_700_000_000_000,
        1_700_000_000_000,
        -1,
        -1,
        -1,
        1,
    )
    batch = header + record
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fresh(root: str, name: str) -> str:
    path = os.path.join(root, name)
    shutil.rmtree(path, ignore_errors=True)
    return path


def _raw_append(root: str, batch: bytes, count: int, fsync: bool) -> float:
    path = _fresh(root, "raw")
    os.makedirs(path)
    fd = os.open(os.path.join(path, "raw.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        view = memoryview(batch)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    shutil.rmtree(path)  # unlinking drops the dirty pages, so the next run starts from the same state
    return elapsed


def _log_append(root: str, batch: bytes, count: int, fsync: bool) -> float:
    config = LogConfig(segment_bytes=1 << 30, retention_ms=-1, file_delete_delay_ms=0)
    log = Log.open(_fresh(root, "log-0"), config)
    log.flush()
    start = time.perf_counter()
    for _ in range(count):
        log.append(batch)
        if fsync:
            log.flush()
    elapsed = time.perf_counter() - start
    log.close()
    shutil.rmtree(log.directory)
    return elapsed


def bench_append(root: str, batch: bytes, count: int, fsync: bool, attempts: int = 5) -> tuple[float, float]:
    """(raw seconds, log seconds) to write ``count`` copies of ``batch``: best of ``attempts``, the two
    alternating which goes first so neither always meets the other's leftover writeback."""
    raw_best = log_best = float("inf")
    for attempt in range(attempts):
        order = (_raw_append, _log_append) if attempt % 2 == 0 else (_log_append, _raw_append)
        for run in order:
            elapsed = run(root, batch, count, fsync)
            if run is _raw_append:
                raw_best = min(raw_best, elapsed)
            else:
                log_best = min(log_best, elapsed)
    return raw_best, log_best


def bench_read(root: str, batch: bytes, count: int, fetch_bytes: int) -> tuple[float, float]:
    """(raw seconds, log seconds) to read the whole log in fetches of ``fetch_bytes``; warm cache."""
    log = Log.open(_fresh(root, "read-0"), LogConfig(segment_bytes=1 << 30, index_interval_bytes=4096))
    for _ in range(count):
        log.append(batch)
    log.flush()
    ranges = []
    offset = 0
    while offset < log.log_end_offset:  # the ranges a consumer's fetches cover, for the raw baseline
        result = log.read(offset, fetch_bytes)
        ranges.extend((r.fd, r.position, r.length) for r in result.regions)
        offset += max(1, result.size // len(batch))
    raw_best = log_best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for fd, position, length in ranges:
            os.pread(fd, length, position)
        raw_best = min(raw_best, time.perf_counter() - start)
        start = time.perf_counter()
        offset = 0
        end = log.log_end_offset
        per_batch = len(batch)
        while offset < end:
            result = log.read(offset, fetch_bytes)
            for region in result.regions:
                os.pread(region.fd, region.length, region.position)
            offset += result.size // per_batch  # one record per batch: offsets advance by batches
        log_best = min(log_best, time.perf_counter() - start)
    log.close()
    shutil.rmtree(log.directory)
    return raw_best, log_best


async def _group_commit_run(
    logs: list[Log], commit: GroupCommit, producers: int, seconds: float, batch: bytes
) -> int:
    done = 0
    stop = time.perf_counter() + seconds

    async def producer(log: Log) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            log.append(batch)
            await commit.flush(log)
            done += 1

    await asyncio.gather(*(producer(log) for log in logs for _ in range(producers)))
    return done


def bench_group_commit(root: str, producers: int, seconds: float, logs: int = 1) -> tuple[float, float, float]:
    """(acked appends/s, fsyncs/s, mean waiters per fsync) for ``producers`` concurrent acks=all writers
    on each of ``logs`` logs (partitions)."""
    opened = [Log.open(_fresh(root, f"gc-{i}"), LogConfig()) for i in range(logs)]
    for log in opened:
        log.flush()
    commit = GroupCommit()
    batch = make_batch(1024, 7)
    start = time.perf_counter()
    appends = asyncio.run(_group_commit_run(opened, commit, producers, seconds, batch))
    elapsed = time.perf_counter() - start
    fsyncs = sum(commit.fsync_count(log) for log in opened)
    commit.close()
    for log in opened:
        log.close()
        shutil.rmtree(log.directory)
    return appends / elapsed, fsyncs / elapsed, appends / max(fsyncs, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller volumes (a smoke run)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir in /tmp)")
    args = parser.parse_args()
    scale = 0.125 if args.quick else 1.0
    root = tempfile.mkdtemp(prefix="eoslog-log-bench-", dir=args.dir)
    print(
        f"# eoslog log bench, python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d %H:%M')}, dir {root}"
    )
    try:
        rows = []
        for label, size, plain_total, fsync_total in [
            ("1 MiB", MiB, 64 * MiB, 32 * MiB),
            ("16 KiB", 16 * 1024, 32 * MiB, 4 * MiB),
        ]:
            batch = make_batch(size, 1)
            for fsync, total in ((False, plain_total), (True, fsync_total)):
                count = max(int(total * scale) // len(batch), 4)
                raw, logged = bench_append(root, batch, count, fsync)
                volume = count * len(batch) / MiB
                rows.append(
                    (f"append {label}" + (" + fsync each" if fsync else ""), volume / raw, volume / logged)
                )
            count = max(int(plain_total * scale) // len(batch), 4)
            raw, logged = bench_read(root, batch, count, MiB)
            volume = count * len(batch) / MiB
            rows.append((f"read {label} batches, 1 MiB fetches", volume / raw, volume / logged))
        print()
        print("| operation | raw syscalls MiB/s | Log MiB/s | Log / raw |")
        print("|---|---:|---:|---:|")
        for name, raw_rate, log_rate in rows:
            print(f"| {name} | {raw_rate:,.0f} | {log_rate:,.0f} | {log_rate / raw_rate:.2f}x |")
        print()
        print("| logs | acks=all producers per log (1 KiB appends) | acked appends/s | fsyncs/s "
              "| appends per fsync |")
        print("|---:|---:|---:|---:|---:|")
        for logs, producers in ((1, 1), (1, 4), (1, 16), (1, 64), (8, 1), (8, 4)):
            rate, fsyncs, per = bench_group_commit(root, producers, 2.0 * max(scale, 0.5), logs)
            print(f"| {logs} | {producers} | {rate:,.0f} | {fsyncs:,.0f} | {per:.1f} |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
