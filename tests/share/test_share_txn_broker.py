"""Acknowledgements inside a transaction end to end (issue 37 step 6, docs/share-groups.md "Step 6"): a real
``eoslog serve`` process, a share group member speaking ShareGroupHeartbeat/ShareFetch over TCP (eoslog's
connection, so the test knows its member id and sees delivery counts), eoslog's ShareTxnProducer
(client/share_txn.py) producing output and acknowledging in its transaction, and confluent-kafka
read_committed consumers reading the output.

"Never delivered again" is shown by a record produced after the decision: a member's fetch hands records
out in offset order, so a fetch that acquires that record and nothing before it was offered everything
still deliverable before it. Every wait is for a condition with a deadline."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.client.connection import BrokerConnection
from eoslog.client.share_txn import ACCEPT, REJECT, RELEASE, ShareAcknowledgeError, ShareTxnProducer
from eoslog.protocol import messages as m
from eoslog.protocol.errors import ErrorCode
from eoslog.tools.local.process import BrokerProcess

HEARTBEAT, FETCH, ACKNOWLEDGE = 76, 78, 79
LOCK_MS = 1000
TXN_TIMEOUT_MS = 4000
KILLED_TXN_TIMEOUT_MS = 15_000  # longer than a restart, so the held records are seen held after it
PROPERTIES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
    # a transaction left open by a killed broker is aborted soon after its timeout
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("share-txn") / "data", properties=PROPERTIES) as process:
        yield process


class Member:
    """A share group member over one connection: heartbeats until assigned, fetches with a share session."""

    def __init__(self, bootstrap: str, group: str, topic: str, leader_bootstrap: str | None = None) -> None:
        """``bootstrap``: the group coordinator's broker; ``leader_bootstrap``: the partition leader's (on a
        cluster), else the same broker."""
        self.conn = BrokerConnection.from_bootstrap(bootstrap)
        self.fetch_conn = BrokerConnection.from_bootstrap(leader_bootstrap) if leader_bootstrap else self.conn
        self.group, self.member_id, self.session_epoch = group, uuid.uuid4().hex, 0
        request = m.ShareGroupHeartbeatRequest
        answer = self.conn.request(HEARTBEAT, 1, request(group_id=group, member_id=self.member_id, member_epoch=0,
                                                         rack_id=None, subscribed_topic_names=[topic]))
        deadline = time.monotonic() + 20
        while not (answer.assignment and answer.assignment.topic_partitions):
            assert answer.error_code == 0 and time.monotonic() < deadline, answer
            time.sleep(0.05)
            answer = self.conn.request(HEARTBEAT, 1, request(group_id=group, member_id=self.member_id,
                                                             member_epoch=answer.member_epoch, rack_id=None,
                                                             subscribed_topic_names=None))
        self.topic_id = answer.assignment.topic_partitions[0].topic_id

    def fetch(self, max_wait_ms: int = 0) -> list[tuple[int, int, int]]:
        """(first offset, last offset, delivery count) of what this fetch acquired."""
        R = m.ShareFetchRequest
        answer = self.fetch_conn.request(FETCH, 2, R(
            group_id=self.group, member_id=self.member_id, share_session_epoch=self.session_epoch,
            max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500,
            share_acquire_mode=0, is_renew_ack=False,
            topics=[R.FetchTopic(topic_id=self.topic_id, partitions=[R.FetchPartition(
                partition_index=0, partition_max_bytes=0, acknowledgement_batches=[])])] if self.session_epoch == 0
            else [], forgotten_topics_data=[]))
        assert answer.error_code == 0, answer
        self.session_epoch += 1
        return [(r.first_offset, r.last_offset, r.delivery_count)
                for t in answer.responses for p in t.partitions for r in p.acquired_records]

    def fetch_until(self, wanted, timeout: float = 20.0) -> list[tuple[int, int, int]]:
        deadline = time.monotonic() + timeout
        while True:
            got = self.fetch(max_wait_ms=200)
            if wanted(got) or time.monotonic() > deadline:
                return got

    def acknowledge(self, first: int, last: int, ack_type: int) -> int:
        R = m.ShareAcknowledgeRequest
        answer = self.fetch_conn.request(ACKNOWLEDGE, 2, R(
            group_id=self.group, member_id=self.member_id, share_session_epoch=self.session_epoch,
            is_renew_ack=False, topics=[R.AcknowledgeTopic(topic_id=self.topic_id, partitions=[
                R.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                    R.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=[ack_type])])])]))
        assert answer.error_code == 0, answer
        self.session_epoch += 1
        return answer.responses[0].partitions[0].error_code

    def close(self) -> None:
        self.conn.close()
        self.fetch_conn.close()


def setup(bootstrap: str, records: int = 5) -> tuple[str, str, str]:
    """An input topic with ``records`` records, an output topic, and a share group reading from the start."""
    topic, output, group = "in-" + uuid.uuid4().hex[:8], "out-" + uuid.uuid4().hex[:8], "q-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name in (topic, output):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(LOCK_MS),
                            "share.isolation.level": "read_committed"}.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)
    produce(bootstrap, topic, records)
    return topic, output, group


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"r%d" % i, partition=0)
    assert producer.flush(30) == 0


def committed_output(bootstrap: str, topic: str) -> list[bytes]:
    """Everything a read_committed consumer reads of ``topic`` up to its last stable offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-" + uuid.uuid4().hex[:8],
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0, 0)
        _, end = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([tp])
        values, deadline = [], time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                if consumer.position([tp])[0].offset >= end:
                    break
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
        return values
    finally:
        consumer.close()


