"""One syncfs round per data directory (log/flusher.py, log/syncfs.py): every log waiting when a round
starts is covered by it, logs asking meanwhile share the next one, no waiter is answered before the round
covering it succeeded, and a failed syncfs falls back to per-file fsyncs that find the logs affected.
Real fsyncs and syncfs calls on tmp_path; only the syncfs call is gated (held until the test releases it)
or made to fail. The real broker part: every acks=all acknowledgement over 200 partitions is below its
log's recovery point, with syncfs rounds far fewer than the batches."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from log_batches import make_batch

from eoslog.log import Log, LogConfig, LogStorageError
from eoslog.log import flush_task as flush_task_module
from eoslog.log import syncfs as syncfs_module
from eoslog.log.flusher import GroupCommit
from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.skipif(not syncfs_module.available(), reason="needs syncfs that reports errors (Linux >= 5.8)")


class GatedSyncfs:
    """Replaces the syncfs call: each call announces itself and waits for the test to release it, then
    runs the real syncfs (or raises EIO when told to)."""

    def __init__(self, monkeypatch):
        self.calls = 0
        self.fail_next = False
        self.announce = threading.Semaphore(0)
        self.release = threading.Semaphore(0)
        real = syncfs_module.syncfs
        gate = self

        def gated(fd):
            gate.calls += 1
            gate.announce.release()
            assert gate.release.acquire(timeout=10), "test never released the syncfs"
            if gate.fail_next:
                gate.fail_next = False
                raise OSError(5, "Input/output error")
            real(fd)

        monkeypatch.setattr(syncfs_module, "syncfs", gated)

    async def wait_started(self, count):
        loop = asyncio.get_running_loop()
        while self.calls < count:
            assert await loop.run_in_executor(None, self.announce.acquire, True, 10), "syncfs did not start"


@pytest.fixture
def logs(tmp_path):
    logs = [Log.open(str(tmp_path / f"t-{i}"), LogConfig()) for i in range(40)]
    for log in logs:
        log.flush()
    yield logs
    for log in logs:
        if not log._closed:
            log.close()


def test_kernel_release_parsing():
    assert syncfs_module.kernel_release("5.7.19-generic") == (5, 7) < (5, 8)
    assert syncfs_module.kernel_release("6.18.44-fc-v669") == (6, 18)
    assert syncfs_module.kernel_release("5.8") == (5, 8)
    assert syncfs_module.kernel_release("4") == (4, 0)


def test_many_logs_share_one_round_and_none_is_answered_before_it(tmp_path, logs, monkeypatch):
    gate = GatedSyncfs(monkeypatch)
    fsyncs = []
    real_run = flush_task_module.FlushTask.run
    monkeypatch.setattr(flush_task_module.FlushTask, "run", lambda task: (fsyncs.append(task), real_run(task)))
    commit = GroupCommit(directory=str(tmp_path))
    assert commit.uses_syncfs

    async def scenario():
        logs[0].append(make_batch([b"a"]))
        first = asyncio.ensure_future(commit.flush(logs[0]))
        await gate.wait_started(1)  # round 1: logs[0] alone
        for log in logs:
            log.append(make_batch([b"b"]))
        rest = [asyncio.ensure_future(commit.flush(log)) for log in logs]
        rest += [asyncio.ensure_future(commit.flush(log)) for log in logs[:10]]  # second callers share it
        for _ in range(3):
            await asyncio.sleep(0)
        assert not first.done() and not any(f.done() for f in rest)
        assert logs[0].recovery_point == 0  # nothing is durable before its round returned
        gate.release.release()
        await asyncio.wait_for(first, 10)
        assert logs[0].recovery_point == 1
        await gate.wait_started(2)  # round 2: all 40 logs, one syncfs
        for _ in range(3):
            await asyncio.sleep(0)
        assert not any(f.done() for f in rest)
        assert all(log.recovery_point < log.log_end_offset for log in logs)
        gate.release.release()
        await asyncio.wait_for(asyncio.gather(*rest), 10)

    asyncio.run(scenario())
    commit.close()
    assert gate.calls == commit.syncfs_rounds == 2
    assert fsyncs == []  # no per-file fsync: the rounds covered every file and directory
    for log in logs:
        assert log.recovery_point == log.log_end_offset
        assert commit.fsync_count(log) == (2 if log is logs[0] else 1)


def test_logs_asking_in_one_pass_of_the_loop_share_the_first_round(tmp_path, logs, monkeypatch):
    """A Produce request over several partitions appends to each and asks for its flush in one pass of
    the loop (cluster/partition.py calls ``request``, no await in between). With no round in flight, the
    round must not start at the first of them: it would cover that log alone and the others would wait
    for a second syncfs."""
    gate = GatedSyncfs(monkeypatch)
    commit = GroupCommit(directory=str(tmp_path))
    request_logs = logs[:8]

    async def scenario():
        waiters = []
        for log in request_logs:  # one pass, as a Produce request over eight partitions
            log.append(make_batch([b"a"]))
            waiters.append(commit.request(log))
        await gate.wait_started(1)
        gate.release.release()
        await asyncio.wait_for(asyncio.gather(*waiters), 10)

    asyncio.run(scenario())
    commit.close()
    assert gate.calls == commit.syncfs_rounds == 1
    for log in request_logs:
        assert log.recovery_point == log.log_end_offset == 1


def test_failed_syncfs_falls_back_to_per_file_fsyncs_that_find_the_log_affected(tmp_path, logs, monkeypatch):
    """The failed round's logs and those waiting for the next round are each answered by their own
    fsyncs (all files of the round's logs); only the log whose fsync fails goes offline; the directory
    stays on per-file fsyncs."""
    gate = GatedSyncfs(monkeypatch)
    broken = logs[3]
    fsynced = []  # (directory fsync'ed or None, paths of the files fsync'ed) per per-file round
    real_run = flush_task_module.FlushTask.run

    def run(task):
        paths = [os.readlink(f"/proc/self/fd/{fd}") for fd in task.fds]
        fsynced.append((task.directory, paths))
        if any(path.startswith(broken.directory + "/") for path in paths):
            for fd in task.fds:
                os.close(fd)
            task.fds = []
            raise OSError(5, "Input/output error")
        real_run(task)

    monkeypatch.setattr(flush_task_module.FlushTask, "run", run)
    commit = GroupCommit(directory=str(tmp_path))
    opener, in_round, waiting = logs[30], logs[:5], logs[5:10]

    async def scenario():
        opener.append(make_batch([b"a"]))
        first_round = asyncio.ensure_future(commit.flush(opener))
        await gate.wait_started(1)  # round 1: the opener; the five below ask meanwhile: round 2
        for log in in_round:
            log.append(make_batch([b"a"]))
        second = [asyncio.ensure_future(commit.flush(log)) for log in in_round]
        await asyncio.sleep(0)
        gate.release.release()
        await asyncio.wait_for(first_round, 10)
        await gate.wait_started(2)  # round 2 runs; these ask meanwhile: round 3
        for log in in_round[:2] + waiting:
            log.append(make_batch([b"b"]))
        third = [asyncio.ensure_future(commit.flush(log)) for log in in_round[:2] + waiting]
        await asyncio.sleep(0)
        gate.fail_next = True
        gate.release.release()
        results = await asyncio.wait_for(asyncio.gather(*second, *third, return_exceptions=True), 10)
        logs[20].append(make_batch([b"c"]))  # and later flushes use per-file fsyncs too
        await asyncio.wait_for(commit.flush(logs[20]), 10)
        return results

    results = asyncio.run(scenario())
    commit.close()
    assert gate.calls == 2 and not commit.uses_syncfs
    outcomes = list(zip(in_round + in_round[:2] + waiting, results))
    for log, outcome in outcomes:
        if log is broken:
            assert isinstance(outcome, LogStorageError)
        else:
            assert outcome is None, (log, outcome)
            assert log.recovery_point == log.log_end_offset
    assert broken.recovery_point == 0
    # each log of the failed round fsynced its directory, its segment file and both its indexes
    for log in in_round:
        rounds = [paths for directory, paths in fsynced if directory == log.directory]
        assert rounds and len(rounds[0]) == 3 and all(p.startswith(log.directory + "/") for p in rounds[0])
    for log in waiting:  # not in the failed round: only what it wrote since its last durable round
        assert [len(paths) for directory, paths in fsynced if paths[0].startswith(log.directory + "/")] == [1]
    assert logs[20].recovery_point == logs[20].log_end_offset == 1
    assert opener.recovery_point == 1
    broken._closed = True  # offline: nothing more to close cleanly
    for segment in broken.segments:
        segment.close()


def test_switch_off_keeps_per_file_fsyncs(tmp_path, logs):
    commit = GroupCommit(directory=str(tmp_path), syncfs=False)
    assert not commit.uses_syncfs

    async def scenario():
        for log in logs[:5]:
            log.append(make_batch([b"a"]))
        await asyncio.wait_for(asyncio.gather(*(commit.flush(log) for log in logs[:5])), 10)

    asyncio.run(scenario())
    commit.close()
    assert commit.syncfs_rounds == 0
    assert all(log.recovery_point == 1 and commit.fsync_count(log) == 1 for log in logs[:5])


@pytest.mark.parametrize("syncfs", [True, False])
def test_acknowledged_over_200_partitions_is_below_every_recovery_point(syncfs):
    """Through a real broker and librdkafka: acks=all over 200 partitions with fsync on ack; after the
    acknowledgements every partition's high watermark is covered by what its rounds made durable."""
    with EmbeddedBroker(properties={"eoslog.log.flush.syncfs": str(syncfs).lower()}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("many", 200, 1)])["many"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2})
        for i in range(4000):
            producer.produce("many", value=b"x" * 100, partition=i % 200)
            producer.poll(0)
        assert producer.flush(60) == 0

        def state():
            commit = broker.broker.registry.log_directory.group_commit
            partitions = [broker.broker.registry.partition("many", i) for i in range(200)]
            return commit.uses_syncfs, commit.syncfs_rounds, [
                (p.high_watermark, p.local_durable_end, p.log.recovery_point) for p in partitions]

        uses_syncfs, rounds, offsets = broker.call(state)
    assert uses_syncfs is syncfs
    assert all(hw == 20 and durable >= hw and flushed >= hw for hw, durable, flushed in offsets)
    if syncfs:
        assert 0 < rounds < 4000  # rounds covered many partitions' batches each
    else:
        assert rounds == 0
