"""A command whose extra is missing says so in one line (issue 40): `eoslog pipeline`, `demo` and `verify`
printed a ~30-line traceback instead.

The extra's modules are blocked in a fresh interpreter (``sys.modules[name] = None`` makes their import
fail as if they were not installed); tests/packaging/test_extras_fresh_venv.py checks the same lines from
venvs that really lack them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from eoslog.tools.extras import hint

RUN_BLOCKED = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from eoslog.cli import main
sys.argv = ["eoslog", *sys.argv[2:]]
main()
"""


def _eoslog_without(modules: list[str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN_BLOCKED, ",".join(modules), *args], capture_output=True,
                          text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("args", "blocked", "extra", "module"), [
    (["pipeline", "--transfers", "10"], ["pyspark"], "spark", "pyspark"),
    (["pipeline", "--transfers", "10"], ["confluent_kafka"], "spark", "confluent_kafka"),
    (["demo", "--messages", "10"], ["confluent_kafka"], "console", "confluent_kafka"),
    (["verify", "--duration", "1"], ["confluent_kafka"], "verify", "confluent_kafka"),
    (["produce", "t"], ["confluent_kafka"], "console", "confluent_kafka"),
    (["consume", "t"], ["confluent_kafka"], "console", "confluent_kafka"),
    (["console"], ["starlette"], "console", "starlette"),
    (["schema-registry", "--bootstrap", "127.0.0.1:9", "--listen", "127.0.0.1:0"], ["avro"], "schema-registry", "avro"),
    (["schema-registry", "--bootstrap", "127.0.0.1:9", "--listen", "127.0.0.1:0"], ["grpc_tools"], "schema-registry", "grpc_tools"),
    (["schema-registry", "--bootstrap", "127.0.0.1:9", "--listen", "127.0.0.1:0"], ["confluent_kafka"], "schema-registry",
     "confluent_kafka"),
])
def test_a_missing_extra_is_one_line_naming_the_pip_install(args, blocked, extra, module):
    result = _eoslog_without(blocked, *args)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"Error: eoslog {args[0]} needs the {extra} extra ({module} is not installed): " \
                   f"pip install 'eoslog[{extra}]'"
    assert last == f"Error: {hint(args[0], module)}"


def test_an_import_error_of_eoslog_itself_is_not_hidden_behind_a_hint():
    """Only modules that extras install get the hint: a broken eoslog import is still a traceback."""
    result = _eoslog_without(["eoslog.pipeline.runner"], "pipeline", "--transfers", "10")
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "pip install" not in result.stderr
