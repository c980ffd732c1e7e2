"""The copier run with dense faults, repeated: a soak command, not a CI test (docs/verification.md).

    .venv/bin/python tests/transactions/copier_soak.py [--runs N] [--faults F] [--keep DIR]

Each run copies 100,000 records like tests/transactions/test_copier.py but with F faults (default 23)
every 4 % of the copy, broker and copier SIGKILLs alternating. It stops at the first failing run and
leaves that run's directory (broker data, broker log, copiers.log) under DIR (default: a new one
under $TMPDIR); passing runs are removed."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)]

from copier_run import run_copier


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--faults", type=int, default=23)
    parser.add_argument("--keep", type=Path, default=None, help="default: a new directory under $TMPDIR")
    args = parser.parse_args()
    args.keep = args.keep or Path(tempfile.mkdtemp(prefix="copier-soak-"))
    step = 0.96 / args.faults
    schedule = [(step * i, "broker" if i % 2 else "copier") for i in range(1, args.faults + 1)]
    for run in range(1, args.runs + 1):
        where = args.keep / f"run-{run}"
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        started = time.monotonic()
        try:
            run_copier(where, 100_000, schedule, deadline_s=900)
        except Exception:  # noqa: BLE001 - reported with the directory kept for reading
            traceback.print_exc()
            print(f"run {run} FAILED after {time.monotonic() - started:.0f} s; kept {where}", flush=True)
            return 1
        print(f"run {run} passed in {time.monotonic() - started:.0f} s", flush=True)
        shutil.rmtree(where)
    return 0


if __name__ == "__main__":
    sys.exit(main())
