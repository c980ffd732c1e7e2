"""The pytest plugin's cluster fixtures and `eoslog cluster up` as a user runs it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import confluent_kafka
import pytest

pytestmark = pytest.mark.interop


def test_factory_fixture_gives_a_working_single_broker_cluster(eoslog_cluster_factory):
    cluster = eoslog_cluster_factory(1)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    delivered = []
    producer.produce("auto-created", b"hello", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None]
    assert cluster.state().leader_of("auto-created", 0) == 1


def test_cluster_up_prints_a_bootstrap_and_stops_everything_on_ctrl_c(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "eoslog", "cluster", "up", "--brokers", "2", "--dir",
                                str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line, "cluster up exited early:\n" + "".join(lines)
            lines.append(line)
            if "Ctrl-C" in line:
                break
        bootstrap = lines[-2].strip()
        assert bootstrap.count(",") == 1, lines
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        assert sorted(admin.list_topics(timeout=30).brokers) == [1, 2]
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert leftovers == [], "cluster up left processes behind"
