"""Transactions + compaction with real clients: aborted records never resurface, and a read_committed
consumer sees the same latest value per key before and after cleaning."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import confluent_kafka
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from compaction_clients import BROKER_PROPERTIES, consume_all, create_compacted_topic, wait_for

from eoslog.testing.process import BrokerProcess

pytestmark = pytest.mark.interop


def _transactional_producer(bootstrap: str):
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "compaction-txn",
                                         "linger.ms": 5})
    try:
        producer.init_transactions(20)
    except confluent_kafka.KafkaException as exc:
        # Evaluated against the live broker: skips only while InitProducerId with a transactional id is
        # not advertised/served (the transactions part of the broker not being in yet).
        code = exc.args[0].code()
        if code in (confluent_kafka.KafkaError._UNSUPPORTED_FEATURE, confluent_kafka.KafkaError.UNSUPPORTED_VERSION):
            pytest.skip(f"broker does not serve transactions yet: {exc}")
        raise
    return producer


def _latest(view):
    out = {}
    for _, key, value in view:
        out[key] = value
    return {k: v for k, v in out.items() if v is not None}


def test_aborted_records_never_resurface_after_cleaning(tmp_path):
    with BrokerProcess(data_dir=tmp_path / "data", properties=BROKER_PROPERTIES) as broker:
        create_compacted_topic(broker.bootstrap, "txn-compacted", segment_bytes=str(16 * 1024),
                               max_compaction_lag_ms="2000")
        producer = _transactional_producer(broker.bootstrap)
        rnd = random.Random(5)
        for i in range(120):
            producer.begin_transaction()
            commit = rnd.random() < 0.6
            for j in range(rnd.randrange(5, 40)):
                key = f"k{rnd.randrange(300):04d}".encode()
                value = None if rnd.random() < 0.05 else f"{'committed' if commit else 'ABORTED'}-{i}-{j}".encode()
                producer.produce("txn-compacted", key=key, value=value, partition=0)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        before = _latest(consume_all(broker.bootstrap, "txn-compacted", "read_committed"))
        assert before and not [v for v in before.values() if v.startswith(b"ABORTED")]

        def cleaned():
            view = consume_all(broker.bootstrap, "txn-compacted", "read_uncommitted")
            keys = [key for _, key, _ in view]
            # once no aborted record is left even for read_uncommitted, and every key appears once
            if any(v and v.startswith(b"ABORTED") for _, _, v in view) or len(keys) != len(set(keys)):
                return None
            return view

        wait_for(cleaned, 90, "aborted data cleaned away")
        after = _latest(consume_all(broker.bootstrap, "txn-compacted", "read_committed"))
        assert after == before
        broker.restart(hard=True)
        assert _latest(consume_all(broker.bootstrap, "txn-compacted", "read_committed")) == before
        producer.flush(5)
