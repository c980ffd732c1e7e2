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
    from pyspark.sql.datasource import DataSource
except ImportError as exc:
    raise ImportError(SPARK_EXTRA_HINT) from exc

FORMAT = "eoslog"


class EoslogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        from eoslog.spark.options import _bool, _lower
        from eoslog.spark.schema import source_schema

        return source_schema(_bool(_lower(self.options), "includeHeaders", False))

    def reader(self, schema):
        from eoslog.spark.options import SourceOptions
        from eoslog.spark.source import EoslogBatchReader

        return EoslogBatchReader(SourceOptions.parse_batch(self.options))

    def streamReader(self, schema):
        from eoslog.spark.options import SourceOptions
        from eoslog.spark.source import EoslogStreamReader

        return EoslogStreamReader(SourceOptions.parse(self.options))

    def writer(self, schema, overwrite: bool):
        from eoslog.spark.options import OptionError, SinkOptions
        from eoslog.spark.sink import EoslogBatchWriter

        if overwrite:
            raise OptionError("the eoslog sink only appends (mode 'append'), as Spark's Kafka sink")
        return EoslogBatchWriter(SinkOptions.parse(self.options), schema)

    def streamWriter(self, schema, overwrite: bool):
        from eoslog.spark.options import SinkOptions, _lower
        from eoslog.spark.sink import EoslogStreamWriter

        return EoslogStreamWriter(SinkOptions.parse(self.options), schema,
                                  checkpoint_location=_lower(self.options).get("checkpointlocation"))


def register(spark) -> None:
    """Makes ``format("eoslog")`` available in ``spark`` (a SparkSession)."""
    spark.dataSource.register(EoslogDataSource)


__all__ = ["FORMAT", "SPARK_EXTRA_HINT", "EoslogDataSource", "register"]
