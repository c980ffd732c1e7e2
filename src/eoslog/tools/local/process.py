"""``eoslog serve`` as a child process, for tests and ``eoslog verify`` that SIGKILL, SIGSTOP and restart the
broker, and for ``eoslog cluster up`` and ``eoslog pipeline``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eoslog.tools.local.signals import stop_process

# free_port() picks a port for a server that must keep its address (a broker restarted on the same port, a
# ZooKeeper quorum's config), closes it, and the server binds it later. Two things could take the port in
# between: a client connection, whose local port the kernel takes from the ephemeral range, and another
# pytest-xdist worker picking the same one. So ports come from below the ephemeral range, each worker has a
# slice of its own, and a process walks its slice from a random start so it never hands out one port twice.
_PORTS_FROM = 10_000
_port_cursor: int | None = None


def _port_slice() -> tuple[int, int] | None:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ranges:
            ephemeral_from = int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    width = (ephemeral_from - _PORTS_FROM) // workers
    if width < 1_000:
        return None
    low = _PORTS_FROM + (index % workers) * width
    return low, low + width


def free_port() -> int:
    global _port_cursor
    span = _port_slice()
    if span is None:  # not Linux, or an ephemeral range that leaves no room below it
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    low, high = span
    if _port_cursor is None or not low <= _port_cursor < high:
        _port_cursor = low + int.from_bytes(os.urandom(4), "big") % (high - low)
    for _ in range(high - low):
        port = _port_cursor
        _port_cursor = low + (_port_cursor + 1 - low) % (high - low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # a listener, or a connection's TIME_WAIT, holds it
            return port
    raise OSError(f"no free port in {low}-{high - 1}")


class BrokerProcess:
    """A broker subprocess with a fixed port (so clients reconnect to the same address after restarts)."""

    def __init__(self, data_dir: Path | None = None, port: int | None = None,
                 properties: dict[str, str] | None = None, advertised: str | None = None,
                 log_path: Path | None = None, file_size_limit: int | None = None, host: str = "127.0.0.1",
                 launcher: tuple[str, ...] = ()) -> None:
        self._tempdir = None
        if data_dir is None:
            self._tempdir = tempfile.TemporaryDirectory(prefix="eoslog-proc-")
            data_dir = Path(self._tempdir.name) / "data"
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.host = host
        self.launcher = launcher  # a command prefix, e.g. one that enters a network namespace (faults/netns.py)
        self.properties = {"group.initial.rebalance.delay.ms": "0", **(properties or {})}
        self.advertised = advertised
        self.log_path = log_path or self.data_dir.parent / f"broker-{self.port}.log"
        self.process: subprocess.Popen | None = None
        self._stop_requested = False  # SIGTERM already sent to the running process
        self.starts = 0
        # RLIMIT_FSIZE for the broker: a write past it fails with EFBIG (CPython ignores SIGXFSZ), which
        # is how a test gives one broker a full disk without touching the machine's filesystems.
        self.file_size_limit = file_size_limit

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        self.launch()
        return self.wait_ready(timeout)

    @property
    def _port_file(self) -> Path:
        return self.data_dir.parent / f"port-{self.port}"

    def launch(self) -> None:
        """Starts the process without waiting for it: a cluster launches all its brokers, then waits for
        each (:meth:`wait_ready`), so their interpreter start-ups overlap."""
        port_file = self._port_file
        port_file.parent.mkdir(parents=True, exist_ok=True)
        port_file.unlink(missing_ok=True)
        command = [
            *self.launcher, sys.executable, "-m", "eoslog", "serve", "--data-dir", str(self.data_dir),
            "--listen", f"{self.host}:{self.port}", "--port-file", str(port_file),
        ]
        if self.advertised:
            command += ["--advertised-listener", self.advertised]
        for name, value in self.properties.items():
            command += ["--set", f"{name}={value}"]
        log_file = open(self.log_path, "ab")
        self._stop_requested = False
        self.process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        preexec_fn=self._limits if self.file_size_limit else None)
        log_file.close()

    def wait_ready(self, timeout: float = 30.0) -> BrokerProcess:
        """Until the launched broker listens (it writes its port file then); it is killed on a timeout."""
        port_file = self._port_file
        deadline = time.monotonic() + timeout
        while not port_file.exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}; log:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"broker not ready within {timeout} s; log:\n{self.log_tail()}")
            time.sleep(0.02)
        self.starts += 1
        return self

    def _limits(self) -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (self.file_size_limit, self.file_size_limit))

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL: no flush, no checkpoint, no goodbye."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def terminate(self, timeout: float = 60.0) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None and not self._stop_requested:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def pause(self) -> None:
        """SIGSTOP; returns once every thread of the broker is stopped. RuntimeError if the broker has exited.

        The pid is signalled only while ``poll()`` says the child is not reaped: once reaped, the kernel
        may give its pid (pid_max is 32,768 here) to any process, another test's ZooKeeper or pytest
        worker, which a SIGSTOP would freeze past its sessions. An exited but unreaped child keeps its pid."""
        if self.process is None or self.process.poll() is not None:
            code = None if self.process is None else self.process.returncode
            raise RuntimeError(f"broker on port {self.port} is not running (exit code {code}): nothing to pause")
        stop_process(self.process.pid)

    def resume(self) -> None:
        """SIGCONT; nothing once the broker has exited (its pid may be someone else's by now)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def restart(self, hard: bool = True) -> "BrokerProcess":
        if hard:
            self.kill()
        else:
            self.terminate()
        return self.start()

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def request_stop(self) -> None:
        """SIGCONT (a paused broker could not act on it) and SIGTERM, without waiting for the exit."""
        if self.process is not None and self.process.poll() is None:
            for signum in (signal.SIGCONT, signal.SIGTERM):
                try:
                    self.process.send_signal(signum)
                except ProcessLookupError:
                    break
            self._stop_requested = True

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and the exit status; SIGKILL after ``timeout`` (a shutdown that hangs, e.g. with its
        ZooKeeper gone, must not leave the process running after the one that started it)."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.request_stop()
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def __exit__(self, *exc_info) -> None:
        if self.process is not None and self.process.poll() is None:
            self.stop()
        if self._tempdir is not None:
            self._tempdir.cleanup()
