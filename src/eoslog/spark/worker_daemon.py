"""Spark's UDF worker daemon (``spark.python.daemon.module``, set by ``eoslog.spark.daemon.SESSION_CONFIG``):
pyspark's own daemon, started after pyspark's modules were made to come from the installed package and
the pure-Python ones every forked worker needs were imported (see eoslog/spark/daemon.py)."""

from __future__ import annotations

import importlib

from eoslog.spark.daemon import PRELOAD, prefer_installed_pyspark


def main() -> None:
    prefer_installed_pyspark()
    for name in PRELOAD:
        importlib.import_module(name)
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
