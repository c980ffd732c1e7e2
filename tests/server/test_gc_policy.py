"""The broker process's garbage-collector policy (server/gc_policy.py): the young threshold it sets, the
start-up heap it freezes, and the pause times it exports, seen on a real `eoslog serve` process."""

from __future__ import annotations

import re
import subprocess
import sys

from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.server import gc_policy
from eoslog.testing.metrics import scrape
from eoslog.testing.process import BrokerProcess, free_port
from eoslog.testing.wait import wait_until


def test_tune_raises_the_young_threshold_and_freezes_the_start_up_heap():
    # A fresh interpreter: the test process's own collector must keep its settings.
    code = ("import gc; from eoslog.server import gc_policy; before = gc.get_threshold(); gc_policy.tune(); "
            "print(before[0], *gc.get_threshold(), gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    before_young, young, middle, oldest, frozen = map(int, out)
    assert before_young == 700  # CPython's default, which this policy exists to change
    assert (young, middle, oldest) == (gc_policy.YOUNG_THRESHOLD, 10, 10)
    assert frozen > 1_000  # modules, classes and functions imported by then


def _collections(port: int) -> dict[str, float]:
    return {s.labels["generation"]: s.value for s in scrape(port) if s.name == "python_gc_collections_total"}


def _pauses_counted(port: int) -> dict[str, float]:
    return {s.labels["generation"]: s.value for s in scrape(port)
            if s.name == "eoslog_gc_pause_seconds_count"}


def test_the_serve_process_runs_with_the_policy_and_exports_its_pauses(tmp_path):
    metrics_port = free_port()
    with BrokerProcess(data_dir=tmp_path / "data",
                       properties={"eoslog.metrics.listen": f"127.0.0.1:{metrics_port}"}) as broker:
        started = re.search(r"garbage collector: thresholds \((\d+), 10, 10\), (\d+) start-up objects frozen",
                            broker.log_tail(200))
        assert started is not None, broker.log_tail(200)
        assert int(started.group(1)) == gc_policy.YOUNG_THRESHOLD and int(started.group(2)) > 1_000

        before = _pauses_counted(metrics_port)
        assert set(before) == {"0", "1", "2"} and set(_collections(metrics_port)) == {"0", "1", "2"}
        # Partitions are what the broker keeps long: each topic of 200 leaves tens of thousands of objects.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        created = [0]

        def young_collections_timed() -> bool:
            name = f"gc-policy-{created[0]}"
            admin.create_topics([NewTopic(name, 200, 1)])[name].result(30)
            created[0] += 1
            return _pauses_counted(metrics_port)["0"] >= before["0"] + 2

        wait_until(young_collections_timed, timeout=60, what="two young collections timed")
        collections, pauses = _collections(metrics_port), _pauses_counted(metrics_port)
        # Every collection since the endpoint started is timed; those before it (start-up) are not.
        for generation in ("0", "1", "2"):
            assert pauses[generation] <= collections[generation]
