"""Crash at every file operation of a cleaning pass's swap, then recover: nothing is lost, nothing doubled."""

from __future__ import annotations

import os
import random

import pytest
from cleaner_helpers import Clock, clean_once, latest_by_key, open_log, put, records

from eoslog.log.cleaner_pass import cleaned_paths


class SimulatedCrash(BaseException):
    """Not an Exception: nothing on the way up may catch it, like a process dying."""


def _fill(log, seed=7, batches=60):
    rnd = random.Random(seed)
    for i in range(batches):
        put(log, [(f"k{rnd.randrange(30)}", None if rnd.random() < 0.1 else f"v{i}-{j}") for j in range(4)])
    log.roll()


def _abandon(log):
    """What a crash leaves of an open Log: its descriptors just go away, nothing is flushed."""
    for segment in log.segments:
        segment.close()


def _check_recovered(directory, expected_latest, end, clock):
    log = open_log(directory, clock)
    rows = records(log)
    offsets = [r[0] for r in rows]
    assert offsets == sorted(set(offsets)), "offsets doubled or out of order after recovery"
    assert latest_by_key(rows) == expected_latest
    assert log.log_end_offset == end
    names = os.listdir(directory)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    return log


def _crash_at_every_operation(tmp_path, prepare_passes, process=True):
    clock = Clock()
    operation = 0
    while True:
        directory = tmp_path / f"run{operation}" / "t-0"
        log = open_log(directory, clock)
        _fill(log)
        for _ in range(prepare_passes):
            clean_once(directory.parent, log, clock)
        expected, end = latest_by_key(records(log)), log.log_end_offset
        count = 0
        real_rename, real_unlink, real_fsync = os.rename, os.unlink, os.fsync

        def counted(real, crash_at=operation):
            def operation_(*args, **kwargs):
                nonlocal count
                if count == crash_at:
                    raise SimulatedCrash(f"crash before file operation {crash_at}")
                count += 1
                return real(*args, **kwargs)
            return operation_

        os.rename, os.unlink, os.fsync = counted(real_rename), counted(real_unlink), counted(real_fsync)
        try:
            clean_once(directory.parent, log, clock, process=process)
            crashed = False
        except SimulatedCrash:
            crashed = True
        finally:
            os.rename, os.unlink, os.fsync = real_rename, real_unlink, real_fsync
        _abandon(log)
        recovered = _check_recovered(directory, expected, end, clock)
        # and the recovered log cleans fine afterwards
        clean_once(directory.parent, recovered, clock)
        assert latest_by_key(records(recovered)) == expected
        recovered.close()
        if not crashed:
            return operation
        operation += 1


# In a child process (the default) the writing of the .cleaned files is out of this process's reach, so
# only the swap's operations are counted; in the thread they are counted too (a crash while writing).
@pytest.mark.parametrize("process", [True, False], ids=["child", "thread"])
def test_crash_at_every_file_operation_of_a_first_pass(tmp_path, process):
    operations = _crash_at_every_operation(tmp_path, prepare_passes=0, process=process)
    assert operations > 15  # several groups, each several renames and fsyncs


def test_crash_at_every_file_operation_of_a_merging_pass(tmp_path):
    operations = _crash_at_every_operation(tmp_path, prepare_passes=1)
    assert operations > 8


def test_recovery_discards_a_cleaned_file_and_completes_a_swap_file(tmp_path):
    clock = Clock()
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    _fill(log)
    expected, end = latest_by_key(records(log)), log.log_end_offset
    base = log.segments[0].base_offset
    log.close()
    # a torn .cleaned output of a pass that never committed
    for path in cleaned_paths(str(directory), base):
        with open(path, "wb") as f:
            f.write(b"\x00" * 100)
    log = _check_recovered(directory, expected, end, clock)
    assert set(log.recovery_report.removed_files) >= {os.path.basename(p) for p in cleaned_paths(str(directory), base)}
    log.close()


@pytest.mark.parametrize("delay", [0, 60_000])
def test_fetch_regions_of_replaced_segments_stay_readable(tmp_path, delay):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, file_delete_delay_ms=delay)
    _fill(log)
    held = log.read(0, 1 << 20)
    data_before = held.to_bytes() if delay == 0 else None
    clean_once(tmp_path, log, clock)
    if delay:
        assert held.to_bytes()[:61]  # the old file is renamed, not gone: the region still reads
        assert any(n.endswith(".deleted") for n in os.listdir(tmp_path / "t-0"))
    else:
        assert data_before
    log.close()
