"""Compaction seen through real clients: confluent-kafka producers and consumers against `eoslog serve`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from compaction_clients import (
    BROKER_PROPERTIES,
    consume_all,
    create_compacted_topic,
    log_bytes,
    produce_updates,
    wait_for,
)

from eoslog.testing.process import BrokerProcess

pytestmark = pytest.mark.interop


def expected_view(latest):
    """What a consumer of a fully compacted log sees: one record per live key, at its latest offset."""
    return sorted((offset, key, value) for key, (offset, value) in latest.items() if value is not None)


def test_200k_updates_over_10k_keys_compact_to_the_latest_values(tmp_path):
    # Produced with the cleaner off, so the log's former size can be measured; then restarted with it on.
    properties = {**BROKER_PROPERTIES, "log.cleaner.enable": "false"}
    with BrokerProcess(data_dir=tmp_path / "data", properties=properties) as broker:
        # max.compaction.lag.ms rolls the active segment once it is 3 s old, so every record gets cleaned;
        # tombstones stay 2 s after their first cleaning (delete.retention.ms).
        create_compacted_topic(broker.bootstrap, "compacted", delete_retention_ms="2000",
                               max_compaction_lag_ms="3000")
        latest = produce_updates(broker.bootstrap, "compacted", 200_000, 10_000, seed=1)
        expected = expected_view(latest)
        deleted = {key for key, (_, value) in latest.items() if value is None}
        assert len(deleted) > 100
        size_before = log_bytes(broker.data_dir, "compacted")
        end = max(offset for offset, _ in latest.values()) + 1
        broker.properties["log.cleaner.enable"] = "true"
        broker.restart(hard=False)

        def compacted():
            view = consume_all(broker.bootstrap, "compacted")
            return view if view == expected else None

        view = wait_for(compacted, 90, "a fully compacted view")
        assert {key for _, key, _ in view}.isdisjoint(deleted)
        size_after = log_bytes(broker.data_dir, "compacted")
        assert size_after < size_before / 5, (size_before, size_after)
        print(f"log size {size_before} -> {size_after} bytes ({size_after / size_before:.1%})")
        # offsets preserved, and the log end did not move
        import confluent_kafka

        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
        assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition("compacted", 0), timeout=10)[1] == end
        consumer.close()

        # the cleaned state survives a clean restart
        broker.restart(hard=False)
        assert consume_all(broker.bootstrap, "compacted") == expected


def test_consumer_offsets_stay_small_however_often_a_group_commits(tmp_path):
    import confluent_kafka

    # segment.ms from log.roll.ms: the internal topics' segments roll every 300 ms, so they get cleaned.
    properties = {**BROKER_PROPERTIES, "log.roll.ms": "300", "offsets.topic.num.partitions": "1"}
    with BrokerProcess(data_dir=tmp_path / "data", properties=properties) as broker:
        create_compacted_topic(broker.bootstrap, "input")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy",
                                             "enable.auto.commit": False})
        sizes = []
        for i in range(2_000):
            consumer.commit(offsets=[confluent_kafka.TopicPartition("input", 0, i)], asynchronous=False)
            if i % 500 == 499:
                sizes.append(log_bytes(broker.data_dir, "__consumer_offsets"))
        # 2,000 commits of one partition write ~2,000 records; compaction keeps a bounded handful. The
        # active segment is never cleaned and rolls (log.roll.ms) only when something is appended, so the
        # group keeps committing its last offset while we wait, as a live consumer does: what must stay
        # small is a log that is being written to, not one frozen mid-segment.
        def small_while_committing() -> bool:
            consumer.commit(offsets=[confluent_kafka.TopicPartition("input", 0, 1_999)], asynchronous=False)
            return log_bytes(broker.data_dir, "__consumer_offsets") < 20_000

        wait_for(small_while_committing, 30, "__consumer_offsets compacted")
        consumer.close()
        broker.restart(hard=True)
        reader = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy"})
        committed = reader.committed([confluent_kafka.TopicPartition("input", 0)], timeout=30)
        reader.close()
        assert committed[0].offset == 1_999
        print(f"__consumer_offsets sizes while committing: {sizes}")