def txn_producer(bootstrap: str, transactional_id: str | None = None) -> ShareTxnProducer:
    producer = ShareTxnProducer(bootstrap, transactional_id or "w-" + uuid.uuid4().hex[:8],
                                transaction_timeout_ms=TXN_TIMEOUT_MS, timeout_s=30)
    producer.init()
    return producer


def offsets_in(got) -> set[int]:
    return {o for first, last, _ in got for o in range(first, last + 1)}


def test_commit_acknowledges_with_the_output_and_abort_gives_the_records_back(broker):
    bootstrap = broker.bootstrap
    topic, output, group = setup(bootstrap, records=6)
    member, other = Member(bootstrap, group, topic), Member(bootstrap, group, topic)
    producer = txn_producer(bootstrap)
    try:
        assert member.fetch_until(lambda got: got) == [(0, 5, 1)]
        # transaction 1: records 0-2 processed (ACCEPT), 3 rejected, output written; then aborted
        for offset in range(3):
            producer.send(output, b"out-a-%d" % offset)
        producer.acknowledge(group, [(topic, 0, o, ACCEPT) for o in range(3)] + [(topic, 0, 3, REJECT)],
                             member_id=member.member_id)
        # held by the transaction: not the member's any more...
        assert member.acknowledge(0, 0, ACCEPT) == ErrorCode.INVALID_RECORD_STATE
        # ...and no lock gives them back: 4-5, locked as long, come back when their lock runs out; 0-3 do not
        assert other.fetch_until(lambda got: 4 in offsets_in(got)) == [(4, 5, 2)]
        producer.abort()
        # the abort gives 0-3 back, their delivery count kept (delivered once; now twice)
        assert other.fetch_until(lambda got: 0 in offsets_in(got)) == [(0, 3, 2)]
        assert committed_output(bootstrap, output) == []  # the aborted output is never read
        # transaction 2: ``other`` holds 0-5 now (named by no member id: the one holding them); 0-2 accepted,
        # 3 rejected, 4-5 released; committed with its output
        for offset in range(3):
            producer.send(output, b"out-b-%d" % offset)
        producer.acknowledge(group, [(topic, 0, o, ACCEPT) for o in range(3)] + [(topic, 0, 3, REJECT)]
                             + [(topic, 0, o, RELEASE) for o in (4, 5)])
        producer.commit()
        assert committed_output(bootstrap, output) == [b"out-b-0", b"out-b-1", b"out-b-2"]
        # 0-3 are done for good: after a record produced now, only the released 4-5 come before it
        produce(bootstrap, topic, 1)
        assert member.fetch_until(lambda got: 6 in offsets_in(got)) == [(4, 5, 3), (6, 6, 1)]
    finally:
        producer.close()
        member.close()
        other.close()


