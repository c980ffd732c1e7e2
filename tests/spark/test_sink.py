"""format("eoslog") as a sink, with real PySpark and a real broker.

Each test runs in both commit modes the sink has: ``groups`` (exactly-once through the broker's
transaction-group extension; skipped only when the live broker does not advertise it) and ``per_task``
(``requireExactlyOnce=false``: each task's transaction committed with EndTxn), and with both task
writers (``eoslog.writer``: ``native``, record batches encoded from Arrow and Produce sent by the sink
itself; ``librdkafka``, a confluent-kafka producer).
"""

from __future__ import annotations

import pytest

from eoslog.client.txn_groups import TxnGroupClient, TxnMember, broker_supports_txn_groups
from eoslog.spark.task_writer import write_transaction


@pytest.fixture(params=["groups", "per_task"])
def sink_mode(request, broker):
    if request.param == "groups" and not broker_supports_txn_groups(broker.bootstrap):
        pytest.skip("the broker does not advertise the transaction-group APIs (docs/spark.md) yet")
    return request.param


@pytest.fixture(params=["native", "librdkafka"])
def writer(request):
    return request.param


def _sink_options(broker, mode, writer):
    return {"kafka.bootstrap.servers": broker.bootstrap, "eoslog.writer": writer,
            "requireExactlyOnce": "true" if mode == "groups" else "false"}


def test_batch_write_then_read_round_trip(spark, broker, kafka, topic_name, sink_mode, writer):
    kafka.create(topic_name, partitions=3)
    rows = [(f"k{i}", f"v{i}".encode(), [("h", str(i).encode())]) for i in range(2000)]
    df = spark.createDataFrame(rows, "key string, value binary, headers array<struct<key:string,value:binary>>")
    (df.repartition(4).write.format("eoslog").options(**_sink_options(broker, sink_mode, writer))
     .option("topic", topic_name).mode("append").save())
    back = (spark.read.format("eoslog").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic_name).option("includeHeaders", "true").load().collect())
    assert sorted((bytes(r.key).decode(), bytes(r.value), [(h.key, bytes(h.value)) for h in r.headers])
                  for r in back) == sorted((k, v, h) for k, v, h in rows)
    # Keyed rows land where Kafka's Java partitioner puts them (murmur2), as with Spark's Kafka sink.
    from confluent_kafka import Producer  # noqa: F401 - the partitioner is librdkafka's murmur2_random
    by_key = {bytes(r.key): r.partition for r in back}
    assert len(set(by_key.values())) == 3


def test_topic_and_partition_columns(spark, broker, kafka, topic_name, sink_mode, writer):
    other = kafka.create(topic_name + "-b", partitions=2)
    kafka.create(topic_name, partitions=2)
    df = spark.createDataFrame([(topic_name if i % 2 else other, i % 2, str(i)) for i in range(100)],
                               "topic string, partition int, value string")
    df.write.format("eoslog").options(**_sink_options(broker, sink_mode, writer)).mode("append").save()
    a = kafka.read_all(topic_name, expect=50)
    b = kafka.read_all(other, expect=50)
    assert sorted(int(m.value()) for m in a) == list(range(1, 100, 2))
    assert {m.partition() for m in a} == {1} and {m.partition() for m in b} == {0}


def test_prepared_task_writes_are_invisible_until_the_commit(broker, kafka, topic_name, sink_mode, writer):
    import pyarrow as pa

    kafka.create(topic_name)
    group = f"eoslog-sink-0-{topic_name}"
    members = []
    for task in range(2):
        batch = pa.RecordBatch.from_pydict({"value": [f"{task}-{i}".encode() for i in range(100)]})
        message = write_transaction(iter([batch]), client={"bootstrap.servers": broker.bootstrap},
                                    topic_option=topic_name, txn_id=f"{group}-0-{task}", group=group,
                                    partition_id=task, attempt=0, transaction_timeout_ms=60_000, writer=writer)
        assert message.rows == 100 and message.producer_id >= 0
        members.append(TxnMember(message.transactional_id, message.producer_id, message.producer_epoch))
    assert kafka.read_all(topic_name) == []
    assert len(kafka.read_all(topic_name, isolation="read_uncommitted")) == 200
    if sink_mode == "groups":
        with TxnGroupClient(broker.bootstrap) as client:
            first = client.commit(group, 0, members, abort_prefix=f"{group}-")
            assert not first.already_committed
            again = client.commit(group, 0, members, abort_prefix=f"{group}-")
            assert again.already_committed and again.last_committed_sequence == 0
    else:
        from eoslog.spark.end_txn import end_transaction

        for m in members:
            end_transaction(broker.bootstrap, m, commit=True)
    assert len(kafka.read_all(topic_name, expect=200)) == 200


