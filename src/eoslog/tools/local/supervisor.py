"""What ``eoslog cluster up`` does while the cluster runs: it watches the ZooKeeper and broker processes it
started, says when one dies and with which status (reaping it, so none is left ``<defunct>``), and stops,
starts and restarts one broker when asked over a Unix socket in the cluster's directory.

    eoslog cluster restart 2 --dir DIR      # what `cluster up` prints; the socket is DIR/control.sock

The protocol is one JSON object per line each way: ``{"action": "restart", "broker": 2}`` in,
``{"ok": true, "message": "...", "members": [...]}`` out; ``status`` lists the members only. One
request is served at a time, on the thread that also polls the processes, so a restart and a death
report never interleave.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

CONTROL_SOCKET = "control.sock"
ACTIONS = ("status", "stop", "start", "restart")


@dataclass
class Member:
    """One process of the cluster as `cluster up` and `cluster status` show it."""

    role: str  # "zookeeper" or "broker"
    id: int
    pid: int | None
    state: str  # "running", "stopped" (on request) or "exited: <how>"
    address: str
    data_dir: str
    log: str


def describe_exit(returncode: int) -> str:
    """``-9`` -> ``killed by SIGKILL``, ``1`` -> ``exit status 1`` (Popen's negative codes are signals)."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


class ClusterSupervisor:
    """Owns the processes of one :class:`~eoslog.tools.local.cluster.EmbeddedCluster` after it started.

    Only the thread that calls :meth:`poll` and :meth:`handle` touches the processes (Popen objects are
    not shared). A process is reaped the first time :meth:`poll` sees it gone (Popen.poll waits for it),
    and reported once."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self._reported: set[tuple[str, int, int]] = set()  # (role, id, pid) already said to be gone
        self._stopped: set[int] = set()  # brokers stopped on request: not deaths

    # ---- what runs ----------------------------------------------------------------------------------

    def members(self) -> list[Member]:
        out = []
        for node in self.cluster.zookeeper.nodes:
            out.append(Member("zookeeper", node.node_id, _pid(node.process), _state(node.process, False),
                              node.connect_string, str(node.directory), str(node.log_path)))
        for broker_id, broker in sorted(self.cluster.brokers.items()):
            out.append(Member("broker", broker_id, _pid(broker.process),
                              _state(broker.process, broker_id in self._stopped), broker.bootstrap,
                              str(broker.data_dir), str(broker.log_path)))
        return out

    def poll(self) -> list[str]:
        """One line for each process that died since the last call (not one stopped on request)."""
        lines = []
        for member, process in self._processes():
            if process is None or process.poll() is None:
                continue
            key = (member.role, member.id, process.pid)
            if key in self._reported or (member.role == "broker" and member.id in self._stopped):
                continue
            self._reported.add(key)
            line = f"{member.role} {member.id} (pid {process.pid}) died: {describe_exit(process.returncode)}; log {member.log}"
            if member.role == "broker":
                line += f"; `eoslog cluster start {member.id} --dir {self.cluster.base_dir}` starts it again"
            lines.append(line)
        return lines

    def _processes(self):
        for member in self.members():
            if member.role == "zookeeper":
                yield member, self.cluster.zookeeper.node(member.id).process
            else:
                yield member, self.cluster.brokers[member.id].process

    # ---- requests -----------------------------------------------------------------------------------

    def handle(self, request: dict) -> dict:
        action, broker_id = request.get("action"), request.get("broker")
        if action not in ACTIONS:
            return self._answer(False, f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        if action == "status":
            return self._answer(True, "")
        if broker_id not in self.cluster.brokers:
            known = ", ".join(map(str, sorted(self.cluster.brokers)))
            return self._answer(False, f"no broker {broker_id} in this cluster (brokers: {known})")
        broker = self.cluster.brokers[broker_id]
        running = broker.process is not None and broker.process.poll() is None
        if action == "stop":
            if not running:
                return self._answer(False, f"broker {broker_id} is not running")
            pid = broker.process.pid
            self._stopped.add(broker_id)
            status = broker.stop()
            return self._answer(True, f"broker {broker_id} (pid {pid}) stopped: {describe_exit(status)}")
        if action == "start" and running:
            return self._answer(False, f"broker {broker_id} is already running (pid {broker.process.pid})")
        if running:  # restart: a clean stop first (flush, checkpoints), as an operator's restart would
            self._stopped.add(broker_id)
            broker.stop()
        try:
            broker.start()
        except (RuntimeError, TimeoutError) as exc:
            return self._answer(False, f"broker {broker_id} did not start: {str(exc).splitlines()[0]}; "
                                       f"log {broker.log_path}")
        finally:
            self._stopped.discard(broker_id)
        verb = "restarted" if action == "restart" else "started"
        return self._answer(True, f"broker {broker_id} {verb} (pid {broker.process.pid}) on {broker.bootstrap}")

    def _answer(self, ok: bool, message: str) -> dict:
        return {"ok": ok, "message": message, "members": [asdict(m) for m in self.members()]}


class ControlServer:
    """The Unix socket `cluster up` answers on: :meth:`serve_once` waits up to ``timeout`` for one client
    and answers its one request (the same wait paces the supervision loop)."""

    def __init__(self, path: Path, supervisor: ClusterSupervisor) -> None:
        self.path = path
        self.supervisor = supervisor
        path.unlink(missing_ok=True)
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(str(path))
        os.chmod(path, 0o600)  # only the user who started the cluster may stop its brokers
        self._socket.listen(4)

    def serve_once(self, timeout: float) -> tuple[dict, dict] | None:
        """The request and its answer, or None if no client came."""
        readable, _, _ = select.select([self._socket], [], [], timeout)
        if not readable:
            return None
        connection, _ = self._socket.accept()
        with connection, connection.makefile("rwb") as stream:
            connection.settimeout(10)
            try:
                request = json.loads(stream.readline() or b"{}")
            except (ValueError, OSError):
                request = {}
            answer = self.supervisor.handle(request if isinstance(request, dict) else {})
            with contextlib.suppress(OSError):
                stream.write(json.dumps(answer).encode() + b"\n")
                stream.flush()
            return request, answer

    def close(self) -> None:
        self._socket.close()
        self.path.unlink(missing_ok=True)


def send(directory: Path, request: dict, timeout: float = 120.0) -> dict:
    """A client's request to the `cluster up` running on ``directory``; OSError when none runs there."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        client.connect(str(directory / CONTROL_SOCKET))
        with client.makefile("rwb") as stream:
            stream.write(json.dumps(request).encode() + b"\n")
            stream.flush()
            line = stream.readline()
    if not line:
        raise OSError("the cluster closed the connection without an answer")
    return json.loads(line)


def _pid(process) -> int | None:
    return None if process is None else process.pid


def _state(process, stopped: bool) -> str:
    if process is None:
        return "not started"
    if process.poll() is None:
        return "running"
    return "stopped" if stopped else f"exited: {describe_exit(process.returncode)}"
