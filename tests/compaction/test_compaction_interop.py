"""Compaction seen through real clients: confluent-kafka producers and consumers against `eoslog serve`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from compaction_clients import (  # noqa: E402
    BROKER_PROPERTIES,
    consume_all,
    create_compacted_topic,
    log_bytes,
    produce_updates,
    wait_for,
)

from eoslog.testing.process import BrokerProcess  # noqa: E402

pytestmark = pytest.mark.interop


def expected_view(latest):
    """What a consumer of a fully compacted log sees: one record per live key, at its latest offset."""
    return sorted((offset, key, value) for key, (offset, value) in latest.items() if value is not None)


def test_200k_updates_over_10k_keys_compact_to_the_latest_values(tmp_path):
    with BrokerProcess(data_dir=tmp_path / "data", properties=BROKER_PROPERTIES) as broker:
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

        def compacted():
            view = consume_all(broker.bootstrap, "compacted")
            return view if view == expected else None

        view = wait_for(compacted, 90, "a fully compacted view")
        assert {key for _, key, _ in view}.isdisjoint(deleted)
        size_after = log_bytes(broker.data_dir, "compacted")
        assert size_after < size_before / 10, (size_before, size_after)
        # offsets preserved, and the log end did not move
        import confluent_kafka

        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
        assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition("compacted", 0), timeout=10)[1] == end
        consumer.close()

        # the cleaned state survives a clean restart
        broker.restart(hard=False)
        assert consume_all(broker.bootstrap, "compacted") == expected
