"""Spark's Python processes import pyspark from the installed package, with its cached bytecode.

Spark starts every Python process it needs (the UDF worker daemon, one daemon per Python Data Source
planner step, the streaming source's runner) with ``$SPARK_HOME/python/lib/pyspark.zip`` first on
PYTHONPATH. A zip on sys.path cannot hold the bytecode Python caches, so each fresh interpreter compiles
pyspark's modules again: about 0.6 s of CPU per process on the bench machine, half of the Python
processes' samples in a profile, several processes per query start. When that zip is the one inside an
installed pyspark package (pip's layout: SPARK_HOME is the package directory) the package directory holds
the same sources with their ``__pycache__``, and ``prefer_installed_pyspark()`` makes imports of pyspark
and py4j find them there; nothing else changes order on sys.path. A Spark distribution's own zip (another
SPARK_HOME) may be another version and is left alone.

Two ways in, both set by ``SESSION_CONFIG``:
- ``eoslog/spark/site/sitecustomize.py``, on the workers' PYTHONPATH, runs it at every interpreter start;
- ``eoslog.spark.worker_daemon`` is ``spark.python.daemon.module``: the UDF worker daemon pre-imports the
  pure-Python modules its forked workers need, so they start with them loaded. It is a module of its
  own because the site hook above has already imported this one, and running a module with ``-m`` that
  is already imported makes Python warn on every daemon's start. Modules that start threads when
  imported (numpy, pyarrow) are not pre-imported: a forked child keeps only the thread that forked.

Importing it imports ``eoslog.spark`` first, which looks up the spark extra but does not import pyspark
(its ``EoslogDataSource`` comes from data_source.py on first use), so the finder is in place before
pyspark is.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")

# What a SparkSession builder needs, as .config(key, value) pairs (static: read when the context starts).
# The executor environment's PYTHONPATH reaches every Python process Spark starts, after pyspark.zip. It
# also replaces the PYTHONPATH a standalone Worker's executors would inherit, so the driver's own follows.
SESSION_CONFIG = {"spark.python.daemon.module": "eoslog.spark.worker_daemon",
                  "spark.executorEnv.PYTHONPATH": os.pathsep.join(filter(None, [SITE_DIR,
                                                                                os.environ.get("PYTHONPATH")]))}

# Pure Python, no threads at import: what every UDF worker imports (pyspark.worker) and what the Python
# Data Source workers add.
PRELOAD = ("pyspark.worker", "pyspark.sql", "pyspark.sql.datasource")

_TOP_LEVEL = ("pyspark", "py4j")


def installed_package_root(path: list[str]) -> str | None:
    """The directory holding the installed pyspark package, when the first pyspark.zip on ``path`` is the
    one shipped inside that package (hence the same sources); None otherwise."""
    for entry in path:
        if os.path.basename(entry) != "pyspark.zip":
            continue
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(entry))))
        if (os.path.basename(package) == "pyspark" and os.path.isfile(os.path.join(package, "__init__.py"))
                and os.path.isdir(os.path.join(package, "__pycache__"))):
            return os.path.dirname(package)
        return None
    return None


class InstalledPysparkFinder:
    """Finds the top-level ``pyspark`` and ``py4j`` in ``root`` before sys.path is searched; submodules
    then follow the package's ``__path__``, so every pyspark module comes from the installed directory."""

    def __init__(self, root: str) -> None:
        self.root = root

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in _TOP_LEVEL:
            return None
        return importlib.machinery.PathFinder.find_spec(name, [self.root])


def prefer_installed_pyspark() -> bool:
    """Installs the finder when this interpreter has the installed package's pyspark.zip on sys.path and
    has not imported pyspark yet; True if it did."""
    if "pyspark" in sys.modules or any(isinstance(f, InstalledPysparkFinder) for f in sys.meta_path):
        return False
    root = installed_package_root(sys.path)
    if root is None:
        return False
    sys.meta_path.insert(0, InstalledPysparkFinder(root))
    return True
