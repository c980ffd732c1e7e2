"""Crash tests: the Spark driver SIGKILLed at chosen points, the broker SIGKILLed mid-batch.

The streaming copy job (crash_job.py) runs as a subprocess in its own process group, so one killpg
takes down the Python driver, the JVM and every Python worker at once. A fault point in the sink
(eoslog.spark.faults) announces itself with a file and waits, so the kill lands exactly there. After
a restart from the same checkpoint, the output topic read with read_committed must hold every input
record exactly once, and no transaction may be left open (last stable offset == high watermark).

Kill points that only the transaction-group extension can survive (inside or after the sink's commit)
are skipped, conditionally, while the live broker does not advertise it. The kills inside a task's write
and the broker kill run with both task writers (``eoslog.writer`` native and librdkafka): fencing a killed
attempt is each writer's own work; the kills around the driver's commit run with the default writer.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from eoslog.client.txn_groups import broker_supports_txn_groups
from eoslog.spark.faults import ENV
from eoslog.testing.process import BrokerProcess

from .kafka_helpers import Kafka

pytestmark = pytest.mark.slow

JOB = Path(__file__).with_name("crash_job.py")
RECORDS = 2_000  # 4 micro-batches of 500 offsets


@pytest.fixture(scope="module")
def broker_process(tmp_path_factory):
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("crash") / "data") as broker:
        yield broker


@pytest.fixture(params=["native", "librdkafka"])
def writer(request):
    return request.param


def _start_job(kafka, source, target, checkpoint, require, writer, fault=None, log=None):
    env = dict(os.environ)
    env.pop(ENV, None)
    if fault:
        env[ENV] = fault
    src_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src_root, env.get("PYTHONPATH")]))
    return subprocess.Popen([sys.executable, str(JOB), kafka.bootstrap, source, target, str(checkpoint), require,
                             writer],
                            env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)


def _wait_for(path: Path, process: subprocess.Popen, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"job exited ({process.returncode}) before reaching the fault point"
        assert time.monotonic() < deadline, f"fault point {path} not reached within {timeout} s"
        time.sleep(0.05)


def _kill_group(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(60)


def _run_to_completion(kafka, source, target, checkpoint, require, writer, log, attempts=3) -> None:
    for _ in range(attempts):
        job = _start_job(kafka, source, target, checkpoint, require, writer, log=log)
        try:
            if job.wait(300) == 0:
                return
        finally:
            if job.poll() is None:
                _kill_group(job)
    raise AssertionError(f"the job did not complete in {attempts} runs; see {log.name}")


def _assert_exactly_once_and_nothing_open(kafka: Kafka, target: str) -> None:
    values = sorted(int(m.value()) for m in kafka.read_all(target, expect=RECORDS))
    assert len(values) == RECORDS, f"{len(values)} records, want {RECORDS}"
    assert values == list(range(RECORDS))
    probe = {"bootstrap.servers": kafka.bootstrap, "group.id": "probe"}
    committed = Consumer({**probe, "isolation.level": "read_committed"})
    uncommitted = Consumer({**probe, "isolation.level": "read_uncommitted"})
    try:
        deadline = time.monotonic() + 60
        for p in kafka.partitions(target):
            tp = TopicPartition(target, p)
            # An open (prepared, never decided) transaction holds the LSO below the high watermark.
            while committed.get_watermark_offsets(tp, 10)[1] != uncommitted.get_watermark_offsets(tp, 10)[1]:
                assert time.monotonic() < deadline, f"{target}-{p}: a transaction is left open"
                time.sleep(0.1)
    finally:
        committed.close()
        uncommitted.close()


def _setup(broker_process, tag):
    kafka = Kafka(broker_process.bootstrap)
    source, target = kafka.create(f"crash-in-{tag}", 2), kafka.create(f"crash-out-{tag}", 2)
    kafka.produce(source, [(str(i).encode(), str(i).encode(), None, None) for i in range(RECORDS)])
    return kafka, source, target


# The commit points kill the driver around CommitTransactionGroup, which is the same code whatever wrote
# the tasks' transactions, so they run with the default (native) writer only; the kill inside a task's
# write, where each writer's own fencing of the dead attempt is tested, runs with both.
@pytest.mark.parametrize(("writer", "point"), [("native", "task-write"), ("native", "commit-before"),
                                               ("native", "commit-after"), ("librdkafka", "task-write")])
def test_driver_killed_then_restarted_from_the_checkpoint(broker_process, tmp_path, point, writer):
    groups = broker_supports_txn_groups(broker_process.bootstrap)
    if point != "task-write" and not groups:
        pytest.skip("killing the driver inside or after the sink's commit needs the transaction-group APIs")
    require = "true" if groups else "false"
    tag = f"{point}-{writer}-{random.randrange(10**6)}"
    kafka, source, target = _setup(broker_process, tag)
    batch = random.Random(tag).randrange(1, 3)  # a random micro-batch, not only the first
    fault_dir = tmp_path / "fault"
    fault_dir.mkdir()
    checkpoint = tmp_path / "checkpoint"
    with open(tmp_path / "job.log", "wb") as log:
        job = _start_job(kafka, source, target, checkpoint, require, writer, fault=f"{point}:{batch}:{fault_dir}", log=log)
        try:
            _wait_for(fault_dir / "reached", job)
        finally:
            _kill_group(job)
        _run_to_completion(kafka, source, target, checkpoint, require, writer, log)
    _assert_exactly_once_and_nothing_open(kafka, target)


def test_broker_killed_and_restarted_mid_batch(broker_process, tmp_path, writer):
    groups = broker_supports_txn_groups(broker_process.bootstrap)
    require = "true" if groups else "false"
    tag = f"broker-{writer}-{random.randrange(10**6)}"
    kafka, source, target = _setup(broker_process, tag)
    fault_dir = tmp_path / "fault"
    fault_dir.mkdir()
    checkpoint = tmp_path / "checkpoint"
    with open(tmp_path / "job.log", "wb") as log:
        job = _start_job(kafka, source, target, checkpoint, require, writer, fault=f"task-write:2:{fault_dir}", log=log)
        try:
            _wait_for(fault_dir / "reached", job)
            broker_process.restart(hard=True)  # SIGKILL while a task's transaction is open
            (fault_dir / "resume").write_text("go")
            finished = job.wait(300) == 0
        finally:
            if job.poll() is None:
                _kill_group(job)
        if not finished:  # the query may fail on the restart; a rerun from the checkpoint must finish it
            _run_to_completion(kafka, source, target, checkpoint, require, writer, log)
    _assert_exactly_once_and_nothing_open(kafka, target)
