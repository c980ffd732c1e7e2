"""A real crash: a child process appends and fsyncs, we SIGKILL it at random moments, and after every
reopen each batch it reported as flushed is there byte for byte and the log ends on a batch boundary."""

import os
import random
import select
import signal
import subprocess
import sys
import time

import pytest
from crash_child import CONFIG, batch_for
from log_batches import read_all_batches, record_body

from eoslog.log.manager import LogDirectory
from eoslog.log.scan import scan_batches
from eoslog.records import read_header

ROUNDS = 20
HERE = os.path.dirname(os.path.abspath(__file__))


def _run_and_kill(data_dir: str, seed: int, rng: random.Random) -> int:
    """Starts the writer, kills it with SIGKILL at a random moment; returns the highest flushed offset."""
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "crash_child.py"), data_dir, str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    flushed = 0
    try:
        deadline = time.monotonic() + 20
        buffer = b""
        opened = False
        kill_at = None
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(
                    "writer did not start: " + child.stderr.read1(4096).decode(errors="replace")
                )
            if kill_at is not None and time.monotonic() >= kill_at:
                break
            ready, _, _ = select.select([child.stdout], [], [], 0.005)
            if ready:
                chunk = os.read(child.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError("writer died: " + child.stderr.read().decode(errors="replace"))
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    word, value = line.split()
                    if word == b"flushed":
                        flushed = max(flushed, int(value))
                    elif word == b"opened" and not opened:
                        opened = True
                        kill_at = time.monotonic() + rng.uniform(0.02, 0.4)
    finally:
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate(timeout=10)
    # lines printed before the kill but not yet read still count: the child printed them after fsync
    for line in (buffer + rest).split(b"\n"):
        if line.startswith(b"flushed "):
            flushed = max(flushed, int(line.split()[1]))
    return flushed


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_never_loses_a_flushed_batch(tmp_path):
    data_dir = str(tmp_path / "data")
    rng = random.Random(int(os.environ.get("EOSLOG_CRASH_SEED", "20261121")))
    flushed_ever = 0
    recovered_rounds = 0
    started = time.monotonic()
    for round_number in range(ROUNDS):
        flushed_ever = max(flushed_ever, _run_and_kill(data_dir, round_number, rng))
        directory = LogDirectory.open(data_dir, CONFIG)
        log = directory.get_log("crash", 0)
        assert log is not None
        context = f"round {round_number}: {log.recovery_report}"
        recovered_rounds += bool(log.recovery_report.recovered_segments)
        print(
            f"round {round_number}: flushed {flushed_ever}, end {log.log_end_offset}, "
            f"cut {log.recovery_report.truncated_bytes} bytes"
        )
        assert log.log_end_offset >= flushed_ever, context
        batches = read_all_batches(log)
        offset = 0
        for base, raw in batches:
            assert base == offset, context
            expected = batch_for(base)
            assert record_body(raw) == record_body(expected), f"{context}: batch {base} differs"
            offset = base + read_header(expected).records_count
        assert offset == log.log_end_offset, context
        for segment in log.segments:  # every file ends exactly on a batch boundary
            size = os.path.getsize(segment.log_path)
            walked = sum(b.size for b in scan_batches(segment.fd, 0, size))
            assert walked == size == segment.size, context
        directory.close()
    assert flushed_ever > 0
    assert recovered_rounds > ROUNDS // 2  # the kills really left unflushed data to recover
    assert time.monotonic() - started < 60
