"""The broker SIGKILLed at random moments while the cleaner works; every restart recovers a consistent log
that still holds the latest value of every key at its original offset."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from compaction_clients import (
    BROKER_PROPERTIES,
    consume_all,
    create_compacted_topic,
    produce_updates,
    wait_for,
)

from eoslog.testing.process import BrokerProcess

pytestmark = pytest.mark.interop


def test_sigkill_during_cleaning_loses_nothing(tmp_path):
    rnd = random.Random(2026)
    properties = {**BROKER_PROPERTIES, "log.cleaner.backoff.ms": "50"}
    with BrokerProcess(data_dir=tmp_path / "data", properties=properties) as broker:
        # Small segments: each pass swaps many groups, so a kill lands inside one with good odds.
        create_compacted_topic(broker.bootstrap, "crashy", segment_bytes=str(16 * 1024), delete_retention_ms="600000",
                               max_compaction_lag_ms="2000")
        latest: dict[bytes, tuple[int, bytes | None]] = {}
        kills = 0
        for round_ in range(5):
            latest.update(produce_updates(broker.bootstrap, "crashy", 15_000, 1_500, seed=round_,
                                          prefix=f"r{round_}-"))
            time.sleep(rnd.uniform(0.0, 0.4))  # a random point: before, during or after cleaning
            broker.kill()
            kills += 1
            broker.start()
            view = consume_all(broker.bootstrap, "crashy")
            offsets = [offset for offset, _, _ in view]
            assert offsets == sorted(set(offsets)), "offsets doubled or reordered"
            got = {}
            for offset, key, value in view:
                got[key] = (offset, value)
            # a crash may leave any mix of cleaned and uncleaned segments, never a lost or stale key
            assert got == {k: v for k, v in latest.items() if k in got}
            assert set(got) == set(latest)
        cleaned = broker.log_tail(100_000).count("cleaned ")
        assert kills == 5
        assert cleaned > 0, "the cleaner never ran: the kills proved nothing"

        def settled():
            view = consume_all(broker.bootstrap, "crashy")
            keys = [key for _, key, _ in view]
            return len(keys) == len(set(keys)) and view

        view = wait_for(settled, 60, "one record per key after the last restart")
        assert {key: (offset, value) for offset, key, value in view} == latest
