"""Spark's Python processes import pyspark from the installed package (cached bytecode), not pyspark.zip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

from eoslog.spark.daemon import SESSION_CONFIG, SITE_DIR, installed_package_root

PACKAGE = Path(pyspark.__file__).parent
LIB = PACKAGE / "python" / "lib"
ZIPS = [str(LIB / "pyspark.zip"), *(str(p) for p in LIB.glob("py4j-*-src.zip"))]
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _layout(root: Path, with_cache: bool = True) -> Path:
    lib = root / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (root / "pyspark" / "__init__.py").write_text("")
    if with_cache:
        (root / "pyspark" / "__pycache__").mkdir()
    (lib / "pyspark.zip").write_bytes(b"")
    return lib / "pyspark.zip"


def test_the_zip_inside_an_installed_package_points_at_that_package(tmp_path):
    zip_path = _layout(tmp_path / "site-packages")
    assert installed_package_root(["/elsewhere", str(zip_path), "/x.jar"]) == str(tmp_path / "site-packages")


def test_a_spark_distributions_zip_or_a_package_without_bytecode_is_left_alone(tmp_path):
    assert installed_package_root([str(tmp_path / "spark-4.3.0-bin" / "python" / "lib" / "pyspark.zip")]) is None
    assert installed_package_root([str(_layout(tmp_path / "nocache", with_cache=False))]) is None
    assert installed_package_root(["/usr/lib/python3/dist-packages"]) is None


def test_the_session_config_puts_the_site_dir_first_and_keeps_the_drivers_path():
    entries = SESSION_CONFIG["spark.executorEnv.PYTHONPATH"].split(os.pathsep)
    assert entries[0] == SITE_DIR
    assert os.pathsep.join(entries[1:]) == os.environ.get("PYTHONPATH", "")
    assert os.path.isfile(os.path.join(SITE_DIR, "sitecustomize.py"))


def _pyspark_file(*extra_path: str) -> str:
    """Where a fresh interpreter started as Spark starts its workers finds pyspark and py4j."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*ZIPS, *extra_path, SRC])}
    code = "import pyspark.sql, py4j; print(pyspark.sql.__file__); print(py4j.__file__)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout


def test_a_worker_started_with_the_site_dir_imports_the_installed_package():
    assert "pyspark.zip" in _pyspark_file()  # what Spark alone does
    found = _pyspark_file(SITE_DIR).splitlines()
    assert found[0] == str(PACKAGE / "sql" / "__init__.py")
    assert ".zip" not in found[1]


def test_the_worker_daemon_starts_without_a_warning():
    """Spark runs ``python -m <spark.python.daemon.module>`` with the site dir on PYTHONPATH, whose hook
    imports eoslog.spark.daemon first. Were that the daemon module, Python would warn on every start (it
    is already imported), and the warning lands in the user's console. With stdin at EOF the daemon
    exits at once, as it does when its JVM goes away."""
    module = SESSION_CONFIG["spark.python.daemon.module"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*ZIPS, SITE_DIR, SRC])}
    done = subprocess.run([sys.executable, "-m", module], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=120, check=False)  # stdout: the daemon's binary port
    stderr = done.stderr.decode(errors="replace")
    assert done.stdout and "Traceback" not in stderr, stderr  # it started and listened
    assert "RuntimeWarning" not in stderr and "found in sys.modules" not in stderr, stderr


def test_the_worker_daemon_starts_without_the_site_dir():
    """A session that sets its own spark.executorEnv.PYTHONPATH without SESSION_CONFIG's entry must still
    get a daemon, with pyspark from pyspark.zip: Spark waits for the port it writes, and would hang
    without one."""
    module = SESSION_CONFIG["spark.python.daemon.module"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*ZIPS, SRC])}
    done = subprocess.run([sys.executable, "-m", module], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=120, check=False)
    stderr = done.stderr.decode(errors="replace")
    assert len(done.stdout) == 4 and "Traceback" not in stderr, stderr  # the port, as a 4-byte int


def test_the_session_config_reaches_planner_processes_and_executor_workers(spark):
    """A Python Data Source's reader() runs in a planner process, read() in an executor worker (forked by
    the eoslog daemon); both report where their pyspark came from."""
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class WhereReader(DataSourceReader):
        def __init__(self):
            import pyspark as planner_pyspark

            self.planner = planner_pyspark.__file__

        def read(self, partition):
            import pyspark as worker_pyspark

            yield self.planner, worker_pyspark.__file__

    class Where(DataSource):
        @classmethod
        def name(cls):
            return "eoslog-test-where"

        def schema(self):
            return "planner string, worker string"

        def reader(self, schema):
            return WhereReader()

    spark.dataSource.register(Where)
    row = spark.read.format("eoslog-test-where").load().collect()[0]
    assert row.planner == str(PACKAGE / "__init__.py")
    assert row.worker == str(PACKAGE / "__init__.py")
