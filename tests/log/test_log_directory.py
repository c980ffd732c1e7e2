import os
import subprocess
import sys

import pytest
from log_batches import make_batch

from eoslog.log import LogConfig, LogDirectoryLockedError, LogError
from eoslog.log.checkpoint import OffsetCheckpointFile, parse_checkpoint
from eoslog.log.manager import LogDirectory

CONFIG = LogConfig(segment_bytes=2000, file_delete_delay_ms=0)


def test_a_second_opener_gets_a_clear_error(tmp_path):
    first = LogDirectory.open(str(tmp_path), CONFIG)
    with pytest.raises(LogDirectoryLockedError) as caught:
        LogDirectory.open(str(tmp_path), CONFIG)
    message = str(caught.value)
    assert str(tmp_path) in message and ".lock" in message and str(os.getpid()) in message
    first.close()
    LogDirectory.open(str(tmp_path), CONFIG).close()  # released at close


def test_another_process_is_locked_out(tmp_path):
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    script = (
        "import sys\n"
        "from eoslog.log.manager import LogDirectory\n"
        "from eoslog.log import LogDirectoryLockedError\n"
        "try:\n"
        f"    LogDirectory.open({str(tmp_path)!r})\n"
        "except LogDirectoryLockedError as exc:\n"
        "    print(exc); sys.exit(3)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 3, result.stderr
    assert "already in use" in result.stdout
    directory.close()


def test_create_append_checkpoint_reopen(tmp_path):
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    orders0 = directory.get_or_create_log("orders", 0)
    orders1 = directory.get_or_create_log("orders", 1)
    assert directory.get_or_create_log("orders", 0) is orders0
    for i in range(30):
        orders0.append(make_batch([b"x" * 100]))
    orders1.append(make_batch([b"y"]))
    orders0.delete_records_before(4)
    directory.close()
    recovery = OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint")).read()
    starts = OffsetCheckpointFile(str(tmp_path / "log-start-offset-checkpoint")).read()
    assert recovery == {("orders", 0): 30, ("orders", 1): 1}
    assert starts == {("orders", 0): 4, ("orders", 1): 0}

    again = LogDirectory.open(str(tmp_path), CONFIG)
    assert set(again.logs) == {("orders", 0), ("orders", 1)}
    log = again.get_log("orders", 0)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (4, 30, 30)
    assert log.recovery_report.recovered_segments == []  # the checkpoint says it was all flushed
    again.close()


def test_delete_log(tmp_path):
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    log = directory.get_or_create_log("gone", 3)
    log.append(make_batch([b"x"]))
    assert directory.delete_log("gone", 3)
    assert not directory.delete_log("gone", 3)
    assert not any(name.startswith("gone-3") for name in os.listdir(tmp_path))
    os.makedirs(tmp_path / "half-0.0123abcd-delete")  # a deletion interrupted by a crash
    directory.close()
    again = LogDirectory.open(str(tmp_path), CONFIG)
    assert again.logs == {} and not os.path.exists(tmp_path / "half-0.0123abcd-delete")
    again.close()


def test_corrupt_checkpoint_means_full_recovery_not_a_refusal(tmp_path):
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    directory.get_or_create_log("t", 0).append(make_batch([b"x"]))
    directory.close()
    (tmp_path / "recovery-point-offset-checkpoint").write_bytes(b"garbage")
    again = LogDirectory.open(str(tmp_path), CONFIG)
    assert again.get_log("t", 0).recovery_report.recovered_segments == [0]
    assert again.get_log("t", 0).log_end_offset == 1
    again.close()


def test_clean_shutdown_marker(tmp_path):
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    directory.get_or_create_log("t", 0).append(make_batch([b"x"]))
    directory.close()
    assert os.path.exists(tmp_path / ".clean-shutdown")
    again = LogDirectory.open(str(tmp_path), CONFIG)
    assert not os.path.exists(tmp_path / ".clean-shutdown")  # a crash from now on is unclean
    assert again.get_log("t", 0).recovery_report.recovered_segments == []
    again.get_log("t", 0).close()  # simulate a crash: no LogDirectory.close, no marker
    again._release()
    third = LogDirectory.open(str(tmp_path), CONFIG)
    assert third.get_log("t", 0).recovery_report.recovered_segments == [0]
    third.close()


def test_run_maintenance_flushes_due_logs_and_writes_checkpoints(tmp_path):
    import asyncio

    config = LogConfig(flush_ms=0, retention_ms=-1)
    directory = LogDirectory.open(str(tmp_path), config)
    log = directory.get_or_create_log("t", 0)
    log.append(make_batch([b"x"]))
    checkpoint_path = tmp_path / "recovery-point-offset-checkpoint"

    def checkpointed() -> dict:
        # Not OffsetCheckpointFile.read(): that removes a leftover .tmp, which here could be the
        # maintenance task's write in flight (an instance owns its path; this test only looks).
        return parse_checkpoint(checkpoint_path.read_bytes()) if checkpoint_path.exists() else {}

    async def scenario():
        task = asyncio.ensure_future(
            directory.run_maintenance(checkpoint_interval_ms=10, flush_check_interval_ms=10)
        )
        deadline = asyncio.get_running_loop().time() + 10
        while checkpointed().get(("t", 0)) != 1:
            assert asyncio.get_running_loop().time() < deadline, "no checkpoint with the flushed offset"
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    assert log.recovery_point == 1
    directory.close()


def test_made_logs_are_served_only_once_adopted_and_never_take_an_existing_directory(tmp_path):
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    made = directory.make_logs("new", range(3), CONFIG)
    assert [os.path.basename(log.directory) for log in made] == ["new-0", "new-1", "new-2"]
    assert directory.logs == {}  # made, not registered: what a worker thread may do while the loop serves
    for log in made:
        directory.adopt(log)
    assert directory.get_log("new", 2) is made[2]
    with pytest.raises(LogError, match="already exists"):
        directory.make_logs("new", [3, 1], CONFIG)
    # A failure part-way leaves nothing: new-3 was made before new-1 refused, and is gone again.
    assert not os.path.exists(tmp_path / "new-3")
    directory.discard_logs(directory.make_logs("dropped", range(2), CONFIG))
    assert not any(name.startswith("dropped") for name in os.listdir(tmp_path))
    directory.close()


def test_a_detached_log_is_unserved_at_once_and_removed_later(tmp_path):
    directory = LogDirectory.open(str(tmp_path), CONFIG)
    log = directory.get_or_create_log("gone", 0)
    log.append(make_batch([b"x"]))
    doomed = directory.detach_log("gone", 0)
    assert directory.get_log("gone", 0) is None and directory.detach_log("gone", 0) is None
    assert doomed.endswith("-delete") and os.path.isdir(doomed) and not os.path.exists(tmp_path / "gone-0")
    directory.remove_detached([doomed])
    assert not os.path.exists(doomed)
    directory.close()
