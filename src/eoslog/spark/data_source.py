"""The ``format("eoslog")`` data source class; eoslog.spark hands it out on first use, so that importing
the package (as Spark's Python processes do first thing, for eoslog.spark.daemon) does not import pyspark.
"""

from __future__ import annotations

from eoslog.spark import FORMAT, SPARK_EXTRA_HINT

try:
    from pyspark.sql.datasource import DataSource
except ImportError as exc:
    raise ImportError(SPARK_EXTRA_HINT) from exc


class EoslogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        """Spark's Kafka columns; with ``schema.registry.url`` the ``value`` column is a struct of the value
        subject's latest version, asked from the registry here, once per query plan (avro_values.py)."""
        from eoslog.spark.options import SourceOptions
        from eoslog.spark.schema import source_schema

        options = SourceOptions.parse(self.options)
        typed = options.typed_value
        if typed is None:
            return source_schema(options.include_headers)
        from eoslog.spark.avro_values import registered

        _, value = registered(typed.registry, typed.subject, typed.mode)
        return source_schema(options.include_headers, value)

    def reader(self, schema):
        from eoslog.spark.options import SourceOptions
        from eoslog.spark.source import EoslogBatchReader

        return EoslogBatchReader(SourceOptions.parse_batch(self.options), schema)

    def streamReader(self, schema):
        from eoslog.spark.options import SourceOptions
        from eoslog.spark.source import EoslogStreamReader

        return EoslogStreamReader(SourceOptions.parse(self.options), schema)

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
