"""Real ZooKeeper servers (Debian's ``zookeeper`` package) for tests and ``eoslog cluster up``.

One node or an ensemble of three, each in its own directory on loopback ports, started as
``java ... QuorumPeerMain zoo.cfg`` with a small JVM; readiness is ZooKeeper's own ``ruok``/``srvr``
four-letter words, waited for with a deadline. Every node can be killed (SIGKILL), paused (SIGSTOP),
resumed and restarted on the same ports and data, so tests can take ZooKeeper away and give it back.

    with ZooKeeperEnsemble(tmp_path, nodes=3) as zookeeper:
        client = KazooClient(hosts=zookeeper.connect_string)
        zookeeper.nodes[0].kill()

A node's directory holds ``zoo.cfg``, ``log4j.properties``, ``data/`` (snapshots, transaction logs, ``myid``)
and ``zookeeper.log`` (the server's stdout and stderr, appended across restarts).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import weakref
from pathlib import Path

from eoslog.tools.local.process import free_port
from eoslog.tools.local.signals import stop_process

# Debian's layout: libzookeeper-java installs zookeeper.jar, whose manifest Class-Path names every
# dependency by its /usr/share/java path, but no SLF4J binding, so a server started with Debian's own
# CLASSPATH ("/etc/zookeeper/conf:/usr/share/java/zookeeper.jar") logs nothing at all. The package
# depends on libslf4j-java and liblog4j1.2-java, so the log4j 1.2 binding is always there to add.
JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# A small, quickly started JVM: ZooKeeper for tests needs little heap and no optimising JIT.
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
TICK_MS = 500  # session timeouts between 2 and 120 ticks: 1 s to 60 s
# Our own log4j configuration, first on the classpath: /etc/zookeeper/conf is an alternatives link an
# administrator may point elsewhere, and its file logs to /var/log unless told otherwise.
LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
"""


class ZooKeeperUnavailable(RuntimeError):
    """Java or Debian's zookeeper package is missing, or a server did not become ready in time."""


