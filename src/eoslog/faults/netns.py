"""A network of Linux network namespaces for fault runs: one namespace per host (each ZooKeeper node, each
broker, the clients), all joined by veth pairs to a bridge that lives in a namespace of its own.

    network = Network(zookeeper_nodes=3, brokers=3).create()
    try:
        with network.entered(network.clients):       # this thread's sockets are the clients' now
            ...                                        # start ZooKeeper and brokers with network.launcher(...)
        network.cut(network.broker_address(1), network.zookeeper_address(1))
        network.heal()
    finally:
        network.destroy()

What it may touch (and what it never does)
- It creates namespaces named ``eoslog-net-<pid>-<n>-<host>`` (``<pid>`` the creating process) and, inside
  them only, a bridge, veth pairs and addresses of RFC 2544's benchmarking range 198.18.0.0/24. Every veth
  is created inside a host's namespace with its peer born in the bridge's, so the machine's own namespace
  never holds any of them even for a moment; nothing there (interfaces, routes, firewall, sysctls) is read
  or changed. No namespace has a route beyond its /24, so no packet can leave the network.
- Links are cut by nftables drop rules in the bridge's namespace (nftables.py), so every cut is between two
  addresses of this network and healing empties one chain.
- :meth:`destroy` kills the processes still inside the namespaces (those the run started there) and
  deletes the namespaces, which takes the veths, the bridge and the rules with them. A run that crashed
  leaves its namespaces behind: :func:`cleanup` (``eoslog verify cleanup``) finds them by the prefix and
  removes those whose creating process is gone.

Threads: :meth:`entered` moves only the calling thread into a namespace (``setns(2)`` is per thread);
threads it starts meanwhile, e.g. a client library's, are born in that namespace and stay there.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Self

from eoslog.faults import nftables

PREFIX = "eoslog-net-"
SUBNET = "198.18.0."  # RFC 2544's benchmarking range, never routed here beyond the bridge
NETMASK = 24
BRIDGE = "br0"
CLIENTS = "clients"
NETNS_DIR = "/run/netns"
CLONE_NEWNET = 0x40000000
_counter = itertools.count(1)


class NetworkUnavailable(RuntimeError):
    """This machine (or this user) cannot create network namespaces with nftables rules."""


@dataclass(frozen=True)
class Host:
    name: str       # zk1, b2, clients
    address: str
    namespace: str


def _run(*command: str, input_text: str | None = None) -> str:
    done = subprocess.run(command, input=input_text, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise NetworkUnavailable(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def unavailable_reason() -> str | None:
    """Why this process cannot build a namespace network, or None when it can (checked by making and
    removing one namespace with an nftables table in it)."""
    if os.geteuid() != 0:
        return f"network namespaces and nftables need root (CAP_SYS_ADMIN, CAP_NET_ADMIN); running as uid {os.geteuid()}"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing (Debian package {package}; `make test` installs it)"
    probe = f"{PREFIX}{os.getpid()}-probe{next(_counter)}"
    try:
        _run("ip", "netns", "add", probe)
        _run("ip", "netns", "exec", probe, "nft", "-f", "-", input_text=nftables.create())
    except (NetworkUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot create a network namespace with an nftables table: {exc}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):  # Python 3.12
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"setns: {os.strerror(error)}")


class Network:
    """The namespaces of one run. Contract: addresses are fixed by role (clients .2, ZooKeeper node i
    .10+i, broker i .20+i), so a restarted process finds its peers where they were; the set of drops is
    owned here and applied as a whole, so ``cut``/``drop``/``heal`` may be called from any thread."""

    def __init__(self, zookeeper_nodes: int = 1, brokers: int = 3, prefix: str = PREFIX) -> None:
        if not 1 <= brokers <= 9 or zookeeper_nodes not in (1, 3):
            raise ValueError("1 to 9 brokers and 1 or 3 ZooKeeper nodes")
        self.run_id = f"{prefix}{os.getpid()}-{next(_counter)}"
        self.hosts: dict[str, Host] = {}
        self._add(CLIENTS, 2)
        for i in range(1, zookeeper_nodes + 1):
            self._add(f"zk{i}", 10 + i)
        for i in range(1, brokers + 1):
            self._add(f"b{i}", 20 + i)
        self.bridge_namespace = f"{self.run_id}-bridge"
        self.drops: set[nftables.Drop] = set()
        self._lock = threading.Lock()
        self.created = False

    def _add(self, name: str, last_octet: int) -> None:
        self.hosts[name] = Host(name, f"{SUBNET}{last_octet}", f"{self.run_id}-{name}")

    # ---- addresses ----------------------------------------------------------------------------------

    @property
    def clients(self) -> str:
        return self.hosts[CLIENTS].address

    def zookeeper_address(self, node_id: int) -> str:
        return self.hosts[f"zk{node_id}"].address

    def broker_address(self, broker_id: int) -> str:
        return self.hosts[f"b{broker_id}"].address

    def host_of(self, address: str) -> Host:
        return next(h for h in self.hosts.values() if h.address == address)

    @property
    def namespaces(self) -> list[str]:
        return [self.bridge_namespace, *(h.namespace for h in self.hosts.values())]

    def launcher(self, address: str) -> list[str]:
        """The command prefix that runs a program inside the namespace of the host at ``address``
        (``ip netns exec`` execs the program, so its pid is the program's: signals reach it directly)."""
        return ["ip", "netns", "exec", self.host_of(address).namespace]

    # ---- life cycle ---------------------------------------------------------------------------------

    def create(self) -> Network:
        try:
            for namespace in self.namespaces:
                _run("ip", "netns", "add", namespace)
            self.created = True
            bridge = self.bridge_namespace
            _run("ip", "-n", bridge, "link", "add", BRIDGE, "type", "bridge")
            _run("ip", "-n", bridge, "link", "set", "dev", BRIDGE, "up")
            for host in self.hosts.values():
                # Born in the host's namespace with its peer born in the bridge's: never in ours.
                _run("ip", "-n", host.namespace, "link", "add", "eth0", "type", "veth",
                     "peer", "name", host.name, "netns", bridge)
                _run("ip", "-n", bridge, "link", "set", "dev", host.name, "master", BRIDGE)
                _run("ip", "-n", bridge, "link", "set", "dev", host.name, "up")
                _run("ip", "-n", host.namespace, "addr", "add", f"{host.address}/{NETMASK}", "dev", "eth0")
                _run("ip", "-n", host.namespace, "link", "set", "dev", "eth0", "up")
                _run("ip", "-n", host.namespace, "link", "set", "dev", "lo", "up")
            _run("ip", "netns", "exec", bridge, "nft", "-f", "-", input_text=nftables.create())
        except BaseException:
            self.destroy()
            raise
        return self

    def destroy(self) -> None:
        if self.created:
            _remove(self.namespaces)
            self.created = False

    def __enter__(self) -> Self:
        return self.create()

    def __exit__(self, *exc_info) -> None:
        self.destroy()

    @contextlib.contextmanager
    def entered(self, address: str) -> Iterator[None]:
        """Moves the calling thread into the namespace of the host at ``address`` and back."""
        with open("/proc/thread-self/ns/net") as home, open(f"{NETNS_DIR}/{self.host_of(address).namespace}") as there:
            _setns(there.fileno())
            try:
                yield
            finally:
                _setns(home.fileno())

    # ---- links --------------------------------------------------------------------------------------

    def cut(self, a: str, b: str) -> None:
        """Packets between ``a`` and ``b`` are lost both ways, until :meth:`heal`."""
        self.add_drops(nftables.cut(a, b))

    def drop(self, source: str, destination: str, percent: int = 100) -> None:
        """Packets from ``source`` to ``destination`` only (one-way loss)."""
        self.add_drops({nftables.Drop(source, destination, percent)})

    def add_drops(self, drops: set[nftables.Drop]) -> None:
        with self._lock:
            self._apply(self.drops | drops)

    def heal(self) -> None:
        with self._lock:
            self._apply(set())

    def _apply(self, drops: set[nftables.Drop]) -> None:
        _run("ip", "netns", "exec", self.bridge_namespace, "nft", "-f", "-", input_text=nftables.replace(drops))
        self.drops = drops

    def rules(self) -> str:
        """The drop chain as nftables lists it now, with its counters."""
        return _run("ip", "netns", "exec", self.bridge_namespace, "nft", "list", "chain", "bridge",
                    nftables.TABLE, nftables.CHAIN)


def _remove(namespaces: list[str]) -> None:
    """Kills what still runs in the namespaces, then deletes them (with their links and rules)."""
    present = set(_list())
    for namespace in namespaces:
        if namespace not in present:
            continue
        for _ in range(50):
            pids = [int(p) for p in _run("ip", "netns", "pids", namespace).split()]
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)  # a stopped process dies only once it runs again
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)


def _list() -> list[str]:
    try:
        return [line.split()[0] for line in _run("ip", "netns", "list").splitlines() if line.strip()]
    except (NetworkUnavailable, OSError):
        return []


def _owner(namespace: str, prefix: str) -> int | None:
    head = namespace[len(prefix):].split("-", 1)[0]
    return int(head) if head.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup(prefix: str = PREFIX, force: bool = False) -> list[str]:
    """Removes the namespaces a crashed run left behind (named ``prefix<pid>-...``), with whatever still
    runs inside them; those of a process still alive are kept unless ``force``. Returns what it removed."""
    leftovers = [n for n in _list() if n.startswith(prefix)
                 and (force or (owner := _owner(n, prefix)) is None or not _alive(owner))]
    _remove(leftovers)
    return leftovers
