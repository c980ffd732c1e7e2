"""The payments pipeline on a real cluster, through the command users run: ``eoslog pipeline --cluster 3
--kill-broker-at 0.4 --spark-workers 2`` starts 3 brokers on ZooKeeper (topics RF=3, min.insync.replicas
2) and a standalone Spark Master with 2 Workers, SIGKILLs the ledger's leader mid-run and restarts it,
and must end VERIFIED: every transfer once, the ledger summing to zero. Run as a subprocess: it makes
its own SparkSession on the standalone master, which this test session's local one would shadow."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_pipeline_on_three_brokers_and_a_standalone_spark_survives_a_broker_sigkill(tmp_path):
    workdir = tmp_path / "run"
    env = {**os.environ, "COLUMNS": "200", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-m", "eoslog", "pipeline", "--cluster", "3", "--kill-broker-at", "0.4",
         "--spark-workers", "2", "--transfers", "20000", "--max-offsets-per-trigger", "2000",
         "--workdir", str(workdir)], env=env, capture_output=True, text=True, timeout=540, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    assert "VERIFIED" in done.stdout and "VERIFICATION FAILED" not in done.stdout
    assert "0 missing, 0 duplicated" in done.stdout and "sum = 0" in done.stdout
    assert "exactly-once (transaction groups" in done.stdout
    assert "spark: spark://127.0.0.1:" in done.stdout
    # The fault happened mid-run and the broker came back.
    assert "fault: SIGKILL broker" in done.stdout and "restarted and back in sync" in done.stdout
    assert len(done.stdout.split("broker: ", 1)[1].split("\n", 1)[0].split(",")) == 3
    # The tasks ran in executors started by both Workers (each keeps a directory per application).
    for worker in ("worker-1", "worker-2"):
        apps = list((workdir / "spark" / worker).glob("app-*/*/stderr"))
        assert apps, f"no executor ran on {worker}"
