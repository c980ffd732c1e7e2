"""A member's last acknowledgements against its own leave (docs/share-groups.md "A leave behind the last
acknowledgement"): librdkafka's ShareConsumer.close() sends the pending acknowledgements in a final
ShareAcknowledge and its leaving ShareGroupHeartbeat right after, on another connection; the leave's
release must not overtake the acknowledgement. Unmodified confluent-kafka ShareConsumers against a real
``eoslog serve`` process, one broker for the module; a record that came back is seen by the next member
of the same group."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.testing.process import BrokerProcess

ROUNDS = 20
PER_ROUND = 4  # even offsets rejected, odd ones accepted
PROPERTIES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",  # a new member gets its assignment in a heartbeat or two
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("share-close") / "data", properties=PROPERTIES) as process:
        yield process


def _setup(bootstrap: str) -> tuple[str, str]:
    topic, group = "close-" + uuid.uuid4().hex[:8], "sg-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.record.lock.duration.ms", "2000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    return topic, group


def _member(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    return consumer


def test_acknowledgements_sent_at_close_are_never_overtaken_by_the_leave(broker):
    """Round after round one member acquires the new records, rejects half and accepts the rest, and
    closes at once; the next member of the group must see only records never delivered before."""
    bootstrap = broker.bootstrap
    topic, group = _setup(bootstrap)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    seen: dict[int, int] = {}  # offset -> the round that received it
    for round_ in range(ROUNDS):
        for i in range(PER_ROUND):
            producer.produce(topic, value=b"r%d-%d" % (round_, i), partition=0)
        assert producer.flush(30) == 0
        consumer = _member(bootstrap, group, topic)
        got = 0
        deadline = time.monotonic() + 30
        try:
            while got < PER_ROUND:
                assert time.monotonic() < deadline, f"round {round_}: got {got} records"
                for message in consumer.poll(0.3) or ():
                    assert message.error() is None, message.error()
                    offset = message.offset()
                    assert offset not in seen, (f"round {round_}: offset {offset}, acknowledged in round "
                                                f"{seen[offset]}, came back (delivery {message.delivery_count()})")
                    seen[offset] = round_
                    got += 1
                    consumer.acknowledge(message, AcknowledgeType.REJECT if offset % 2 == 0 else AcknowledgeType.ACCEPT)
        finally:
            consumer.close()  # at once: the acknowledgements go out in the final ShareAcknowledge
    assert sorted(seen) == list(range(ROUNDS * PER_ROUND))
    # nothing of the rounds is left to anyone: a last member sees only a record produced now
    producer.produce(topic, value=b"marker", partition=0)
    assert producer.flush(30) == 0
    last = _member(bootstrap, group, topic)
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while b"marker" not in values:
            assert time.monotonic() < deadline, values
            for message in last.poll(0.3) or ():
                assert message.error() is None, message.error()
                values.append(message.value())
                last.acknowledge(message, AcknowledgeType.ACCEPT)
        assert values == [b"marker"]
    finally:
        last.close()


def test_a_leave_arriving_while_the_last_acknowledgement_is_held_waits_for_it(tmp_path):
    """Deterministic, with the real share-partition manager of an in-process broker: the final
    acknowledgement of a closing member is held at a gate inside the manager while the group coordinator's
    word that the member left arrives; the leave's release must wait behind it, and the acknowledgement
    must then find the records still acquired by the member."""
    import asyncio
    import threading

    from eoslog.testing.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path / "data", properties=PROPERTIES) as embedded:
        bootstrap = embedded.bootstrap
        topic, group = _setup(bootstrap)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(PER_ROUND):
            producer.produce(topic, value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
        consumer = _member(bootstrap, group, topic)
        got = 0
        deadline = time.monotonic() + 30
        while got < PER_ROUND:
            assert time.monotonic() < deadline, got
            for message in consumer.poll(0.3) or ():
                assert message.error() is None, message.error()
                got += 1
                consumer.acknowledge(message, AcknowledgeType.REJECT if message.offset() % 2 == 0
                                     else AcknowledgeType.ACCEPT)
        manager = embedded.broker.share_partitions
        original = manager.acknowledge
        opened, arrived, answers = asyncio.Event(), threading.Event(), []
        members: list[str] = []

        async def gated(key, topic_name, member_id, batches):
            if key.group_id == group:
                members.append(member_id)
                arrived.set()
                await opened.wait()
            answer = await original(key, topic_name, member_id, batches)
            answers.append(answer)
            return answer

        manager.acknowledge = gated  # from here on: the acknowledgements close() sends
        closing = threading.Thread(target=consumer.close)
        closing.start()
        assert arrived.wait(30), "close() sent no acknowledgement"
        member_id = members[0]

        def leave():
            before = set(manager._tasks)
            manager.member_left(group, member_id)  # as the group coordinator says it
            return set(manager._tasks) - before

        release = embedded.call(leave)
        deadline = time.monotonic() + 30
        while not embedded.call(lambda: manager.activity.waiting(group, member_id)
                                or all(task.done() for task in release)):
            assert time.monotonic() < deadline, "the leave's release neither waited nor finished"
            time.sleep(0.02)
        assert embedded.call(lambda: manager.activity.waiting(group, member_id)), "the release overtook the ack"
        embedded.call(opened.set)
        closing.join(30)
        assert not closing.is_alive()
        deadline = time.monotonic() + 30
        while not embedded.call(lambda: all(task.done() for task in release)):
            assert time.monotonic() < deadline, "the release never ran after the acknowledgement"
            time.sleep(0.02)
        assert answers and all(error.name == "NONE" for error, _ in answers), answers
        producer.produce(topic, value=b"marker", partition=0)
        assert producer.flush(30) == 0
        last = _member(bootstrap, group, topic)
        try:
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while b"marker" not in values:
                assert time.monotonic() < deadline, values
                for message in last.poll(0.3) or ():
                    assert message.error() is None, message.error()
                    values.append(message.value())
            assert values == [b"marker"]
        finally:
            last.close()
