"""Resident memory of an `eoslog serve` process: idle after start, then under the produce benchmark.

Starts the broker as a child process (as an operator would), reads VmRSS from /proc/<pid>/status once it
answers Metadata (idle), then runs `eoslog bench --bootstrap ...` against it (by default 8 partitions,
1 KiB and 100 B, acks=all idempotent: the issue-16 workload) while sampling VmRSS every 100 ms. Prints idle
RSS, the median and maximum of the samples under load, and VmHWM (the kernel's peak) at the end.

Usage: python bench/memory_bench.py [--partitions 8] [--sizes 1024,100] [--seconds 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from eoslog.testing.process import BrokerProcess


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--sizes", default="1024,100")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(data_dir=Path(tmp) / "data") as broker:
        pid = broker.process.pid
        AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        time.sleep(1.0)  # let start-up garbage settle
        idle = status_kib(pid, "VmRSS")
        samples: list[int] = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.1):
                samples.append(status_kib(pid, "VmRSS"))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        command = [sys.executable, "-m", "eoslog", "bench", "--bootstrap", broker.bootstrap,
                   "--partitions", str(args.partitions), "--sizes", args.sizes, "--seconds", str(args.seconds)]
        subprocess.run(command, check=True)
        done.set()
        sampler.join()
        peak = status_kib(pid, "VmHWM")
        after = status_kib(pid, "VmRSS")
    mib = 1024
    print(f"command: {' '.join(command[1:])}")
    print(f"idle RSS after start            {idle / mib:7.1f} MiB")
    print(f"RSS under load, median of {len(samples):4d}  {statistics.median(samples) / mib:7.1f} MiB")
    print(f"RSS under load, max sample      {max(samples) / mib:7.1f} MiB")
    print(f"VmHWM (peak RSS of the process) {peak / mib:7.1f} MiB")
    print(f"RSS after the load              {after / mib:7.1f} MiB")


if __name__ == "__main__":
    main()
