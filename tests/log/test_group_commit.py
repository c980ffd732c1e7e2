"""GroupCommit: one fsync covers every waiter present when it starts; late arrivals share the next one."""

import asyncio
import threading

import pytest
from log_batches import make_batch

from eoslog.log import Log, LogConfig, LogStorageError
from eoslog.log import log as log_module
from eoslog.log.flusher import FsyncThread, GroupCommit


class GatedFsync:
    """Replaces FlushTask.run: each run announces itself and waits for the test to release it."""

    def __init__(self, monkeypatch, fail=False):
        self.started = []  # up_to of each fsync round, in order
        self.announce = threading.Semaphore(0)
        self.release = threading.Semaphore(0)
        real_run = log_module.FlushTask.run
        gate = self

        def run(task):
            gate.started.append(task.up_to)
            gate.announce.release()
            assert gate.release.acquire(timeout=10), "test never released the fsync"
            if fail:
                for fd in task.fds:
                    __import__("os").close(fd)
                raise OSError(5, "Input/output error")
            real_run(task)

        monkeypatch.setattr(log_module.FlushTask, "run", run)

    async def wait_started(self, count):
        loop = asyncio.get_running_loop()
        while len(self.started) < count:
            assert await loop.run_in_executor(None, self.announce.acquire, True, 10), "fsync did not start"


@pytest.fixture
def log(tmp_path):
    log = Log.open(str(tmp_path / "t-0"), LogConfig())
    log.flush()
    yield log
    if not log._closed:
        log.close()


def test_waiters_during_an_fsync_share_the_next_one(log, monkeypatch):
    gate = GatedFsync(monkeypatch)
    commit = GroupCommit()

    async def scenario():
        log.append(make_batch([b"a"]))
        first = asyncio.ensure_future(commit.flush(log))
        await gate.wait_started(1)
        covered = asyncio.ensure_future(
            commit.flush(log)
        )  # nothing new appended: the running fsync covers it
        await asyncio.sleep(0)
        log.append(make_batch([b"b"]))
        late = [asyncio.ensure_future(commit.flush(log)) for _ in range(5)]
        await asyncio.sleep(0)
        log.append(make_batch([b"c"]))
        late.append(asyncio.ensure_future(commit.flush(log)))
        await asyncio.sleep(0)
        assert not first.done() and not covered.done()
        gate.release.release()
        await asyncio.wait_for(asyncio.gather(first, covered), 10)
        assert log.recovery_point == 1
        assert not any(f.done() for f in late)
        await gate.wait_started(2)
        gate.release.release()
        await asyncio.wait_for(asyncio.gather(*late), 10)

    asyncio.run(scenario())
    commit.close()
    assert gate.started == [1, 3]  # two fsyncs for eight callers
    assert commit.fsync_count(log) == 2
    assert log.recovery_point == log.log_end_offset == 3


def test_nothing_to_flush_returns_at_once(log, monkeypatch):
    gate = GatedFsync(monkeypatch)
    commit = GroupCommit()
    asyncio.run(asyncio.wait_for(commit.flush(log), 5))
    commit.close()
    assert gate.started == []


def test_failed_fsync_reaches_every_waiter_and_takes_the_log_offline(log, monkeypatch):
    gate = GatedFsync(monkeypatch, fail=True)
    commit = GroupCommit()

    async def scenario():
        log.append(make_batch([b"a"]))
        waiters = [asyncio.ensure_future(commit.flush(log)) for _ in range(3)]
        await gate.wait_started(1)
        gate.release.release()
        return await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 10)

    results = asyncio.run(scenario())
    commit.close()
    assert all(isinstance(r, LogStorageError) for r in results)
    with pytest.raises(LogStorageError):
        log.append(make_batch([b"b"]))
    assert log.recovery_point == 0
    log._closed = True  # offline: nothing more to close cleanly
    for segment in log.segments:
        segment.close()


def test_real_fsyncs_under_concurrency(log):
    commit = GroupCommit()

    async def producer(n):
        for _ in range(n):
            log.append(make_batch([b"x" * 100]))
            await commit.flush(log)
            assert log.recovery_point >= 1

    async def scenario():
        await asyncio.wait_for(asyncio.gather(*(producer(20) for _ in range(8))), 60)

    asyncio.run(scenario())
    commit.close()
    assert log.recovery_point == log.log_end_offset == 160
    assert commit.fsync_count(log) < 160  # coalesced


def test_fsync_thread_runs_rounds_in_order_and_answers_on_the_loop():
    class Task:  # stands in for a FlushTask: records the thread and order it ran in
        def __init__(self, name, fail=False):
            self.name, self.fail = name, fail

        def run(self):
            ran.append((self.name, threading.get_ident()))
            if self.fail:
                raise OSError(5, "Input/output error")

    ran, answered = [], []
    fsyncs = FsyncThread("test-fsync")

    async def scenario():
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def answer(name):
            def callback(exc):
                answered.append((name, type(exc).__name__ if exc else None, threading.get_ident()))
                if len(answered) == 5:
                    done.set_result(None)
            return callback

        for i in range(5):
            fsyncs.submit(loop, Task(i, fail=i == 2), answer(i))
        await asyncio.wait_for(done, 10)

    asyncio.run(scenario())
    fsyncs.close()
    loop_thread = threading.get_ident()  # asyncio.run runs the loop in this thread
    assert [name for name, _ in ran] == [0, 1, 2, 3, 4]
    assert all(thread != loop_thread for _, thread in ran)
    assert [(name, error) for name, error, _ in answered] == [(0, None), (1, None), (2, "OSError"),
                                                              (3, None), (4, None)]
    assert all(thread == loop_thread for _, _, thread in answered)


def test_real_fsyncs_of_many_logs_sharing_threads(tmp_path):
    logs = [Log.open(str(tmp_path / f"t-{i}"), LogConfig()) for i in range(6)]
    commit = GroupCommit(threads=2)  # three logs per thread

    async def producer(log, n):
        for _ in range(n):
            log.append(make_batch([b"x" * 100]))
            before = log.log_end_offset
            await commit.flush(log)
            assert log.recovery_point >= before

    async def scenario():
        await asyncio.wait_for(asyncio.gather(*(producer(log, 15) for log in logs for _ in range(3))), 60)

    asyncio.run(scenario())
    commit.close()
    for log in logs:
        assert log.recovery_point == log.log_end_offset == 45
        assert 0 < commit.fsync_count(log) <= 45
        log.close()