def test_send_batch_writes_its_records_with_the_transaction(broker):
    """send_batch (one batch for a worker's outputs to one partition): its records commit with the
    transaction's acknowledgements, in order, or are never read when it aborts."""
    bootstrap = broker.bootstrap
    topic, output, group = setup(bootstrap, records=4)
    member = Member(bootstrap, group, topic)
    producer = txn_producer(bootstrap)
    try:
        assert member.fetch_until(lambda got: got) == [(0, 3, 1)]
        producer.send_batch(output, 0, [(b"%d" % o, b"out-%d" % o) for o in range(4)])
        producer.acknowledge(group, [(topic, 0, o, ACCEPT) for o in range(4)], member_id=member.member_id)
        producer.commit()
        producer.send_batch(output, 0, [])  # nothing to write: no batch
        producer.send_batch(output, 0, [(b"x", b"aborted-0"), (b"y", b"aborted-1")])
        producer.abort()
        assert committed_output(bootstrap, output) == [b"out-0", b"out-1", b"out-2", b"out-3"]
        # the committed batch's inputs are done: a record produced now is the only one delivered
        produce(bootstrap, topic, 1)
        assert member.fetch_until(lambda got: 4 in offsets_in(got)) == [(4, 4, 1)]
    finally:
        producer.close()
        member.close()


def test_a_zombie_is_fenced_and_an_unregistered_share_partition_refused(broker):
    """Fencing as for offsets: a new instance of the transactional id fences the old one (its open
    transaction aborts, the records come back); the old one's acknowledgements are PRODUCER_FENCED, at the
    leader too (it asks the transaction coordinator before applying). A transaction that did not register
    the share partition is refused (INVALID_TXN_STATE) and nothing moves."""
    bootstrap = broker.bootstrap
    topic, output, group = setup(bootstrap, records=4)
    member = Member(bootstrap, group, topic)
    transactional_id = "z-" + uuid.uuid4().hex[:8]
    zombie = txn_producer(bootstrap, transactional_id)
    successor = None
    try:
        assert member.fetch_until(lambda got: got) == [(0, 3, 1)]
        zombie.send(output, b"zombie")
        zombie.acknowledge(group, [(topic, 0, 0, ACCEPT)], member_id=member.member_id)
        successor = txn_producer(bootstrap, transactional_id)  # fences the zombie, aborts its transaction
        assert member.fetch_until(lambda got: 0 in offsets_in(got)) == [(0, 0, 2)]  # record 0 came back
        # the zombie acknowledges again: its share partition is registered already (this client skips a second
        # AddSharePartitionsToTxn), so the leader's own check with the transaction coordinator refuses it
        with pytest.raises(ShareAcknowledgeError) as refused:
            zombie.acknowledge(group, [(topic, 0, 1, ACCEPT)], member_id=member.member_id)
        assert refused.value.code == ErrorCode.PRODUCER_FENCED
        # a transaction that never registered the share partition: the leader refuses it
        successor.send(output, b"successor")  # the transaction is open (an output partition registered)
        request = m.ShareAcknowledgeTxnRequest
        with BrokerConnection.from_bootstrap(bootstrap) as conn:
            answer = conn.request(0x7E21, 0, request(
                group_id=group, member_id=member.member_id, transactional_id=transactional_id,
                producer_id=successor.producer_id, producer_epoch=successor.producer_epoch,
                transaction_timeout_ms=TXN_TIMEOUT_MS, topics=[request.AcknowledgeTopic(
                    topic_id=member.topic_id, partitions=[request.AcknowledgePartition(
                        partition_index=0, acknowledgement_batches=[request.AcknowledgementBatch(
                            first_offset=1, last_offset=1, acknowledge_types=[ACCEPT])])])]))
        assert answer.responses[0].partitions[0].error_code == ErrorCode.INVALID_TXN_STATE
        assert member.acknowledge(1, 1, ACCEPT) == ErrorCode.NONE  # still the member's: nothing moved
        successor.abort()
        assert committed_output(bootstrap, output) == []
    finally:
        zombie.close()
        if successor is not None:
            successor.close()
        member.close()


