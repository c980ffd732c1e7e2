"""``format("eoslog-alo")``: an at-least-once baseline for the Spark sink's benchmark (bench/pipeline_bench.py).

It writes the same rows with the same kind of producer as the real sink (``eoslog.writer`` native or
librdkafka) but idempotent only, without a transaction, and the driver has nothing to commit: what the
exactly-once sink is measured against. Not for jobs: a replayed micro-batch is written again. It lives in
an importable module (not in the benchmark script) so Spark's workers load it by reference, exactly as
they load the real sink.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from eoslog.spark import EoslogDataSource

FORMAT = "eoslog-alo"


class AtLeastOnceWriter(DataSourceStreamArrowWriter):
    def __init__(self, options) -> None:
        self.options = options

    def write(self, iterator):
        o = self.options
        if o.writer == "native":
            from eoslog.spark.native_producer import NativeProducer

            producer = NativeProducer(o.client["bootstrap.servers"], None, security=o.security())
            try:
                producer.init()
                for batch in iterator:
                    producer.send(batch, o.topic)
                producer.flush()
            finally:
                producer.close()
            return WriterCommitMessage()
        from confluent_kafka import Producer

        from eoslog.spark.task_writer import PRODUCER_DEFAULTS, _produce_all, _Rows

        rows = _Rows(o.topic)
        producer = Producer({**PRODUCER_DEFAULTS, **o.client, "enable.idempotence": True})
        for batch in iterator:
            _produce_all(producer, *rows.columns(batch))
            producer.poll(0)
        if producer.flush(120):
            raise RuntimeError("records not delivered")
        return WriterCommitMessage()

    def commit(self, messages, batchId) -> None:
        pass

    def abort(self, messages, batchId) -> None:
        pass


class AtLeastOnceSource(EoslogDataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def streamWriter(self, schema, overwrite):
        from eoslog.spark.options import SinkOptions

        return AtLeastOnceWriter(SinkOptions.parse(self.options))
