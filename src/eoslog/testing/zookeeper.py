"""Real ZooKeeper servers (Debian's ``zookeeper`` package) for tests and ``eoslog cluster up``.

One node or an ensemble of three, each in its own data directory on loopback ports, started as
``java ... QuorumPeerMain zoo.cfg`` with a small JVM; readiness is ZooKeeper's own ``ruok``/``srvr``
four-letter words, waited for with a deadline. Every node can be killed (SIGKILL), paused (SIGSTOP),
resumed and restarted on the same ports and data, so tests can take ZooKeeper away and give it back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import weakref
from pathlib import Path

from eoslog.testing.process import free_port

CLASSPATH = ("/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar")
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# A small, quickly started JVM: ZooKeeper for tests needs little heap and no optimising JIT.
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
TICK_MS = 500  # session timeouts between 2 and 20 ticks: 1 s to 10 s


class ZooKeeperUnavailable(RuntimeError):
    """Java or Debian's zookeeper package is missing, or a server did not become ready in time."""


def four_letter_word(port: int, word: bytes, timeout: float = 1.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(word)
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


class ZooKeeperNode:
    def __init__(self, directory: Path, node_id: int, client_port: int, servers: list[tuple[int, int, int]]):
        self.directory = Path(directory)
        self.node_id = node_id
        self.client_port = client_port
        self.servers = servers  # (id, quorum port, election port); empty for a standalone node
        self.process: subprocess.Popen | None = None
        self.log_path = self.directory / "zookeeper.log"

    def _write_config(self) -> Path:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={TICK_MS}", f"dataDir={data}", f"clientPort={self.client_port}",
            "clientPortAddress=127.0.0.1", "initLimit=20", "syncLimit=5", f"minSessionTimeout={2 * TICK_MS}",
            "maxSessionTimeout=60000", "admin.enableServer=false", "4lw.commands.whitelist=*",
            "maxClientCnxns=0", "autopurge.purgeInterval=0",
        ]
        if self.servers:
            (data / "myid").write_text(f"{self.node_id}\n")
            lines += [f"server.{i}=127.0.0.1:{q}:{e}" for i, q, e in self.servers]
        path = self.directory / "zoo.cfg"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self) -> None:
        if not Path(CLASSPATH[1]).exists():
            raise ZooKeeperUnavailable("Debian's zookeeper package is not installed (make test installs it)")
        config = self._write_config()
        command = ["java", *JVM_OPTIONS, "-cp", ":".join(CLASSPATH), f"-Dzookeeper.log.dir={self.directory}",
                   "-Dzookeeper.root.logger=INFO,CONSOLE", MAIN, str(config)]
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        log.close()
        weakref.finalize(self, _kill_quietly, self.process)

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        try:
            if four_letter_word(self.client_port, b"ruok") != b"imok":
                return False
            status = four_letter_word(self.client_port, b"srvr")
        except OSError:
            return False
        return b"Mode: standalone" in status or b"Mode: leader" in status or b"Mode: follower" in status

    def mode(self) -> str | None:
        try:
            for line in four_letter_word(self.client_port, b"srvr").decode().splitlines():
                if line.startswith("Mode:"):
                    return line.split(":", 1)[1].strip()
        except OSError:
            return None
        return None

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.is_running:
                raise ZooKeeperUnavailable(f"ZooKeeper node {self.node_id} exited; log:\n{self.log_tail()}")
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
        if self.is_running:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(30)

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self, timeout: float = 15.0) -> None:
        if not self.is_running:
            return
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)

    def restart(self, timeout: float = 60.0) -> None:
        self.kill()
        self.start()
        self.wait_ready(timeout)


def _kill_quietly(process: subprocess.Popen) -> None:
    with contextlib.suppress(Exception):
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()


class ZooKeeperEnsemble:
    """One standalone ZooKeeper or a quorum of three, on loopback ports."""

    def __init__(self, base_dir: Path, nodes: int = 1) -> None:
        if nodes not in (1, 3):
            raise ValueError("a ZooKeeper ensemble here has 1 or 3 nodes")
        base_dir = Path(base_dir)
        servers = [] if nodes == 1 else [(i, free_port(), free_port()) for i in range(1, nodes + 1)]
        self.nodes = [ZooKeeperNode(base_dir / f"zk-{i}", i, free_port(), servers) for i in range(1, nodes + 1)]

    @property
    def connect_string(self) -> str:
        return ",".join(f"127.0.0.1:{n.client_port}" for n in self.nodes)

    def connect_string_with_chroot(self, chroot: str) -> str:
        return self.connect_string + "/" + chroot.strip("/")

    def start(self, timeout: float = 90.0) -> ZooKeeperEnsemble:
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            node.wait_ready(timeout)
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> ZooKeeperEnsemble:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc_info) -> None:
        self.stop()
