"""The cleaner's child process (log/cleaner_worker.py): same output as the thread, and a child that dies or
hangs leaves nothing half-applied."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest
from cleaner_helpers import Clock, clean_once, latest_by_key, open_log, put, records, target_for

from eoslog.log.cleaner import LogCleaner

MISBEHAVING = str(Path(__file__).parent / "cleaner_dying_worker.py")


def _fill(log, batches=80):
    for i in range(batches):
        put(log, [(f"k{(i * 7 + j) % 25}", None if (i + j) % 11 == 0 else f"v{i}-{j}") for j in range(4)])
    log.roll()


def _leftovers(directory) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap"))]


def test_the_child_and_the_thread_write_the_same_log(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "a" / "t-0", clock)
    _fill(log)
    log.close()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    results = {}
    for name, process in (("a", True), ("b", False)):
        log = open_log(tmp_path / name / "t-0", clock)
        result, _ = clean_once(tmp_path / name, log, clock, process=process)
        results[name] = (records(log), result.size_after, result.groups_swapped, result.first_dirty_offset,
                         result.stats.records_kept)
        log.close()
    assert results["a"] == results["b"]
    assert results["a"][2] > 1


def test_a_child_dying_mid_group_installs_nothing_of_it_and_the_log_is_cleaned_later(tmp_path):
    clock = Clock()
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    _fill(log)
    expected, end = latest_by_key(records(log)), log.log_end_offset
    target = target_for(log)

    async def run():
        cleaner = LogCleaner(str(tmp_path), lambda: [target], clock=clock,
                             worker_command=(sys.executable, MISBEHAVING, "die"))
        try:
            return await cleaner.clean(target), cleaner
        finally:
            await cleaner.stop()

    result, cleaner = asyncio.run(run())
    assert result is None
    assert cleaner._skip_until[("t", 0)] > clock.now  # retried after the backoff, not at once
    assert cleaner.first_dirty_offset(("t", 0)) is None  # the checkpoint did not move
    assert _leftovers(directory) == []
    rows = records(log)
    assert latest_by_key(rows) == expected and log.log_end_offset == end
    offsets = [r[0] for r in rows]
    assert offsets == sorted(set(offsets))
    # the real child finishes the job; a reopened log agrees
    result, _ = clean_once(tmp_path, log, clock)
    assert result is not None and result.groups_swapped > 0
    assert latest_by_key(records(log)) == expected
    log.close()
    reopened = open_log(directory, clock)
    assert latest_by_key(records(reopened)) == expected and reopened.log_end_offset == end
    assert not reopened.recovery_report.completed_swaps
    reopened.close()


def test_stopping_the_cleaner_ends_a_child_that_does_not_answer(tmp_path):
    clock = Clock()
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    _fill(log)
    before = records(log)
    target = target_for(log)

    async def run():
        cleaner = LogCleaner(str(tmp_path), lambda: [target], clock=clock,
                             worker_command=(sys.executable, MISBEHAVING, "hang"))
        task = asyncio.create_task(cleaner.clean(target))
        while cleaner._child is None:
            await asyncio.sleep(0.01)
        pid = cleaner._child.pid
        await asyncio.sleep(0.5)  # prepared; now hanging in its first group
        await asyncio.wait_for(cleaner.stop(), 10)
        return await task, pid

    result, pid = asyncio.run(run())
    assert result is None
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the child outlived the cleaner"
    assert _leftovers(directory) == []
    assert records(log) == before
    log.close()


def test_log_cleaner_process_is_a_broker_setting_defaulting_to_the_child():
    from eoslog.server.config import BrokerConfig, ConfigError

    assert BrokerConfig().log_cleaner_process is True
    config = BrokerConfig()
    config.apply_properties({"log.cleaner.process": "false"})
    assert config.log_cleaner_process is False
    with pytest.raises(ConfigError):
        BrokerConfig().apply_properties({"log.cleaner.process": "maybe"})
