"""`pip install eoslog` from a built wheel, in a fresh venv (issue 17): the package as users get it, not
the editable install the rest of the suite runs against.

The wheel is built from a copy of the tree (pip builds in place, which would leave build/ and *.egg-info
in the worktree), installed with its default dependencies (from PyPI or pip's cache) into a fresh venv
without system site-packages, and then only that venv's interpreter runs: `eoslog --version` and
`--help`, `eoslog serve` on port 0 with a port file, and a produce/consume round with kafka-python (a
default dependency).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from venvs import clean_env, run

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


def test_the_wheel_carries_the_runtime_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    specs = {p.name for p in (ROOT / "src/eoslog/protocol/extensions").glob("*.json")}
    assert specs and {f"eoslog/protocol/extensions/{n}" for n in specs} <= names
    assert "eoslog/cli.py" in names and "eoslog/server/run.py" in names
    assert "eoslog/spark/site/sitecustomize.py" in names  # on Spark workers' PYTHONPATH (eoslog/spark/daemon.py)
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    # The entry point that switches the collector off for start-up (eoslog/__main__.py), not eoslog.cli:main.
    assert "eoslog = eoslog.__main__:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_a_fresh_venv_from_the_wheel_serves_and_round_trips(wheel, tmp_path):
    venv = tmp_path / "venv"
    # Without pip of its own (bootstrapping one costs seconds); this interpreter's pip installs into it.
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python, eoslog = venv / "bin/python", venv / "bin/eoslog"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--disable-pip-version-check",
         wheel, cwd=tmp_path, timeout=300)
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    version = run(eoslog, "--version", cwd=tmp_path).stdout.strip()
    assert version == "eoslog, version 0.1.0"
    # --help imports every lazy command: none may need an extra the default install lacks to be listed.
    assert "serve" in run(eoslog, "--help", cwd=tmp_path).stdout

    port_file, log_path = tmp_path / "port", tmp_path / "broker.log"
    with open(log_path, "wb") as log:
        broker = subprocess.Popen([eoslog, "serve", "--listen", "127.0.0.1:0", "--data-dir", tmp_path / "data",
                                   "--port-file", port_file, "--set", "group.initial.rebalance.delay.ms=0"],
                                  cwd=tmp_path, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert broker.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        bootstrap = f"127.0.0.1:{int(port_file.read_text())}"
        result = run(python, "-c", ROUND_TRIP, bootstrap, str(venv), cwd=tmp_path, timeout=60)
        assert result.stdout.strip() == str(list(range(10)))
    finally:
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(timeout=30) == 0, log_path.read_text()