def test_an_acknowledgement_naming_no_member_never_takes_a_later_delivery(broker):
    """Issue 37's INVALID single-broker queue run: a worker's transaction acknowledged (no member named, as
    librdkafka's ShareConsumer cannot tell it) after its lock ran out and another member had acquired the
    records again (delivery count 2); the leader took them from that member, and the transaction committed
    an output for a record delivered again. With the delivery count the worker saw, the leader refuses it
    (INVALID_RECORD_STATE), nothing moves, and the record stays the later member's."""
    bootstrap = broker.bootstrap
    topic, output, group = setup(bootstrap, records=2)
    first, second = Member(bootstrap, group, topic), Member(bootstrap, group, topic)
    producer = txn_producer(bootstrap)
    try:
        assert first.fetch_until(lambda got: got) == [(0, 1, 1)]
        # first's lock runs out: second gets the records, delivered a second time
        assert second.fetch_until(lambda got: got, timeout=LOCK_MS / 1000 * 10) == [(0, 1, 2)]
        producer.send(output, b"processed by first")
        with pytest.raises(ShareAcknowledgeError) as refused:
            producer.acknowledge(group, [(topic, 0, 0, ACCEPT, 1), (topic, 0, 1, ACCEPT, 1)])
        assert refused.value.code == ErrorCode.INVALID_RECORD_STATE
        producer.abort()
        assert second.acknowledge(0, 1, ACCEPT) == ErrorCode.NONE  # still second's: nothing moved
        assert committed_output(bootstrap, output) == []
    finally:
        producer.close()
        first.close()
        second.close()


@pytest.mark.parametrize("decided", ["open", "committed"])
def test_a_broker_sigkill_loses_nothing_and_delivers_nothing_twice(broker, decided):
    """The broker SIGKILLed with a transaction holding records: open (its coordinator aborts it after the
    restart, past its timeout: the records come back once, count kept, the output never shows), or just
    committed (the records are never delivered again, the output shows once)."""
    bootstrap = broker.bootstrap
    topic, output, group = setup(bootstrap, records=4)
    member = Member(bootstrap, group, topic)
    producer = ShareTxnProducer(bootstrap, "k-" + uuid.uuid4().hex[:8], transaction_timeout_ms=KILLED_TXN_TIMEOUT_MS,
                                timeout_s=30)
    producer.init()
    try:
        assert member.fetch_until(lambda got: got) == [(0, 3, 1)]
        producer.send(output, b"done-0-1")
        producer.acknowledge(group, [(topic, 0, 0, ACCEPT), (topic, 0, 1, ACCEPT)], member_id=member.member_id)
        if decided == "committed":
            producer.commit()
        broker.kill()  # SIGKILL
    finally:
        producer.close()
        member.close()
    broker.start()
    after = Member(bootstrap, group, topic)
    try:
        produce(bootstrap, topic, 1)  # offset 4: everything still deliverable comes before it
        if decided == "open":
            # the restarted leader holds 0-1 again (the pending set): 2-3 come back, 4 is offered, 0-1 not...
            got = after.fetch_until(lambda got: 4 in offsets_in(got))
            assert offsets_in(got) == {2, 3, 4}, got
            # ...until the coordinator aborts the transaction past its timeout: then once, the count kept
            got = after.fetch_until(lambda got: 0 in offsets_in(got), timeout=KILLED_TXN_TIMEOUT_MS / 1000 + 20)
            assert (0, 1, 2) in got, got  # delivered once before, once now: the count was kept
            assert committed_output(bootstrap, output) == []
        else:
            got = after.fetch_until(lambda got: 4 in offsets_in(got))
            assert not offsets_in(got) & {0, 1}, got
            assert committed_output(bootstrap, output) == [b"done-0-1"]
            # accepted for good: past a lock or two of everything else coming back, never 0-1
            deadline, seen = time.monotonic() + 2.5 * LOCK_MS / 1000, set()
            while time.monotonic() < deadline:
                seen |= offsets_in(after.fetch(max_wait_ms=200))
            assert seen and not seen & {0, 1}, seen
    finally:
        after.close()


def test_the_group_is_not_reset_or_deleted_while_a_transaction_holds_its_records(broker):
    """AlterShareGroupOffsets and DeleteGroups of an empty group are NON_EMPTY_GROUP while a transaction holds
    records of it (they would lose its acknowledgements), and go through once it ended."""
    bootstrap = broker.bootstrap
    topic, _, group = setup(bootstrap, records=2)
    member = Member(bootstrap, group, topic)
    producer = txn_producer(bootstrap)
    try:
        assert member.fetch_until(lambda got: got) == [(0, 1, 1)]
        producer.acknowledge(group, [(topic, 0, 0, ACCEPT)], member_id=member.member_id)
        leave = m.ShareGroupHeartbeatRequest(group_id=group, member_id=member.member_id, member_epoch=-1,
                                             rack_id=None, subscribed_topic_names=None)
        assert member.conn.request(HEARTBEAT, 1, leave).error_code == 0  # the group is empty now
        A = m.AlterShareGroupOffsetsRequest
        alter = A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
            A.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])])
        answer = member.conn.request(91, 0, alter)
        assert (answer.error_code, answer.responses[0].partitions[0].error_code) == (0, ErrorCode.NON_EMPTY_GROUP)
        delete = m.DeleteGroupsRequest(groups_names=[group])
        assert member.conn.request(42, 2, delete).results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        producer.commit()
        deadline = time.monotonic() + 20  # the leader writes the outcome just after the marker
        while (code := member.conn.request(42, 2, delete).results[0].error_code) == ErrorCode.NON_EMPTY_GROUP:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert code == 0
    finally:
        producer.close()
        member.close()


