"""docs/spark.md's ``<!-- doc-test: spark -->`` Python blocks run as a reader runs them: one script, in a
Python process of its own, with the interpreter eoslog is installed in called by its path and the
virtualenv not activated (no ``PYSPARK_PYTHON``, no venv on ``PATH``), so Spark's own Python processes find
eoslog only if eoslog's entry points say which interpreter they are (issue 40). A local SparkSession stands
for the page's ``spark``; an embedded broker with the topic ``payments`` for ``127.0.0.1:9092``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from doc_blocks import Block, blocks
from doc_runner import DEFAULT_BOOTSTRAP, ROOT

from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop
PAGE = ROOT / "docs/spark.md"

SESSION = textwrap.dedent("""\
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    """)


def _not_activated() -> dict[str, str]:
    """The environment of a shell where the venv was never activated: no PYSPARK_PYTHON, and `python3` on
    PATH is not the venv's."""
    venv_bin = str(Path(sys.executable).parent)
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    return env


def _script(page: list[Block], bootstrap: str) -> str:
    parts = [SESSION] + [f"# {block.where}\n" + "\n".join(block.lines) for block in page]
    return "\n\n".join(parts).replace(DEFAULT_BOOTSTRAP, bootstrap) + "\nprint('the page ran')\n"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from confluent_kafka.admin import AdminClient, NewTopic

    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("doc-spark") / "data") as started:
        admin = AdminClient({"bootstrap.servers": started.bootstrap})
        admin.create_topics([NewTopic("payments", 2, 1)])["payments"].result(30)
        yield started.bootstrap


def test_the_spark_page_runs_as_written_without_an_activated_venv(broker, tmp_path):
    page = blocks(PAGE, "spark")
    assert all(block.language == "python" for block in page)
    script = tmp_path / "page.py"
    script.write_text(_script(page, broker))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_not_activated(), text=True,
                          capture_output=True, timeout=300, check=False)
    assert done.returncode == 0 and "the page ran" in done.stdout, done.stdout + done.stderr[-6000:]
