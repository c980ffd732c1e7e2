"""A bit flipped in a stored batch never reaches a ShareConsumer (issue 38, "Corruption"; KIP-932).

A real ``eoslog serve`` with 60 records acknowledged in batches of 5, stopped (SIGTERM), one bit of one
stored batch flipped (faults/bitflip.py), started again. An unmodified confluent-kafka ShareConsumer
then reads the partition: share acquisition reads the log with the same CRC check as a Fetch
(share/log_reads.py), so it is offered exactly the records before the damaged batch, each with the
value that was acknowledged, and none of the damaged batch's offsets. The member is told, with
CORRUPT_MESSAGE. The wait ends on conditions: the records before the damage are in, and the error came.
"""

from __future__ import annotations

import random
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.faults.bitflip import flip_bit
from eoslog.testing.process import BrokerProcess

pytestmark = pytest.mark.slow

RECORDS = 60
PROPERTIES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
}


def acknowledged(bootstrap: str, topic: str) -> dict[int, bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2})
    acked: dict[int, bytes] = {}

    def delivered(error, message) -> None:
        if error is None:
            acked[message.offset()] = message.value()

    for i in range(RECORDS):
        producer.produce(topic, b"value-%04d" % i, partition=0, on_delivery=delivered)
        if i % 5 == 4:
            producer.flush(30)  # one batch per 5 records: many batches to aim at
    assert producer.flush(30) == 0
    return acked


def test_a_flipped_batch_is_never_offered_to_a_share_consumer(tmp_path):
    broker = BrokerProcess(data_dir=tmp_path / "data", log_path=tmp_path / "broker.log", properties=PROPERTIES)
    broker.start()
    try:
        bootstrap = broker.bootstrap
        topic, group = "share-flip", "sg-" + uuid.uuid4().hex[:8]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        acked = acknowledged(bootstrap, topic)
        assert sorted(acked) == list(range(RECORDS))
        broker.terminate()
        flip = flip_bit(str(tmp_path / "data" / f"{topic}-0"), random.Random(932), below_offset=RECORDS - 5)
        damaged = range(flip.base_offset, flip.last_offset + 1)
        assert flip.base_offset > 0, flip  # records before the damage, for the consumer to get
        broker.start()

        admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        offered: dict[int, bytes] = {}
        errors: list[KafkaError] = []

        def poll() -> None:
            try:
                messages = consumer.poll(0.5) or ()
            except KafkaException as exc:  # librdkafka raises the partition's fetch error from poll
                errors.append(exc.args[0])
                return
            for message in messages:
                if message.error() is None:
                    offered[message.offset()] = message.value()

        try:
            deadline = time.monotonic() + 45
            # Until the records before the damage are in and the refusal came, or anything at or past it.
            while not (set(range(flip.base_offset)) <= set(offered)
                       and (errors or max(offered) >= flip.base_offset)):
                assert time.monotonic() < deadline, (sorted(offered), errors, flip, broker.log_tail(40))
                poll()
            for _ in range(3):  # a few more share fetches after the refusal: still nothing of the batch
                poll()
        finally:
            consumer.close()
        served_damage = sorted(set(offered) & set(damaged))
        assert not served_damage, f"a share consumer was offered the damaged batch's offsets {served_damage} ({flip})"
        wrong = {o: v for o, v in offered.items() if acked.get(o) != v}
        assert not wrong, f"a share consumer was offered values that were never acknowledged: {wrong}"
        assert max(offered) < flip.base_offset, (sorted(offered), flip)  # share partitions hand out in order
        # The member is told, with Kafka's error for a corrupt record (CORRUPT_MESSAGE, librdkafka's INVALID_MSG).
        assert errors and errors[0].code() == KafkaError.INVALID_MSG == 2, errors
        assert "will not serve" in errors[0].str(), errors
    finally:
        broker.kill()
