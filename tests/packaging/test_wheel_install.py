"""`pip install eoslog` from a built wheel, in a fresh venv (issue 17): the package as users get it, not
the editable install the rest of the suite runs against.

The wheel is built from a copy of the tree (pip builds in place, which would leave build/ and *.egg-info
in the worktree), installed with its default dependencies (from PyPI or pip's cache) into a fresh venv
without system site-packages, and then only that venv's interpreter runs: `eoslog --version` and
`--help`, `eoslog serve` on port 0 with a port file, and a produce/consume round with kafka-python (a
default dependency).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.packaging, pytest.mark.slow]

ROUND_TRIP = """
import sys
from kafka import KafkaConsumer, KafkaProducer
import eoslog
assert sys.argv[2] in eoslog.__file__, eoslog.__file__  # the installed package, not the source tree
producer = KafkaProducer(bootstrap_servers=sys.argv[1])
for i in range(10):
    producer.send("wheel-check", str(i).encode())
producer.flush(timeout=30)
producer.close()
consumer = KafkaConsumer("wheel-check", bootstrap_servers=sys.argv[1], auto_offset_reset="earliest",
                         consumer_timeout_ms=20000)
values = []
for message in consumer:
    values.append(int(message.value))
    if len(values) == 10:
        break
consumer.close()
print(sorted(values))
"""


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH: the suite's own (the source tree) must not leak into the fresh venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def _run(*command, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=_clean_env(), capture_output=True, text=True,
                            timeout=timeout, check=False)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", work / "dist", source, cwd=work)
    (built,) = (work / "dist").glob("eoslog-*.whl")
    return built


def test_the_wheel_carries_the_runtime_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    specs = {p.name for p in (ROOT / "src/eoslog/protocol/extensions").glob("*.json")}
    assert specs and {f"eoslog/protocol/extensions/{n}" for n in specs} <= names
    assert "eoslog/cli.py" in names and "eoslog/server/run.py" in names
    assert "eoslog/spark/site/sitecustomize.py" in names  # on Spark workers' PYTHONPATH (eoslog/spark/daemon.py)


def test_a_fresh_venv_from_the_wheel_serves_and_round_trips(wheel, tmp_path):
    venv = tmp_path / "venv"
    # Without pip of its own (bootstrapping one costs seconds); this interpreter's pip installs into it.
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python, eoslog = venv / "bin/python", venv / "bin/eoslog"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--disable-pip-version-check",
         wheel, cwd=tmp_path, timeout=300)
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    version = _run(eoslog, "--version", cwd=tmp_path).stdout.strip()
    assert version == "eoslog, version 0.1.0"
    # --help imports every lazy command: none may need an extra the default install lacks to be listed.
    assert "serve" in _run(eoslog, "--help", cwd=tmp_path).stdout

    port_file, log_path = tmp_path / "port", tmp_path / "broker.log"
    with open(log_path, "wb") as log:
        broker = subprocess.Popen([eoslog, "serve", "--listen", "127.0.0.1:0", "--data-dir", tmp_path / "data",
                                   "--port-file", port_file, "--set", "group.initial.rebalance.delay.ms=0"],
                                  cwd=tmp_path, env=_clean_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert broker.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        bootstrap = f"127.0.0.1:{int(port_file.read_text())}"
        result = _run(python, "-c", ROUND_TRIP, bootstrap, str(venv), cwd=tmp_path, timeout=60)
        assert result.stdout.strip() == str(list(range(10)))
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(timeout=30) == 0, log_path.read_text()
