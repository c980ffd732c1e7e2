"""A real standalone Spark cluster on loopback: one Master and N Workers, started from the pyspark
installation's own ``bin/spark-class`` (no separate Spark download), for ``eoslog pipeline
--spark-workers N`` and the tests that run the pipeline the way users outgrow ``local[*]``.

    with SparkStandalone(tmp_path, workers=2) as spark_cluster:
        session = SparkSession.builder.master(spark_cluster.master_url)...

Each Worker offers one core, so the job's tasks run in two executor JVMs of their own, each with its
own Python workers: nothing the sink or source holds in the driver's memory is shared with them.
Readiness is the Master's JSON status page (``/json/``) listing every Worker ALIVE, waited for with a
deadline. Every daemon binds 127.0.0.1 only. A daemon's output goes to ``<base>/<name>.log``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from eoslog.tools.local.process import free_port

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
LOOPBACK = "127.0.0.1"


class SparkUnavailable(RuntimeError):
    """pyspark or Java is missing, or a daemon did not come up in time."""


def spark_home() -> Path:
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - the spark extra is part of `make test`
        raise SparkUnavailable("pyspark is not installed (pip install 'eoslog[spark]')") from exc
    return Path(pyspark.__file__).parent


class SparkStandalone:
    def __init__(self, base_dir: Path, workers: int = 2, cores_per_worker: int = 1,
                 memory_per_worker: str = "1g") -> None:
        self.base_dir = Path(base_dir)
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory_per_worker = memory_per_worker
        self.master_port = free_port()
        self.master_ui_port = free_port()
        self._processes: list[tuple[str, subprocess.Popen]] = []

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.master_port}"

    def session_config(self) -> dict[str, str]:
        """What a SparkSession needs to run its executors on this cluster, on loopback."""
        return {
            "spark.master": self.master_url,
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.executor.memory": self.memory_per_worker,
            "spark.executor.cores": str(self.cores_per_worker),
            "spark.cores.max": str(self.workers * self.cores_per_worker),
            "spark.pyspark.python": sys.executable,
        }

    # ---- lifecycle ---------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        home = spark_home()
        return {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": LOOPBACK,
                "SPARK_LOG_DIR": str(self.base_dir / "logs"), "SPARK_DAEMON_MEMORY": "256m",
                "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}

    def _spawn(self, name: str, *args: str) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        spark_class = spark_home() / "bin" / "spark-class"
        with open(self.base_dir / f"{name}.log", "ab") as out:
            process = subprocess.Popen([str(spark_class), *args], env=self._env(), stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        self._processes.append((name, process))

    def status(self) -> dict:
        """The Master's own JSON status: url, workers (with their state), alive workers, apps."""
        url = f"http://{LOOPBACK}:{self.master_ui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.loads(response.read())

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):
            return 0  # not listening yet, or mid-start

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        self._spawn("master", MASTER, "--host", LOOPBACK, "--port", str(self.master_port),
                    "--webui-port", str(self.master_ui_port))
        for n in range(1, self.workers + 1):
            work_dir = self.base_dir / f"worker-{n}"
            work_dir.mkdir(parents=True, exist_ok=True)
            self._spawn(f"worker-{n}", WORKER, "--host", LOOPBACK, "--cores", str(self.cores_per_worker),
                        "--memory", self.memory_per_worker, "--webui-port", str(free_port()),
                        "--work-dir", str(work_dir), self.master_url)
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers:
            for name, process in self._processes:
                if process.poll() is not None:
                    raise SparkUnavailable(f"spark {name} exited with {process.returncode}:\n{self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise SparkUnavailable(f"{self.workers} Spark workers not ALIVE within {timeout} s:\n"
                                       f"{self.log_tail('master')}")
            time.sleep(0.2)
        return self

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.base_dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Workers first (they take their executors with them), then the Master."""
        for _name, process in reversed(self._processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for _name, process in reversed(self._processes):
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
        self._processes.clear()

    def __enter__(self) -> SparkStandalone:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc_info) -> None:
        self.stop()
