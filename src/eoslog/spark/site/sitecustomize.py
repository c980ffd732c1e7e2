"""Run by Python at start-up in the processes Spark starts, because eoslog puts this directory on their
PYTHONPATH (``eoslog.spark.daemon.SESSION_CONFIG``): makes pyspark import from the installed package's
cached bytecode instead of compiling it from pyspark.zip (see eoslog/spark/daemon.py). Then runs the
``sitecustomize`` this one shadows, if there is one."""

import importlib
import os
import sys

try:
    from eoslog.spark.daemon import prefer_installed_pyspark

    prefer_installed_pyspark()
except ImportError:  # eoslog not importable here: nothing to speed up, and start-up must not fail
    pass


def _run_shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    this = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if this is not None:
            sys.modules["sitecustomize"] = this


_run_shadowed()
