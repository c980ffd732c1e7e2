"""What the fetch path's CRC check costs (issue 38, log/checked_read.py): one partition log read from
start to end in fetch-sized reads, each read sent with ``os.sendfile`` into a socket drained by a thread,
with the check off (what the broker did before) and on, alternating rounds so a machine getting busier
favours neither. Prints MB/s and CPU seconds of both and their ratios, from one run.

    PYTHONPATH=src python bench/fetch_crc_bench.py [--mb 64] [--batch 16384] [--fetch 1048576] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import threading
import time

from eoslog.log import Log, LogConfig
from eoslog.records.builder import build_simple


def fill(directory: str, total: int, batch: int) -> tuple[Log, int, int]:
    """The log, filled with copies of one batch: (log, the batch's size, its record count)."""
    log = Log.open(directory, LogConfig(segment_bytes=256 << 20), clock=lambda: 5_000_000)
    records = max(batch // 1024, 1)
    value = os.urandom(1000)
    one = build_simple([(b"k%d" % i, value) for i in range(records)], base_timestamp=1_700_000_000_000)
    while log.size < total:
        log.append(one)
    log.flush()
    return log, len(one), records


def drain(sock: socket.socket) -> None:
    while sock.recv(1 << 20):
        pass


def one_pass(log: Log, shape: tuple[int, int], fetch: int, verify: bool) -> tuple[float, float, int]:
    batch_size, records = shape
    sender, receiver = socket.socketpair()
    thread = threading.Thread(target=drain, args=(receiver,), daemon=True)
    thread.start()
    sent = 0
    wall, cpu = time.perf_counter(), time.process_time()
    offset = 0
    while offset < log.log_end_offset:
        result = log.read(offset, fetch, verify_crc=verify)
        for region in result.regions:
            done = 0
            while done < region.length:
                done += os.sendfile(sender.fileno(), region.fd, region.position + done, region.length - done)
        sent += result.size
        offset += result.size // batch_size * records  # every batch is a copy of one: no header walk here
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    sender.close()
    thread.join()
    receiver.close()
    return wall, cpu, sent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16384)
    parser.add_argument("--fetch", type=int, default=1 << 20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fetch-crc-") as tmp:
        log, *shape = fill(os.path.join(tmp, "bench-0"), args.mb << 20, args.batch)
        one_pass(log, shape, args.fetch, False)  # page cache warm for both
        figures: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
        for r in range(args.rounds):
            for verify in (False, True) if r % 2 == 0 else (True, False):
                figures[verify].append(one_pass(log, shape, args.fetch, verify))
        log.close()
    print(f"log {args.mb} MiB, batches ~{args.batch} B, fetch {args.fetch} B, {args.rounds} rounds (median)")
    medians = {}
    for verify, rows in figures.items():
        wall = statistics.median(w for w, _, _ in rows)
        cpu = statistics.median(c for _, c, _ in rows)
        sent = rows[0][2]
        medians[verify] = (wall, cpu)
        label = "CRC checked" if verify else "unchecked  "
        print(f"  {label}: {sent / wall / 1e6:8.0f} MB/s  wall {wall:.3f} s  cpu {cpu:.3f} s")
    print(f"  ratio checked/unchecked: wall {medians[True][0] / medians[False][0]:.2f}x, "
          f"cpu {medians[True][1] / medians[False][1]:.2f}x")


if __name__ == "__main__":
    main()