def test_the_work_queue_example(broker):
    """examples/share_work_queue.py as its docstring runs it: a worker SIGKILLed inside its second
    transaction, a second worker doing the rest; every task has exactly one committed result, and the dead
    worker's uncommitted results are in the log but never read."""
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).parents[2] / "examples" / "share_work_queue.py"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(example), "--bootstrap", broker.bootstrap, *args],
                              check=False, capture_output=True, text=True, timeout=120)

    assert run("tasks", "30").returncode == 0
    assert run("work", "--worker", "w1", "--crash-after", "2").returncode == -9  # SIGKILL inside a transaction
    second = run("work", "--worker", "w2", "--seconds", "10")
    assert second.returncode == 0 and "w2: " in second.stdout, second.stderr[-2000:]
    checked = run("check", "30")
    assert checked.returncode == 0 and "every task has exactly one result" in checked.stdout, checked.stdout
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ru-" + uuid.uuid4().hex[:8],
                         "isolation.level": "read_uncommitted", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition("wq-results", 0, 0)])
        values, deadline = [], time.monotonic() + 20
        while time.monotonic() < deadline and len(values) < 35:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        by_w1 = [v for v in values if v.endswith(b"done by w1")]
        assert len(by_w1) == 10 and len(values) == 35  # w1's first transaction committed, its second aborted
    finally:
        consumer.close()


def test_a_sigkill_after_the_marker_before_anything_applied_it(tmp_path, monkeypatch):
    """A test-only crash point kills the broker right after the COMMIT marker on ``__share_group_state`` is
    durable: the transaction is still PrepareCommit at its coordinator, the share coordinator has not
    decided the pending set in memory, the leader has applied nothing. After the restart the coordinator
    rolls the commit forward (the marker again), the share coordinator's load decides the pending set from
    the marker in its log, and the leader's load applies it: accepted once, never delivered again, the
    output visible once."""
    monkeypatch.setenv("EOSLOG_ALLOW_TEST_FAULTS", "1")
    fault = "eoslog.test.crash.after.share.state.marker"
    with BrokerProcess(data_dir=tmp_path / "data", properties={**PROPERTIES, fault: "true"}) as crashing:
        bootstrap = crashing.bootstrap
        topic, output, group = setup(bootstrap, records=4)
        member = Member(bootstrap, group, topic)
        producer = ShareTxnProducer(bootstrap, "p-" + uuid.uuid4().hex[:8], transaction_timeout_ms=60_000,
                                    timeout_s=3)
        producer.init()
        try:
            assert member.fetch_until(lambda got: got) == [(0, 3, 1)]
            producer.send(output, b"prepared")
            producer.acknowledge(group, [(topic, 0, 0, ACCEPT), (topic, 0, 1, ACCEPT)], member_id=member.member_id)
            with pytest.raises((TimeoutError, ConnectionError, OSError)):
                producer.commit()  # the broker dies while EndTxn waits for its markers
        finally:
            producer.close()
            member.close()
        deadline = time.monotonic() + 30
        while crashing.process.poll() is None:  # the crash point fired
            assert time.monotonic() < deadline
            time.sleep(0.05)
        del crashing.properties[fault]
        crashing.start()
        after = Member(bootstrap, group, topic)
        try:
            produce(bootstrap, topic, 1)
            got = after.fetch_until(lambda got: 4 in offsets_in(got))
            assert offsets_in(got) == {2, 3, 4}, got
            assert committed_output(bootstrap, output) == [b"prepared"]
            deadline, seen = time.monotonic() + 2.5 * LOCK_MS / 1000, set()
            while time.monotonic() < deadline:
                seen |= offsets_in(after.fetch(max_wait_ms=200))
            assert not seen & {0, 1}, seen
        finally:
            after.close()
