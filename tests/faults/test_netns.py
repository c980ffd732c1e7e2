"""The namespace network of eoslog/faults/netns.py, built for real: hosts reach each other over the bridge,
nftables drops cut links (both ways, one way, a share of packets) until healed, nothing of it ever sits in
the machine's own namespace, and what a crashed run leaves behind is found by its prefix and removed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from eoslog.faults import netns
from eoslog.faults.netns import Network
from eoslog.testing.faults import require_network
from eoslog.verify.cli import verify_command

PORT = 9000


@pytest.fixture(scope="module")
def network():
    require_network()
    with Network(zookeeper_nodes=1, brokers=2) as built:
        yield built


def _in_thread(network: Network, address: str, target, *args) -> threading.Thread:
    def run():
        with network.entered(address):
            target(*args)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _serve_tcp(address: str, ready: threading.Event, stop: threading.Event) -> None:
    with socket.create_server((address, PORT)) as server:
        server.settimeout(0.1)
        ready.set()
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.close()


def _connects(address: str, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((address, PORT), timeout=timeout):
            return True
    except TimeoutError:
        return False


@pytest.fixture
def b1_listening(network):
    ready, stop = threading.Event(), threading.Event()
    thread = _in_thread(network, network.broker_address(1), _serve_tcp, network.broker_address(1), ready, stop)
    assert ready.wait(10)
    yield network.broker_address(1)
    stop.set()
    thread.join(5)
    network.heal()


def _netns_inode() -> int:
    return os.stat("/proc/thread-self/ns/net").st_ino


def test_entered_moves_only_this_thread_and_back(network):
    home = _netns_inode()
    with network.entered(network.clients):
        inside = _netns_inode()
        seen = []
        other = threading.Thread(target=lambda: seen.append(_netns_inode()))
        other.start()
        other.join()
    assert inside != home and _netns_inode() == home
    assert seen == [inside]  # a thread started inside is born there


def test_a_cut_drops_packets_both_ways_until_healed(network, b1_listening):
    with network.entered(network.clients):
        assert _connects(b1_listening)
        network.cut(network.clients, b1_listening)
        assert not _connects(b1_listening)  # a timeout, not a refusal: the SYN is lost
        assert "counter packets 0 bytes 0 drop" not in network.rules().split("\n")[3]
        network.heal()
        assert _connects(b1_listening)


def test_one_way_loss_loses_one_direction_only(network):
    b1, clients = network.broker_address(1), network.clients
    received: dict[str, list[bytes]] = {"b1": [], "clients": []}

    def receive(name: str, address: str, ready: threading.Event) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind((address, PORT))
            sock.settimeout(1.5)
            ready.set()
            try:
                while True:
                    received[name].append(sock.recv(100))
            except TimeoutError:
                pass

    def send(source: str, destination: str) -> None:
        with network.entered(source), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for _ in range(3):
                sock.sendto(b"x", (destination, PORT))

    network.drop(clients, b1)
    try:
        readies = [threading.Event(), threading.Event()]
        threads = [_in_thread(network, b1, receive, "b1", b1, readies[0]),
                   _in_thread(network, clients, receive, "clients", clients, readies[1])]
        assert all(r.wait(10) for r in readies)
        send(clients, b1)
        send(b1, clients)
        for thread in threads:
            thread.join(10)
    finally:
        network.heal()
    assert received == {"b1": [], "clients": [b"x"] * 3}


def test_a_share_of_packets_is_lost_with_a_partial_drop(network):
    b1 = network.broker_address(1)
    network.drop(network.clients, b1, percent=50)
    try:
        ready = threading.Event()
        got: list[bytes] = []

        def receive():
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.bind((b1, PORT + 1))
                sock.settimeout(1.5)
                ready.set()
                try:
                    while True:
                        got.append(sock.recv(100))
                except TimeoutError:
                    pass
        thread = _in_thread(network, b1, receive)
        assert ready.wait(10)
        with network.entered(network.clients), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for _ in range(200):
                sock.sendto(b"y", (b1, PORT + 1))
        thread.join(10)
    finally:
        network.heal()
    assert 40 <= len(got) <= 160, len(got)  # 200 at 50 %: far outside this is not a coin


def _links_here() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def test_nothing_is_ever_in_the_machines_namespace_and_destroy_removes_everything():
    require_network()
    before = _links_here()
    built = Network(zookeeper_nodes=3, brokers=3).create()
    try:
        assert _links_here() == before
        assert set(built.namespaces) <= set(netns._list())
        sleeper = subprocess.Popen([*built.launcher(built.broker_address(2)), "sleep", "60"])
    finally:
        built.destroy()
    assert sleeper.wait(10) == -9  # what the run started inside is gone with it
    assert not set(built.namespaces) & set(netns._list())
    assert _links_here() == before


CRASHING_RUN = """
import os, subprocess, sys
from eoslog.faults.netns import Network
network = Network(1, 1, prefix=sys.argv[1]).create()
sleeper = subprocess.Popen([*network.launcher(network.broker_address(1)), "sleep", "120"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(sleeper.pid, flush=True)
os.kill(os.getpid(), 9)
"""


def test_cleanup_removes_what_a_crashed_run_left_and_keeps_a_live_runs_namespaces():
    require_network()
    prefix = f"eoslog-net-test{os.getpid()}x"
    crashed = subprocess.run([sys.executable, "-c", CRASHING_RUN, prefix], capture_output=True, text=True,
                             timeout=60, check=False)
    assert crashed.returncode == -9, crashed.stderr
    sleeper = int(crashed.stdout.split()[0])
    live = Network(1, 1, prefix=prefix).create()
    try:
        left = [n for n in netns._list() if n.startswith(prefix) and n not in live.namespaces]
        assert len(left) == 4  # the bridge, clients, zk1 and b1 of the crashed run
        assert sorted(netns.cleanup(prefix)) == sorted(left)
        assert set(live.namespaces) <= set(netns._list())
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{sleeper}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{sleeper}")  # killed with its namespace
    finally:
        live.destroy()
    assert not [n for n in netns._list() if n.startswith(prefix)]


def test_the_cleanup_command_reports_what_it_removed():
    require_network()
    outcome = CliRunner().invoke(verify_command, ["cleanup"])
    assert outcome.exit_code == 0, outcome.output
    assert outcome.output.startswith("removed ")
