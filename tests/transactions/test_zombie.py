"""Zombie fencing: a transactional producer process is paused (SIGSTOP) with a transaction open, a new
instance with the same transactional id takes over and commits, then the old one resumes. Its writes
must be fenced and never visible to read_committed consumers; the ones it sends after resuming must
not reach the log at all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from txn_clients import CLIENTS, READERS, create_topics, run_plan

from eoslog.testing.process import BrokerProcess

CHILD = Path(__file__).parent / "zombie_child.py"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("zombie") / "data") as broker:
        yield broker


@pytest.mark.parametrize("client", CLIENTS)
def test_paused_zombie_is_fenced(broker, client, tmp_path):
    topic = f"zombie-{client}"
    create_topics(broker.bootstrap, {topic: 2})
    transactional_id = f"zombie-{client}"
    log = open(tmp_path / "child.log", "w")
    child = subprocess.Popen([sys.executable, str(CHILD), client, broker.bootstrap, transactional_id, topic],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert child.stdout.readline().strip() == "READY"
        os.kill(child.pid, signal.SIGSTOP)
        successor = run_plan(client, broker.bootstrap, transactional_id,
                             [("commit", [(topic, 0, b"successor-0"), (topic, 1, b"successor-1")])])
        successor.close()
        os.kill(child.pid, signal.SIGCONT)
        child.stdin.write("go\n")
        child.stdin.flush()
        out, _ = child.communicate(timeout=90)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
        log.close()
    assert "OUTCOME fenced" in out, out + (tmp_path / "child.log").read_text()[-2000:]
    tps = [(topic, 0), (topic, 1)]
    for reader in READERS.values():
        assert reader(broker.bootstrap, tps, "read_committed") == {(topic, 0): [b"successor-0"],
                                                                   (topic, 1): [b"successor-1"]}
    everything = READERS["confluent"](broker.bootstrap, tps, "read_uncommitted")
    # The zombie's first record is in the log (aborted); nothing it sent after the takeover is.
    assert everything == {(topic, 0): [b"zombie-before-pause", b"successor-0"], (topic, 1): [b"successor-1"]}
