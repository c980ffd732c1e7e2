"""``eoslog verify --cluster 3 --net namespaces`` (issue 38, the short CI version): the verifier's workers
against 3 brokers on a 3-node ZooKeeper ensemble, every process in a network namespace of its own, while
the namespace nemesis cuts links by dropping packets. A correct cluster comes out with zero anomalies, and
the run leaves no namespace behind. The process faults are the loopback run's (test_verify_cluster.py),
so this run enables the six partition kinds only; the long run with every kind is a documented command
(docs/verification.md, "Network namespaces")."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from click.testing import CliRunner

from eoslog.faults.netns import PREFIX
from eoslog.testing.faults import require_network
from eoslog.verify.cli import verify_command
from eoslog.verify.net_faults import PARTITION_KINDS
from eoslog.verify.run import VerifyOptions, run_verify

pytestmark = pytest.mark.slow


def our_namespaces(pid: int | None = None) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.split()
    mine = f"{PREFIX}{pid}-" if pid is not None else PREFIX
    return [name for name in listed if name.startswith(mine)]


def test_verify_run_under_every_partition_kind_finds_no_anomalies_and_cleans_up(tmp_path):
    require_network()
    result = run_verify(VerifyOptions(duration=60, seed=3801, out=tmp_path, cluster=3, net="namespaces",
                                      zookeeper_nodes=3, faults=PARTITION_KINDS,
                                      quiet_seconds=(0.5, 1.0)))
    text = result.render_text()
    assert result.valid, text
    assert result.report.errors == {}, text
    assert result.final_read_complete, text
    stats = result.report.stats
    assert stats["committed"] >= 50, text
    assert stats["values_read"] >= 50, text
    for kind in PARTITION_KINDS:
        assert result.faults.get(kind, 0) >= 1, (kind, result.faults)
    faults = json.loads((tmp_path / "faults.json").read_text())
    assert {f["kind"] for f in faults} >= set(PARTITION_KINDS)
    # Every fault was aimed at something of this network and held: a description and a hold time.
    assert all(" for " in f["detail"] for f in faults if f["kind"] in PARTITION_KINDS), faults
    assert result.plot_path is not None and result.plot_path.exists()
    assert our_namespaces(os.getpid()) == []


def test_cli_refuses_namespaces_without_a_cluster_and_isolate_zookeeper_without_an_ensemble():
    outcome = CliRunner().invoke(verify_command, ["--net", "namespaces", "--duration", "5"])
    assert outcome.exit_code == 2 and "--cluster" in outcome.output, outcome.output
    require_network()  # the next refusal comes after the check that namespaces can be built at all
    outcome = CliRunner().invoke(verify_command, [
        "--cluster", "3", "--net", "namespaces", "--zookeeper-nodes", "1", "--faults", "isolate-zookeeper"])
    assert outcome.exit_code == 2 and "--zookeeper-nodes 3" in outcome.output, outcome.output