def _stream_copy(spark, broker, source, target, checkpoint, mode, writer, name, **source_options):
    reader = (spark.readStream.format("eoslog").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest"))
    for k, v in source_options.items():
        reader = reader.option(k, v)
    return (reader.load().selectExpr("key", "value").writeStream.format("eoslog")
            .options(**_sink_options(broker, mode, writer)).option("topic", target)
            .option("checkpointLocation", checkpoint).queryName(name))


def test_streaming_copy_with_admission_control_is_exactly_once(spark, broker, kafka, topic_name, tmp_path,
                                                               sink_mode, writer):
    source, target = kafka.create(topic_name + "-in", 2), kafka.create(topic_name + "-out", 2)
    kafka.produce(source, [(str(i).encode(), str(i).encode(), None, None) for i in range(4000)])
    query = _stream_copy(spark, broker, source, target, str(tmp_path / "ck"), sink_mode, writer, "copy",
                         maxOffsetsPerTrigger="1000").trigger(availableNow=True).start()
    assert query.awaitTermination(240)
    assert len([p for p in query.recentProgress if p["numInputRows"]]) == 4
    values = sorted(int(m.value()) for m in kafka.read_all(target, expect=4000))
    assert values == list(range(4000))


def test_a_task_failing_on_its_first_attempt_leaves_no_trace(spark, broker, kafka, topic_name, tmp_path, sink_mode,
                                                            writer):
    """local[2,3]: the first attempt writes part of its rows, then fails; the retry fences it."""
    from pyspark.sql.functions import udf

    target = kafka.create(topic_name, 1)
    marker = str(tmp_path / "failed-once")
    bootstrap = broker.bootstrap

    @udf("string")
    def fail_first_attempt(i):
        from pathlib import Path

        from pyspark import TaskContext

        ctx = TaskContext.get()
        if i == 14_000 and ctx.attemptNumber() == 0:
            # Fail only once the first Arrow batch (1,000 rows) of this attempt is in the log. Counted by
            # value, not by the log end offset: the other task (ids 15,000 and up) writes to the same
            # partition, and its rows alone used to pass an offset check while this attempt had written
            # nothing yet (its writer runs behind this UDF), leaving exactly 30,000 uncommitted records.
            # Rows below 15,000 in the log before the retry starts can only be this attempt's.
            import time

            from confluent_kafka import Consumer, TopicPartition

            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "isolation.level": "read_uncommitted"})
            c.assign([TopicPartition(target, 0, 0)])
            deadline, own = time.monotonic() + 30, 0
            while own < 1_000:
                assert time.monotonic() < deadline, f"only {own} rows of the first attempt reached the broker"
                own += sum(1 for m in c.consume(1_000, 0.5) if not m.error() and int(m.value()) < 15_000)
            c.close()
            Path(marker).write_text("x")
            raise RuntimeError("injected failure in the middle of the task")
        return str(i)

    df = spark.range(0, 30_000, numPartitions=2).select(fail_first_attempt("id").alias("value"))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    try:
        (df.write.format("eoslog").options(**_sink_options(broker, sink_mode, writer)).option("topic", target)
         .mode("append").save())
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    from pathlib import Path

    assert Path(marker).exists()
    values = sorted(int(m.value()) for m in kafka.read_all(target, expect=30_000))
    assert values == list(range(30_000))
    # The failed attempt's records exist in the log but were aborted.
    assert len(kafka.read_all(target, isolation="read_uncommitted")) > 30_000


def test_missing_topic_is_refused(spark, broker):
    from pyspark.errors import PySparkException

    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises((PySparkException, Exception), match="topic"):
        df.write.format("eoslog").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
