"""format("eoslog") as a source, with real PySpark and a real broker."""

from __future__ import annotations

import json

import pytest

from eoslog.spark.schema import arrow_schema, source_schema


def _reader(spark, broker, topic, **options):
    r = spark.read.format("eoslog").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _stream(spark, broker, topic, **options):
    r = (spark.readStream.format("eoslog").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_schema_is_sparks_kafka_schema(spark, broker, kafka, topic_name):
    kafka.create(topic_name)
    df = _reader(spark, broker, topic_name, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    assert _reader(spark, broker, topic_name).schema == source_schema(False)
    assert arrow_schema(True).names[-1] == "headers"


def test_batch_read_returns_every_record_once_with_its_columns(spark, broker, kafka, topic_name):
    kafka.create(topic_name, partitions=3)
    records = [(f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())] if i % 3 == 0 else None, None)
               for i in range(3000)]
    kafka.produce(topic_name, records)
    expected = {(m.partition(), m.offset(), m.key(), m.value()) for m in kafka.read_all(topic_name)}
    rows = _reader(spark, broker, topic_name, includeHeaders="true").collect()
    assert len(rows) == 3000
    assert {(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows} == expected
    for r in rows:
        i = int(bytes(r.value)[1:])
        assert r.topic == topic_name and r.timestampType == 0 and r.timestamp is not None
        if i % 3 == 0:
            assert [(h.key, bytes(h.value)) for h in r.headers] == [("n", str(i).encode())]
        else:
            assert r.headers is None


def test_batch_read_honours_starting_and_ending_offsets(spark, broker, kafka, topic_name):
    kafka.create(topic_name, partitions=2)
    kafka.produce(topic_name, [(None, f"{p}-{i}".encode(), None, p) for p in (0, 1) for i in range(50)])
    df = _reader(spark, broker, topic_name, startingOffsets=json.dumps({topic_name: {"0": 10, "1": -2}}),
                 endingOffsets=json.dumps({topic_name: {"0": 20, "1": -1}}))
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(50)]


def test_read_committed_hides_aborted_and_open_transactions(spark, broker, kafka, topic_name):
    kafka.create(topic_name)
    kafka.produce(topic_name, [(None, b"before", None, None)])
    kafka.produce(topic_name, [(None, b"committed", None, None)], transactional_id=f"{topic_name}-a")
    kafka.produce(topic_name, [(None, b"aborted", None, None)], transactional_id=f"{topic_name}-b", commit=False)
    open_txn = kafka.produce(topic_name, [(None, b"open", None, None)], transactional_id=f"{topic_name}-c",
                             commit=None)
    kafka.produce(topic_name, [(None, b"after-open", None, None)])
    committed = sorted(bytes(r.value) for r in _reader(spark, broker, topic_name).collect())
    # The batch ends at the last stable offset: the open transaction and everything after it wait.
    assert committed == [b"before", b"committed"]
    uncommitted = sorted(bytes(r.value) for r in
                         _reader(spark, broker, topic_name, **{"kafka.isolation.level": "read_uncommitted"}).collect())
    assert uncommitted == [b"aborted", b"after-open", b"before", b"committed", b"open"]
    open_txn.commit_transaction(30)
    after = sorted(bytes(r.value) for r in _reader(spark, broker, topic_name).collect())
    assert after == [b"after-open", b"before", b"committed", b"open"]


def test_streaming_admission_control_gives_several_batches_and_every_record_once(spark, broker, kafka, topic_name,
                                                                                  tmp_path):
    kafka.create(topic_name, partitions=3)
    kafka.produce(topic_name, [(str(i).encode(), str(i).encode(), None, None) for i in range(5000)])
    query = (_stream(spark, broker, topic_name, maxOffsetsPerTrigger="1000").writeStream.format("memory")
             .queryName("admission").option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert len(sizes) == 5 and all(s == 1000 for s in sizes)
    values = [bytes(r.value) for r in spark.sql("select value from admission").collect()]
    assert sorted(values) == sorted(str(i).encode() for i in range(5000))


def test_available_now_stops_at_the_offsets_seen_at_start_and_resumes_from_the_checkpoint(
        spark, broker, kafka, topic_name, tmp_path):
    kafka.create(topic_name, partitions=2)
    kafka.produce(topic_name, [(None, f"a{i}".encode(), None, i % 2) for i in range(400)])
    checkpoint = str(tmp_path / "ck")

    def run():
        # The memory sink cannot restart from a checkpoint; foreachBatch can.
        seen = []
        q = (_stream(spark, broker, topic_name).writeStream
             .foreachBatch(lambda df, _: seen.extend(bytes(r.value) for r in df.collect()))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        assert q.awaitTermination(180)
        return sorted(seen)

    assert run() == sorted(f"a{i}".encode() for i in range(400))
    kafka.produce(topic_name, [(None, f"b{i}".encode(), None, i % 2) for i in range(100)])
    # The restarted query reads only what came after the checkpointed offsets.
    assert run() == sorted(f"b{i}".encode() for i in range(100))


def test_streaming_reads_transactions_only_once_committed(spark, broker, kafka, topic_name, tmp_path):
    kafka.create(topic_name)
    open_txn = kafka.produce(topic_name, [(None, b"x1", None, None), (None, b"x2", None, None)],
                             transactional_id=f"{topic_name}-s", commit=None)
    query = (_stream(spark, broker, topic_name).writeStream.format("memory").queryName("txn_stream")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        assert spark.sql("select * from txn_stream").count() == 0
        open_txn.commit_transaction(30)
        kafka.produce(topic_name, [(None, b"x3", None, None)])
        import time
        deadline = time.monotonic() + 60
        while spark.sql("select * from txn_stream").count() < 3 and time.monotonic() < deadline:
            query.processAllAvailable()
        values = sorted(bytes(r.value) for r in spark.sql("select value from txn_stream").collect())
        assert values == [b"x1", b"x2", b"x3"]
    finally:
        query.stop()


def test_fail_on_data_loss(spark, broker, kafka, topic_name):
    from confluent_kafka import TopicPartition

    kafka.create(topic_name)
    kafka.produce(topic_name, [(None, str(i).encode(), None, 0) for i in range(20)])
    futures = kafka.admin.delete_records([TopicPartition(topic_name, 0, 10)])
    for f in futures.values():
        f.result(30)
    start = json.dumps({topic_name: {"0": 0}})
    with pytest.raises(Exception, match="log start offset|no longer"):
        _reader(spark, broker, topic_name, startingOffsets=start).collect()
    rows = _reader(spark, broker, topic_name, startingOffsets=start, failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(10, 20))
