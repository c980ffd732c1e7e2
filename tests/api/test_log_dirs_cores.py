"""The pure cores of DescribeLogDirs (which replicas are listed, the lag Kafka reports) and AlterReplicaLogDirs."""

from __future__ import annotations

from types import SimpleNamespace

from eoslog.api.describe_log_dirs import describe_log_dir


def replica(size: int, high_watermark: int, log_end_offset: int):
    return SimpleNamespace(log=SimpleNamespace(size=size), high_watermark=high_watermark,
                           log_end_offset=log_end_offset)


REPLICAS = [(("b", 1), replica(10, 5, 5)), (("a", 0), replica(20, 7, 4)), (("b", 0), replica(0, 3, 9))]


def test_every_replica_when_no_topic_is_named_sorted_by_topic_and_partition():
    result = describe_log_dir("/data", REPLICAS, None, 100, 40)
    assert (result.log_dir, result.total_bytes, result.usable_bytes, result.error_code) == ("/data", 100, 40, 0)
    listed = [(t.name, p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
              for t in result.topics for p in t.partitions]
    # lag: how far the high watermark is past the log end (a follower still catching up), never negative
    assert listed == [("a", 0, 20, 3, False), ("b", 0, 0, 0, False), ("b", 1, 10, 0, False)]


def test_only_the_named_partitions_and_no_empty_topics():
    result = describe_log_dir("/data", REPLICAS, {("b", 1), ("b", 7), ("c", 0)}, 1, 1)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [("b", [1])]


def test_alter_replica_log_dirs_decides_in_kafkas_order():
    from eoslog.api.alter_replica_log_dirs import decide
    from eoslog.protocol.errors import ErrorCode

    local = {("t", 0), ("x" * 249, 0)}
    outcome = decide({("t", 0): "/data", ("t", 1): "/data", ("t", 2): "/other", ("x" * 249, 0): "/other"},
                     "/data", local)
    assert outcome == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.REPLICA_NOT_AVAILABLE,
                       ("t", 2): ErrorCode.LOG_DIR_NOT_FOUND,
                       ("x" * 249, 0): ErrorCode.INVALID_TOPIC_EXCEPTION}  # the name before the directory
