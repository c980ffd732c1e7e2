"""Share groups end to end (KIP-932, docs/share-groups.md): unmodified confluent-kafka ShareConsumers
against a real ``eoslog serve`` process, one broker for the module.

Every wait is for a condition with a deadline; "never comes back" is shown by a marker record produced
after the decision: a consumer that has seen the marker has been offered everything that was still
deliverable before it (share partitions hand records out in offset order)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

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

CHILD = Path(__file__).with_name("share_child.py")
LOCK_MS = 2000  # the short record lock the tests give their groups (share.record.lock.duration.ms)
PROPERTIES = {
    "group.share.min.record.lock.duration.ms": "1000",  # Kafka's lowest bound, so groups may use LOCK_MS
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",  # members get their assignment in a heartbeat or two
    "group.share.min.session.timeout.ms": "2000",  # so a group may forget a killed member in seconds
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("share") / "data", properties=PROPERTIES) as process:
        yield process


def new_topic(bootstrap: str, partitions: int = 2) -> str:
    name = "share-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer comes
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(30)


def new_group(bootstrap: str, **configs: str) -> str:
    group = "sg-" + uuid.uuid4().hex[:8]
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.record.lock.duration.ms": str(LOCK_MS), **configs})
    return group


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % 2 if partition is None else partition)
    assert producer.flush(30) == 0


def share_consumer(bootstrap: str, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit" if explicit else "implicit"})
    consumer.subscribe([topic])
    return consumer


def consume_until(consumer: ShareConsumer, done, timeout: float = 45.0, on_message=None) -> list:
    """Polls until ``done(messages so far)``; implicit acknowledgement accepts each poll's records on the
    next. Returns every message seen."""
    seen: list = []
    deadline = time.monotonic() + timeout
    while not done(seen):
        assert time.monotonic() < deadline, f"gave up after {len(seen)} messages"
        for message in consumer.poll(0.5) or ():
            assert message.error() is None, message.error()
            seen.append(message)
            if on_message is not None:
                on_message(consumer, message)
    return seen


def values(messages) -> list[bytes]:
    return [m.value() for m in messages]


# ---- the tests ---------------------------------------------------------------------------------------


def test_three_members_and_a_killed_one_whose_records_come_back_once(broker):
    """A member SIGKILLed while holding acquired records: they go to the two others after it is gone, and
    every record is accepted exactly once (a newcomer later finds nothing left)."""
    bootstrap = broker.bootstrap
    # the killed member keeps its share of the partitions until its session times out (Kafka's rule)
    topic, group = new_topic(bootstrap), new_group(bootstrap, **{"share.session.timeout.ms": "3000"})
    produce(bootstrap, topic, [b"r%d" % i for i in range(60)])
    child = subprocess.Popen([sys.executable, str(CHILD), bootstrap, group, topic], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        held = {tuple(x) for x in json.loads(child.stdout.readline() or "[]")}
        assert held, "the child member acquired nothing"
        seen: dict[int, list] = {0: [], 1: []}
        stop = threading.Event()

        def member(index: int) -> None:
            consumer = share_consumer(bootstrap, group, topic)
            try:
                while not stop.is_set():
                    for message in consumer.poll(0.3) or ():
                        if message.error() is None:
                            seen[index].append((message.partition(), message.offset(), message.delivery_count()))
            finally:
                consumer.close()

        threads = [threading.Thread(target=member, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        # the others take what the child does not hold while it lives
        deadline = time.monotonic() + 45
        while len(seen[0]) + len(seen[1]) < 60 - len(held):
            assert time.monotonic() < deadline, (len(seen[0]), len(seen[1]), len(held))
            time.sleep(0.05)
        assert not {(p, o) for p, o, _ in seen[0] + seen[1]} & held
        child.kill()
        child.wait(10)
        while len(seen[0]) + len(seen[1]) < 60:
            assert time.monotonic() < deadline + 30, (len(seen[0]), len(seen[1]), len(held))
            time.sleep(0.05)
        stop.set()
        for thread in threads:
            thread.join(30)
    finally:
        child.kill()
        child.wait(10)
    got = [(p, o) for p, o, _ in seen[0] + seen[1]]
    assert len(got) == len(set(got)) == 60  # each record once among the survivors
    assert {(p, o) for p, o, count in seen[0] + seen[1] if (p, o) in held} == held
    assert all(count == 2 for p, o, count in seen[0] + seen[1] if (p, o) in held)  # their second delivery
    assert seen[0] and seen[1]  # both survivors took part
    # all accepted: a newcomer (alone once the killed member's session is over) sees only records
    # produced afterwards
    produce(bootstrap, topic, [b"marker", b"marker"])
    newcomer = share_consumer(bootstrap, group, topic)
    try:
        assert values(consume_until(newcomer, lambda s: len(s) >= 2)) == [b"marker", b"marker"]
    finally:
        newcomer.close()


def test_rejected_records_never_come_back_and_another_group_sees_everything(broker):
    bootstrap = broker.bootstrap
    topic, group = new_topic(bootstrap, partitions=1), new_group(bootstrap)
    produce(bootstrap, topic, [b"v%d" % i for i in range(10)], partition=0)

    def acknowledge(consumer, message):  # reject the even ones, accept the odd ones
        odd = message.offset() % 2
        consumer.acknowledge(message, AcknowledgeType.ACCEPT if odd else AcknowledgeType.REJECT)

    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        first = consume_until(consumer, lambda s: len(s) >= 10, on_message=acknowledge)
        assert sorted(m.offset() for m in first) == list(range(10))
        assert all(error is None for error in consumer.commit_sync(30).values())
        produce(bootstrap, topic, [b"marker"], partition=0)
        again = consume_until(consumer, lambda s: b"marker" in values(s), on_message=acknowledge)
        assert values(again) == [b"marker"]
    finally:
        consumer.close()
    other = share_consumer(bootstrap, new_group(bootstrap), topic)
    try:
        everything = consume_until(other, lambda s: len(s) >= 11)
        assert sorted(m.offset() for m in everything) == list(range(11))
    finally:
        other.close()


def test_the_delivery_limit_archives_a_record_always_released(broker):
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap, partitions=1)
    group = new_group(bootstrap, **{"share.delivery.count.limit": "2"})
    produce(bootstrap, topic, [b"poison"], partition=0)

    def release(consumer, message):
        consumer.acknowledge(message, AcknowledgeType.RELEASE if message.value() == b"poison" else AcknowledgeType.ACCEPT)

    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    try:
        deliveries = consume_until(consumer, lambda s: len(s) >= 2, on_message=release)
        assert [m.delivery_count() for m in deliveries] == [1, 2]
        consumer.commit_sync(30)
        produce(bootstrap, topic, [b"marker"], partition=0)
        after = consume_until(consumer, lambda s: b"marker" in values(s), on_message=release)
        assert values(after) == [b"marker"]  # the poison record was archived at its second release
    finally:
        consumer.close()


def test_read_committed_share_group_skips_aborted_records(broker):
    bootstrap = broker.bootstrap
    topic = new_topic(bootstrap, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "share-tx-" + topic})
    producer.init_transactions(30)
    for outcome in ("aborted", "committed", "aborted", "committed"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, value=f"{outcome}-{i}".encode(), partition=0)
        producer.flush(30)
        (producer.commit_transaction if outcome == "committed" else producer.abort_transaction)(30)
    committed = share_consumer(bootstrap, new_group(bootstrap, **{"share.isolation.level": "read_committed"}), topic)
    uncommitted = share_consumer(bootstrap, new_group(bootstrap), topic)
    try:
        seen = values(consume_until(committed, lambda s: len(s) >= 6))
        assert sorted(seen) == sorted([b"committed-%d" % i for i in range(3)] * 2)
        # the same log, read_uncommitted (the default): the aborted records too
        assert len(consume_until(uncommitted, lambda s: len(s) >= 12)) == 12
        produce(bootstrap, topic, [b"marker"], partition=0)
        assert values(consume_until(committed, lambda s: b"marker" in values(s))) == [b"marker"]
    finally:
        committed.close()
        uncommitted.close()


def test_a_broker_killed_and_restarted_loses_no_acknowledgement(broker):
    """Acknowledged (commit_sync answered) before a SIGKILL of the broker: never delivered again after it;
    everything not acknowledged is delivered after it, records held by a member when it died with their
    delivery count raised."""
    bootstrap = broker.bootstrap
    topic, group = new_topic(bootstrap, partitions=1), new_group(bootstrap)
    produce(bootstrap, topic, [b"k%d" % i for i in range(20)], partition=0)
    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    accepted: set[int] = set()

    def accept_ten(consumer, message):
        if len(accepted) < 10:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            accepted.add(message.offset())
        else:
            consumer.acknowledge(message, AcknowledgeType.RELEASE)

    try:
        consume_until(consumer, lambda s: len(accepted) >= 10, on_message=accept_ten)
        assert all(error is None for error in consumer.commit_sync(30).values())
    finally:
        consumer.close()
    # another member holds (acquired, never acknowledged) some of the released ones when the broker dies
    child = subprocess.Popen([sys.executable, str(CHILD), bootstrap, group, topic], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        held = {offset for _, offset in json.loads(child.stdout.readline() or "[]")}
        assert held and not held & accepted
        broker.kill()  # SIGKILL
    finally:
        child.kill()
        child.wait(10)
    broker.start()  # the same data directory and port
    after = share_consumer(bootstrap, group, topic)
    try:
        rest = consume_until(after, lambda s: len({m.offset() for m in s}) >= 10, timeout=60)
        offsets = [m.offset() for m in rest]
        assert not set(offsets) & accepted
        assert sorted(set(offsets)) == sorted(set(range(20)) - accepted)
        # delivered once before, and the held ones once more: their acquisition was persisted
        # (eoslog.share.persist.acquisitions, docs/share-groups.md), so the restart kept its count
        assert {m.offset(): m.delivery_count() for m in rest} \
            == {o: 3 if o in held else 2 for o in set(range(20)) - accepted}
    finally:
        after.close()