def four_letter_word(port: int, word: bytes, timeout: float = 1.0, host: str = "127.0.0.1") -> bytes:
    """ZooKeeper's answer to a four-letter word (``ruok``, ``srvr``, ``mntr``...); the server closes
    the connection after answering."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


class ZooKeeperNode:
    """One ZooKeeper server process. Owns its directory and ports: they stay the same across restarts,
    so clients and the other members reach it at the same address with the same data. Not thread-safe;
    one test drives it."""

    def __init__(self, directory: Path, node_id: int, client_port: int, servers: list[tuple[int, str, int, int]],
                 host: str = "127.0.0.1", launcher: tuple[str, ...] = ()):
        self.directory = Path(directory)
        self.node_id = node_id
        self.client_port = client_port
        self.servers = servers  # (id, host, quorum port, election port); empty for a standalone node
        self.host = host
        self.launcher = launcher  # a command prefix, e.g. one that enters a network namespace (faults/netns.py)
        self.process: subprocess.Popen | None = None
        self.log_path = self.directory / "zookeeper.log"

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.client_port}"

    def _write_config(self) -> Path:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={TICK_MS}", f"dataDir={data}", f"clientPort={self.client_port}",
            f"clientPortAddress={self.host}",
            # Followers connect and sync within initLimit ticks, then must answer within syncLimit.
            "initLimit=10", "syncLimit=5",
            f"minSessionTimeout={2 * TICK_MS}", "maxSessionTimeout=60000",
            "admin.enableServer=false", "4lw.commands.whitelist=*",
            "maxClientCnxns=0", "autopurge.purgeInterval=0",
        ]
        if self.servers:
            (data / "myid").write_text(f"{self.node_id}\n")
            lines += [f"server.{i}={h}:{q}:{e}" for i, h, q, e in self.servers]
        path = self.directory / "zoo.cfg"
        path.write_text("\n".join(lines) + "\n")
        (self.directory / "log4j.properties").write_text(LOG4J_PROPERTIES)
        return path

    def start(self) -> None:
        """Launch the server and return at once; :meth:`wait_ready` waits for it to serve."""
        if self.is_running:
            return
        missing = [jar for jar in JARS if not Path(jar).exists()]
        if missing or shutil.which("java") is None:
            raise ZooKeeperUnavailable(f"Debian's zookeeper package or Java is missing ({', '.join(missing) or 'java'});"
                                       " make test installs it")
        config = self._write_config()
        command = [*self.launcher, "java", *JVM_OPTIONS, "-cp", ":".join((str(self.directory), *JARS)),
                   f"-Dzookeeper.log.dir={self.directory}", "-Dzookeeper.jmx.log4j.disable=true",
                   MAIN, str(config)]
        # A session of its own: Ctrl-C in a terminal reaches the Python process only, which then stops
        # ZooKeeper in order (after the brokers that use it).
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        # Never outlive the test run: killed when this node is collected or the interpreter exits.
        weakref.finalize(self, _kill_quietly, self.process)

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def mode(self) -> str | None:
        """``standalone``, ``leader`` or ``follower`` while serving; None while not (down, paused,
        electing, or a member without a quorum)."""
        try:
            reply = four_letter_word(self.client_port, b"srvr", host=self.host)
        except OSError:
            return None
        for line in reply.decode(errors="replace").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None  # "This ZooKeeper instance is not currently serving requests"

    def ready(self) -> bool:
        try:
            if four_letter_word(self.client_port, b"ruok", host=self.host) != b"imok":
                return False
        except OSError:
            return False
        # ruok answers imok as soon as the client port is open, before the member has joined a quorum.
        return self.mode() in ("standalone", "leader", "follower")

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.is_running:
                raise ZooKeeperUnavailable(f"ZooKeeper node {self.node_id} is not running; log:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ZooKeeperUnavailable(f"ZooKeeper node {self.node_id} not ready in {timeout} s; "
                                           f"log:\n{self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL: no goodbye to clients or the other members."""
        if self.is_running:
            self.process.send_signal(signal.SIGCONT)  # a paused process dies only once it runs again
            self.process.kill()
            self.process.wait(30)

    def pause(self) -> None:
        """SIGSTOP: the port stays open and connections are accepted, but nothing answers (from the
        moment this returns: it waits until every JVM thread is stopped)."""
        if not self.is_running:
            raise ZooKeeperUnavailable(f"ZooKeeper node {self.node_id} is not running")
        stop_process(self.process.pid)

    def resume(self) -> None:
        if self.is_running:
            os.kill(self.process.pid, signal.SIGCONT)

    def terminate(self) -> None:
        """SIGTERM without waiting (resumed first: a paused JVM cannot act on it)."""
        if self.is_running:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL if the JVM has not exited within ``timeout`` seconds."""
        if not self.is_running:
            return
        self.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)

    def restart(self, timeout: float = 60.0) -> None:
        """Kill (if running) and start again on the same ports and data; return once it serves."""
        self.kill()
        self.start()
        self.wait_ready(timeout)


def _kill_quietly(process: subprocess.Popen) -> None:
    with contextlib.suppress(Exception):
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
            process.wait(5)


class ZooKeeperEnsemble:
    """One standalone ZooKeeper or a quorum of three, on loopback ports, under ``base_dir/zk-<id>``.
    With ``network`` (faults/netns.py) each node runs in a network namespace of its own, at that
    network's address for it, on ZooKeeper's usual ports."""

    def __init__(self, base_dir: Path, nodes: int = 1, network=None) -> None:
        if nodes not in (1, 3):
            raise ValueError("a ZooKeeper ensemble here has 1 or 3 nodes")
        base_dir = Path(base_dir)
        ids = range(1, nodes + 1)
        if network is None:
            hosts = {i: "127.0.0.1" for i in ids}
            ports = {i: (free_port(), free_port(), free_port()) for i in ids}
        else:
            hosts = {i: network.zookeeper_address(i) for i in ids}
            ports = {i: (2181, 2888, 3888) for i in ids}
        servers = [] if nodes == 1 else [(i, hosts[i], ports[i][1], ports[i][2]) for i in ids]
        self.nodes = [ZooKeeperNode(base_dir / f"zk-{i}", i, ports[i][0], servers, host=hosts[i],
                                    launcher=() if network is None else tuple(network.launcher(hosts[i])))
                      for i in ids]

    @property
    def connect_string(self) -> str:
        return ",".join(node.connect_string for node in self.nodes)

    def connect_string_with_chroot(self, chroot: str) -> str:
        return self.connect_string + "/" + chroot.strip("/")

    def node(self, node_id: int) -> ZooKeeperNode:
        return self.nodes[node_id - 1]

    def leader(self) -> ZooKeeperNode | None:
        """The member in mode ``leader`` (or the standalone node), if one answers now."""
        return next((n for n in self.nodes if n.mode() in ("leader", "standalone")), None)

    def start(self, timeout: float = 90.0) -> ZooKeeperEnsemble:
        """Start every node and wait until each serves (members: leader or follower); a node that does
        not serve in time fails the start with its log, and the others are stopped."""
        try:
            for node in self.nodes:
                node.start()
            deadline = time.monotonic() + timeout
            for node in self.nodes:
                node.wait_ready(max(0.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        # Every member told first, then waited for: each JVM takes a few tenths of a second to exit.
        for node in self.nodes:
            node.terminate()
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
