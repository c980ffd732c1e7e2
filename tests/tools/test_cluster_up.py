"""`eoslog cluster up` watches what it started (issue 40): it shows PIDs and data directories, says when a
broker or ZooKeeper dies and how, reaps it (no `<defunct>` left), and stops, starts and restarts one
broker when `eoslog cluster stop|start|restart ID --dir DIR` asks.

One real `eoslog cluster up --brokers 2` (Debian's ZooKeeper, two `eoslog serve` processes) is driven the
way a user would from another terminal, and killed with SIGKILL the way a crash would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from eoslog.cli import main
from eoslog.tools.local.supervisor import describe_exit

pytestmark = pytest.mark.interop


def _eoslog(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _wait_for_line(log: Path, text: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if text in line:
                return line
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not printed within {timeout} s:\n{log.read_text(errors='replace')}")


def _reaped(pid: int) -> bool:
    """A dead process its parent reaped is gone from the process table; a zombie (<defunct>) is still in
    it, in state Z."""
    return not Path(f"/proc/{pid}").exists()


def _members(directory: Path) -> dict[tuple[str, int], dict]:
    code, output = _eoslog("cluster", "status", "--dir", str(directory), "--json")
    assert code == 0, output
    return {(m["role"], m["id"]): m for m in json.loads(output)}


def _wait_reaped(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not _reaped(pid):
        assert time.monotonic() < deadline, f"pid {pid} still in the process table (<defunct>?)"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster_up(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cluster-up")
    log = directory.parent / f"{directory.name}.out"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "eoslog", "cluster", "up", "--brokers", "2", "--dir",
                                    str(directory)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        _wait_for_line(log, "(Ctrl-C stops the cluster)", timeout=120)
        yield process, directory, log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=150)


def test_up_shows_each_process_with_its_pid_address_and_data_dir(cluster_up):
    _, directory, log = cluster_up
    members = _members(directory)
    assert sorted(members) == [("broker", 1), ("broker", 2), ("zookeeper", 1)]
    for (role, member_id), member in members.items():
        assert member["state"] == "running"
        assert Path(f"/proc/{member['pid']}").exists()
        assert Path(member["data_dir"]).is_dir()
        [printed] = [line.split() for line in log.read_text().splitlines()
                     if line.split()[:3] == [role, str(member_id), str(member["pid"])]]
        assert printed[3:6] == ["running", member["address"], member["data_dir"]]
    assert members[("broker", 2)]["data_dir"] == str(directory / "broker-2" / "data")
    _wait_for_line(log, f"eoslog cluster status|stop|start|restart [BROKER] --dir {directory}")


def test_a_killed_broker_is_reported_reaped_and_started_again(cluster_up):
    _, directory, log = cluster_up
    pid = _members(directory)[("broker", 2)]["pid"]
    os.kill(pid, signal.SIGKILL)
    line = _wait_for_line(log, f"broker 2 (pid {pid}) died")
    assert line.endswith(f"died: killed by SIGKILL; log {directory / 'broker-2.log'}; "
                         f"`eoslog cluster start 2 --dir {directory}` starts it again")
    _wait_reaped(pid)
    assert _members(directory)[("broker", 2)]["state"] == "exited: killed by SIGKILL"

    code, output = _eoslog("cluster", "start", "2", "--dir", str(directory))
    assert code == 0, output
    started = _members(directory)[("broker", 2)]
    assert started["state"] == "running" and started["pid"] != pid
    assert output.strip() == f"broker 2 started (pid {started['pid']}) on {started['address']}"
    _wait_for_line(log, f"broker 2 started (pid {started['pid']})")


def test_stop_start_and_restart_one_broker(cluster_up):
    _, directory, log = cluster_up
    before = _members(directory)[("broker", 1)]
    code, output = _eoslog("cluster", "restart", "1", "--dir", str(directory))
    assert code == 0, output
    after = _members(directory)[("broker", 1)]
    assert after["pid"] != before["pid"] and after["address"] == before["address"]
    assert after["state"] == "running"
    _wait_reaped(before["pid"])

    code, output = _eoslog("cluster", "stop", "1", "--dir", str(directory))
    assert (code, output.strip()) == (0, f"broker 1 (pid {after['pid']}) stopped: exit status 0")
    assert _members(directory)[("broker", 1)]["state"] == "stopped"
    _wait_reaped(after["pid"])
    code, output = _eoslog("cluster", "stop", "1", "--dir", str(directory))
    assert (code, output.strip()) == (1, "Error: broker 1 is not running")
    code, output = _eoslog("cluster", "start", "1", "--dir", str(directory))
    assert code == 0, output
    code, output = _eoslog("cluster", "start", "1", "--dir", str(directory))
    assert code == 1 and output.startswith("Error: broker 1 is already running (pid ")
    # a stop asked for is not a death
    assert f"broker 1 (pid {after['pid']}) died" not in log.read_text()


def test_not_found_is_an_error(cluster_up, tmp_path):
    _, directory, _ = cluster_up
    code, output = _eoslog("cluster", "restart", "7", "--dir", str(directory))
    assert (code, output.strip()) == (1, "Error: no broker 7 in this cluster (brokers: 1, 2)")
    code, output = _eoslog("cluster", "status", "--dir", str(tmp_path))
    assert code == 1
    assert output.startswith(f"Error: no `eoslog cluster up` answers on {tmp_path / 'control.sock'}")


def test_cluster_describe_is_in_the_one_table_style(cluster_up):
    _, directory, _ = cluster_up
    bootstrap = _members(directory)[("broker", 1)]["address"]
    code, output = _eoslog("cluster", "describe", "--bootstrap", bootstrap)
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0].startswith("cluster ") and "controller: broker" in lines[0]
    assert lines[2].split() == ["BROKER", "HOST", "PORT", "RACK"]
    assert lines[3].split()[:3] == ["1", "127.0.0.1", bootstrap.rsplit(":", 1)[1]]
    assert lines[6] == "partitions: none"  # no topic yet (internal ones are made on first use)
    assert not any(ch in output for ch in "│─┃━┏┡└"), output  # no box
    code, output = _eoslog("cluster", "describe", "--bootstrap", bootstrap, "--json")
    assert code == 0 and [b["id"] for b in json.loads(output)["brokers"]] == [1, 2]
    assert _eoslog("cluster", "reassignments", "--bootstrap", bootstrap) == (0, "none\n")
    assert _eoslog("cluster", "reassignments", "--bootstrap", bootstrap, "--json") == (0, "[]\n")
    code, output = _eoslog("cluster", "elect-leaders", "--bootstrap", bootstrap, "--json")
    assert (code, json.loads(output)) == (0, {"elected": [], "errors": {}})
    assert _eoslog("cluster", "elect-leaders", "--bootstrap", bootstrap) == (0, "0 partitions changed leader\n")
    code, output = _eoslog("cluster", "reassign", "--topic", "nope", "--partition", "0", "--replicas", "1",
                           "--bootstrap", bootstrap, "--json")
    assert code == 1 and list(json.loads(output)) == ["nope-0"], output
    assert json.loads(output)["nope-0"].startswith("UNKNOWN_TOPIC_OR_PARTITION")


def test_a_dead_zookeeper_is_reported_and_sigterm_stops_everything(cluster_up):
    """Last in this module: the cluster does not survive it."""
    process, directory, log = cluster_up
    members = _members(directory)
    zookeeper = members[("zookeeper", 1)]["pid"]
    os.kill(zookeeper, signal.SIGKILL)
    line = _wait_for_line(log, f"zookeeper 1 (pid {zookeeper}) died")
    assert line.endswith(f"died: killed by SIGKILL; log {directory / 'zookeeper' / 'zk-1' / 'zookeeper.log'}")
    _wait_reaped(zookeeper)
    brokers = [m["pid"] for (role, _), m in _members(directory).items() if role == "broker"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=150) == 0, log.read_text()
    for pid in brokers:
        assert not Path(f"/proc/{pid}").exists(), f"broker pid {pid} outlived `cluster up`"


@pytest.mark.parametrize(("code", "text"), [(-9, "killed by SIGKILL"), (-15, "killed by SIGTERM"),
                                            (0, "exit status 0"), (1, "exit status 1")])
def test_describe_exit(code, text):
    assert describe_exit(code) == text
