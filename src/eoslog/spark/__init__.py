"""``format("eoslog")`` for PySpark 4.3: a Kafka-compatible source and an exactly-once sink.

    import eoslog.spark
    eoslog.spark.register(spark)
    spark.readStream.format("eoslog").option("kafka.bootstrap.servers", ...).option("subscribe", "t").load()

Options and columns are those of Spark's Kafka connector; see docs/spark.md.
"""

from __future__ import annotations

import importlib.util

SPARK_EXTRA_HINT = "eoslog.spark needs the spark extra: pip install 'eoslog[spark]'"


def _require_spark_extra() -> None:
    """numpy and pyarrow are looked up before pyspark is imported: without them pyspark's own imports fail
    with errors that do not say what to install (a ModuleNotFoundError, then an UnboundLocalError)."""
    for name in ("numpy", "pyarrow", "pyspark"):
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


try:
    _require_spark_extra()
except ImportError as exc:
    raise ImportError(SPARK_EXTRA_HINT) from exc

FORMAT = "eoslog"


def __getattr__(name: str):
    # EoslogDataSource subclasses pyspark's DataSource, so it is imported on first use only: Spark's Python
    # processes import eoslog.spark.daemon (hence this package) before pyspark, to choose where pyspark
    # is imported from (daemon.py).
    if name == "EoslogDataSource":
        from eoslog.spark.data_source import EoslogDataSource

        return EoslogDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(spark) -> None:
    """Makes ``format("eoslog")`` available in ``spark`` (a SparkSession).

    Spark runs the source and the sink in Python processes it starts as ``PYSPARK_PYTHON``, else as
    ``python3`` from ``PATH``: in a virtualenv that is not activated, an interpreter without eoslog. When
    neither ``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` names one, they run as this interpreter,
    which has eoslog. The interpreter is captured with the data source here, so it must be set first."""
    from eoslog.spark.data_source import EoslogDataSource

    _use_this_python(spark)
    spark.dataSource.register(EoslogDataSource)


def _use_this_python(spark) -> None:
    import os
    import sys

    if os.environ.get("PYSPARK_PYTHON"):
        return
    try:
        context = spark.sparkContext
    except Exception:  # noqa: BLE001 -- Spark Connect: its server starts the Python processes, not this one
        return
    chosen = context.getConf().get("spark.pyspark.python") or sys.executable
    # pyspark reads PYSPARK_PYTHON once, when the SparkContext starts (SparkContext.pythonExec); what is
    # registered later (this data source, UDFs) takes the interpreter from that attribute.
    context.pythonExec = chosen
    os.environ["PYSPARK_PYTHON"] = chosen


__all__ = ["FORMAT", "SPARK_EXTRA_HINT", "EoslogDataSource", "register"]
