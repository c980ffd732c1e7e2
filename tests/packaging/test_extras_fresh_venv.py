"""Each extra alone, as a user installs it (issue 40): the wheel (built once per session, conftest.py) with
no extra, with `console` and with `spark`, each in a fresh venv without system site-packages. Each runs
what its extra promises, and the commands of the extras it lacks stop with the one-line hint naming the
pip install, from a venv that really lacks them (test_extra_hints.py blocks the modules instead).

Installing comes from pip's cache or PyPI: ~5 s for none or console, ~16 s and 800 MB for spark (pyspark,
pyarrow, numpy), whose check also starts a JVM; the module is marked slow.
"""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from venvs import clean_env, fresh_venv

pytestmark = [pytest.mark.packaging, pytest.mark.slow]


def _eoslog(venv: Path, *args: str, cwd: Path, input: str | None = None, timeout: float = 120):
    return subprocess.run([str(venv / "bin/eoslog"), *args], cwd=cwd, env=clean_env(), input=input,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _hint(command: str, extra: str, module: str) -> str:
    return f"Error: eoslog {command} needs the {extra} extra ({module} is not installed): pip install 'eoslog[{extra}]'"


def _wait_for_file(path: Path, process: subprocess.Popen, log: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return path.read_text().strip()


class Served:
    """A process of the venv's `eoslog` that writes a port file once it listens; SIGTERM at exit."""

    def __init__(self, venv: Path, where: Path, name: str, *args: str) -> None:
        self.port_file, self.log = where / f"{name}.port", where / f"{name}.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([str(venv / "bin/eoslog"), *args, "--port-file", str(self.port_file)],
                                            cwd=where, env=clean_env(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)

    def __enter__(self) -> str:
        try:
            return f"127.0.0.1:{int(_wait_for_file(self.port_file, self.process, self.log))}"
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc_info) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _broker(venv: Path, where: Path) -> Served:
    return Served(venv, where, "broker", "serve", "--listen", "127.0.0.1:0", "--data-dir", str(where / "data"),
                  "--set", "group.initial.rebalance.delay.ms=0")


def test_no_extra_gives_the_hint_for_each_command_that_needs_one(wheel, tmp_path):
    venv = fresh_venv(wheel, tmp_path, None)
    for args, extra, module in ((["produce", "t"], "console", "confluent_kafka"),
                                (["console"], "console", "starlette"),
                                (["pipeline", "--transfers", "10"], "spark", "confluent_kafka"),  # its first import
                                (["verify", "--duration", "1"], "verify", "confluent_kafka"),
                                (["bench"], "bench", "confluent_kafka")):
        done = _eoslog(venv, *args, cwd=tmp_path, input="")
        assert (done.returncode, done.stderr.strip()) == (1, _hint(args[0], extra, module)), done.stderr


def test_the_console_extra_produces_consumes_and_serves_the_web_console(wheel, tmp_path):
    venv = fresh_venv(wheel, tmp_path, "console")
    with _broker(venv, tmp_path) as bootstrap:
        produced = _eoslog(venv, "produce", "extras", "-b", bootstrap, cwd=tmp_path, input="a\nb\n")
        assert produced.returncode == 0, produced.stderr
        consumed = _eoslog(venv, "consume", "extras", "-b", bootstrap, "--from-beginning", "--max-messages", "2",
                           cwd=tmp_path)
        assert (consumed.returncode, consumed.stdout) == (0, "a\nb\n"), consumed.stderr
        console = Served(venv, tmp_path, "console", "console", "-b", bootstrap, "--listen", "127.0.0.1:0")
        with console as address, urllib.request.urlopen(f"http://{address}/", timeout=30) as page:
            assert page.status == 200 and b"<title>Overview" in page.read()
    done = _eoslog(venv, "pipeline", "--transfers", "10", cwd=tmp_path)
    assert (done.returncode, done.stderr.strip()) == (1, _hint("pipeline", "spark", "pyspark")), done.stderr


SPARK_READ = """
import sys
import confluent_kafka
from pyspark.sql import SparkSession
import eoslog.spark

producer = confluent_kafka.Producer({"bootstrap.servers": sys.argv[1]})
for i in range(5):
    producer.produce("extras", str(i).encode())
assert producer.flush(30) == 0
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
eoslog.spark.register(spark)
rows = spark.read.format("eoslog").option("kafka.bootstrap.servers", sys.argv[1]).option("subscribe", "extras").load()
print(sorted(int(row.value) for row in rows.select("value").collect()))
spark.stop()
"""


def test_the_spark_extra_reads_a_topic_with_spark(wheel, tmp_path):
    venv = fresh_venv(wheel, tmp_path, "spark")
    # As after `source venv/bin/activate`: Spark starts its Python workers as `python3` from PATH
    # (PYSPARK_PYTHON unset), which must be the venv's, the one with eoslog.
    activated = {**clean_env(), "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}:{clean_env()['PATH']}"}
    with _broker(venv, tmp_path) as bootstrap:
        done = subprocess.run([str(venv / "bin/python"), "-c", SPARK_READ, bootstrap], cwd=tmp_path,
                              env=activated, capture_output=True, text=True, timeout=300, check=False)
        assert (done.returncode, done.stdout.strip().splitlines()[-1:]) == (0, ["[0, 1, 2, 3, 4]"]), done.stderr
    done = _eoslog(venv, "console", cwd=tmp_path)
    assert (done.returncode, done.stderr.strip()) == (1, _hint("console", "console", "starlette")), done.stderr
