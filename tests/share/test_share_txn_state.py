"""Issue 37 step 6, the share coordinator's side of transactional acknowledgements: the pending set's
tagged field on ShareSnapshot/ShareUpdate (codec), the share coordinator's state keeping it (the last
write's set is the set), markers in ``__share_group_state`` deciding it (live and when loading), pruning
keeping an undecided marker, and WriteShareGroupState/ReadShareGroupState carrying it over TCP."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eoslog.client.connection import BrokerConnection
from eoslog.coordinator.share.log_format import (
    OUTCOME_ABORTED,
    OUTCOME_COMMITTED,
    OUTCOME_PENDING,
    PendingAckRange,
    PendingTransaction,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateFormatError,
    ShareUpdateValue,
    StateBatch,
    decode_value,
    encode_value,
)
from eoslog.coordinator.share.state import ShareStates, TxnMarker
from eoslog.protocol import messages as m
from eoslog.testing.embedded import EmbeddedBroker

KEY = SharePartitionKey("g1", uuid.UUID(bytes=bytes(range(1, 17))), 3)
OTHER = SharePartitionKey("g1", uuid.UUID(bytes=bytes(range(1, 17))), 4)
TXN = PendingTransaction(7, 2, (PendingAckRange(100, 104, 1), PendingAckRange(105, 105, 3)))


# ---- the codec ------------------------------------------------------------------------------------------

def test_the_pending_set_is_tagged_field_0x7e00_after_kafkas_tag_0():
    value = ShareUpdateValue(1, 3, -1, (StateBatch(100, 105, 0, 1),), 10, (TXN,))
    data = encode_value(value)
    plain = encode_value(ShareUpdateValue(1, 3, -1, (StateBatch(100, 105, 0, 1),), 10))
    # Same head and batches; the tagged section says 2 fields: tag 0 (4 bytes), then tag 0x7E00 (uvarint 80 fc 01).
    assert data[:len(plain) - 7] == plain[:-7]
    tail = data[len(plain) - 7:]
    assert tail[:7] == b"\x02\x00\x04\x00\x00\x00\x0a"
    assert tail[7:10] == b"\x80\xfc\x01"
    body = tail[11:]
    assert tail[10] == len(body)
    assert body == (b"\x02" + (7).to_bytes(8, "big") + (2).to_bytes(2, "big") + b"\x00" + b"\x03"
                    + (100).to_bytes(8, "big") + (104).to_bytes(8, "big") + b"\x01\x00"
                    + (105).to_bytes(8, "big") + (105).to_bytes(8, "big") + b"\x03\x00" + b"\x00")
    assert decode_value(1, data) == value
    # No pending set: no tag (what a Kafka writer and an empty set both write).
    assert decode_value(1, plain).pending_transactions == ()


def test_damaged_pending_sets_fail_the_load():
    good = encode_value(ShareSnapshotValue(1, 2, 3, 100, 1000, 2000, (), -1, (TXN,)))
    assert decode_value(0, good).pending_transactions == (TXN,)
    for bad_txn in (TXN._replace(outcome=9), TXN._replace(acks=(PendingAckRange(5, 4, 1),)),
                    TXN._replace(acks=(PendingAckRange(5, 6, 4),))):  # outcome, a range backwards, RENEW
        with pytest.raises(ShareStateFormatError):
            decode_value(0, encode_value(ShareSnapshotValue(1, 2, 3, 100, 1000, 2000, (), -1, (bad_txn,))))
    # A truncated body (its size byte shortened, the rest left as trailing bytes of the section).
    index = good.index(b"\x80\xfc\x01") + 3
    damaged = bytearray(good)
    damaged[index] -= 1
    with pytest.raises(ShareStateFormatError):
        decode_value(0, bytes(damaged))


ranges = st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 50), st.sampled_from([0, 1, 2, 3])), max_size=4)
transactions = st.lists(st.builds(
    lambda pid, epoch, outcome, acks: PendingTransaction(pid, epoch, tuple(PendingAckRange(f, f + n, t)
                                                                          for f, n, t in acks), outcome),
    st.integers(0, 2**62), st.integers(0, 32767), st.sampled_from([0, 1, 2]), ranges), max_size=3)


@given(transactions, st.integers(-1, 1000))
def test_round_trip(pending, done):
    for value in (ShareSnapshotValue(1, 2, 3, 100, 1000, 2000, (StateBatch(1, 2, 0, 1),), done, tuple(pending)),
                  ShareUpdateValue(1, 3, -1, (), done, tuple(pending))):
        assert decode_value(0 if isinstance(value, ShareSnapshotValue) else 1, encode_value(value)) == value


# ---- the share coordinator's state ------------------------------------------------------------------------

class Log:
    """The core with its log: every record applied at the offset it was appended at, and markers too, so a
    reload of ``entries`` can be compared with memory."""

    def __init__(self, updates_per_snapshot: int = 500) -> None:
        self.updates_per_snapshot = updates_per_snapshot
        self.states = ShareStates(updates_per_snapshot)
        self.entries: list = []

    def append(self, decision):
        assert decision.error.name == "NONE", decision
        if decision.record is not None:
            key, value = decision.record.encode()
            self.entries.append((len(self.entries), key, value))
            self.states.apply(decision.record, len(self.entries) - 1)
        return decision

    def marker(self, producer_id, producer_epoch, committed):
        offset = len(self.entries)
        self.entries.append(TxnMarker(offset, producer_id, producer_epoch, committed))
        return self.states.apply_marker(producer_id, producer_epoch, committed)

    def write(self, key=KEY, pending=(), batches=()):
        return self.append(self.states.write(key, state_epoch=0, leader_epoch=0, start_offset=-1,
                                             state_batches=batches, now_ms=1, pending_transactions=pending))

    def reloaded(self) -> ShareStates:
        states = ShareStates(self.updates_per_snapshot)
        states.load(self.entries)
        return states


def initialized(updates_per_snapshot=500) -> Log:
    log = Log(updates_per_snapshot)
    log.append(log.states.initialize(KEY, 0, 100, now_ms=1))
    log.append(log.states.initialize(OTHER, 0, 100, now_ms=1))
    return log


def test_the_last_writes_set_is_the_set_and_a_write_without_it_clears_it():
    log = initialized()
    log.write(pending=(TXN,))
    assert log.states.get(KEY).pending_transactions == (TXN,)
    assert log.states.read(KEY, -1, now_ms=2).state.pending_transactions == (TXN,)
    log.write(batches=(StateBatch(106, 106, 2, 1),))  # another operation: the set did not change...
    assert log.states.get(KEY).pending_transactions == ()  # ...but a write without the tag means none
    log.write(pending=(TXN,))
    log.append(log.states.read(KEY, 5, now_ms=3))  # a new leader epoch recorded by the coordinator's own update
    assert log.states.get(KEY).pending_transactions == (TXN,)
    assert log.states.get(OTHER).pending_transactions == ()
    assert log.reloaded() == log.states


def test_snapshots_carry_the_set():
    log = initialized(updates_per_snapshot=2)
    for _ in range(4):
        log.write(pending=(TXN,))
    assert log.states.updates_since_snapshot(KEY) < 2  # a snapshot was written
    assert log.states.get(KEY).pending_transactions == (TXN,)
    assert log.reloaded() == log.states


def test_a_marker_decides_the_pending_set_until_the_leader_writes_it_away():
    log = initialized()
    other_txn = PendingTransaction(8, 0, (PendingAckRange(110, 110, 1),))
    log.write(pending=(TXN, other_txn))
    assert log.marker(7, 1, True) == []  # an older epoch's marker (a zombie coordinator's): nothing decided
    assert log.marker(7, 3, True) == [KEY]  # the marker's epoch may be bumped (transaction version 2)
    assert log.states.get(KEY).pending_transactions == (TXN._replace(outcome=OUTCOME_COMMITTED), other_txn)
    # A leader write decided before it saw the marker still names the transaction as pending: it stays decided.
    log.write(pending=(TXN, other_txn))
    assert log.states.get(KEY).pending_transactions[0].outcome == OUTCOME_COMMITTED
    assert log.marker(8, 0, False) == [KEY]
    assert log.states.get(KEY).pending_transactions[1].outcome == OUTCOME_ABORTED
    assert log.reloaded() == log.states  # loading decides it the same way from the markers in the log
    log.write(pending=(other_txn._replace(outcome=OUTCOME_PENDING),))  # the leader applied producer 7's commit
    assert log.states.get(KEY).pending_transactions == (other_txn._replace(outcome=OUTCOME_ABORTED),)
    log.write()  # and producer 8's abort
    assert log.states.get(KEY).pending_transactions == ()
    assert log.reloaded() == log.states


def _pruned_reload(log: Log) -> ShareStates:
    below = log.states.last_redundant_offset() or 0
    states = ShareStates(log.updates_per_snapshot)
    states.load([e for e in log.entries if (e.offset if isinstance(e, TxnMarker) else e[0]) >= below])
    return states


def test_pruning_keeps_a_marker_no_snapshot_carries_yet():
    """A snapshot of the share partition after its marker normally carries the outcome, so the marker may be
    pruned with the records below that snapshot. But a snapshot decided before the marker came and appended
    after it names the transaction as pending: the marker must stay until a snapshot carries the outcome."""
    log = initialized(updates_per_snapshot=1)
    log.write(pending=(TXN,))  # an update
    snapshot = log.states.write(KEY, state_epoch=0, leader_epoch=0, start_offset=-1, state_batches=(), now_ms=1,
                                pending_transactions=(TXN,))
    assert isinstance(snapshot.record.value, ShareSnapshotValue)
    marker_offset = len(log.entries)
    log.marker(7, 2, True)  # durable while the snapshot is in flight
    log.append(snapshot)
    log.append(log.states.read(OTHER, 1, now_ms=2))
    log.append(log.states.read(OTHER, 2, now_ms=2))  # OTHER's newest snapshot is past the marker too
    assert log.states.get(KEY).pending_transactions[0].outcome == OUTCOME_COMMITTED
    assert (log.states.last_redundant_offset() or 0) <= marker_offset
    assert _pruned_reload(log).get(KEY).pending_transactions[0].outcome == OUTCOME_COMMITTED
    log.write(pending=(TXN,))  # an update
    log.write(pending=(TXN,))  # a snapshot decided after the marker: it carries the outcome, the marker may go
    assert log.states.last_redundant_offset() > marker_offset
    assert _pruned_reload(log).get(KEY).pending_transactions[0].outcome == OUTCOME_COMMITTED


def test_a_new_transaction_of_the_same_producer_after_the_leader_applied_the_outcome_is_pending():
    log = initialized()
    log.write(pending=(TXN,))
    log.marker(7, 2, True)
    log.write()
    log.write(pending=(TXN,))  # transaction version 1: the next transaction runs under the same epoch
    assert log.states.get(KEY).pending_transactions == (TXN,)


# ---- over TCP: keys 84 and 85 carry the set -----------------------------------------------------------------

@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # The coordinator's own abort of timed-out transactions is slowed, so that a transaction past its
    # timeout is seen overdue at the share partition before anything ends it.
    with EmbeddedBroker(tmp_path_factory.mktemp("txn-state"), properties={
            "eoslog.metrics.listen": "127.0.0.1:0", "group.share.min.record.lock.duration.ms": "1000",
            "group.share.min.heartbeat.interval.ms": "200", "group.share.heartbeat.interval.ms": "500",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "600000"}) as embedded:
        yield embedded


def test_write_and_read_share_group_state_carry_the_pending_set(broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = "ts-" + uuid.uuid4().hex[:8], "tg-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    topic_id = next(t.topic_id for t in broker.broker.registry.topics.by_id.values() if t.name == topic)
    W, R = m.WriteShareGroupStateRequest, m.ReadShareGroupStateRequest
    with BrokerConnection.from_bootstrap(broker.bootstrap) as conn:
        init = m.InitializeShareGroupStateRequest
        assert conn.request(83, 0, init(group_id=group, topics=[init.InitializeStateData(topic_id=topic_id, partitions=[
            init.PartitionData(partition=0, state_epoch=0, start_offset=100)])])).results[0].partitions[0].error_code == 0

        def write(pending):
            request = W(group_id=group, topics=[W.WriteStateData(topic_id=topic_id, partitions=[W.PartitionData(
                partition=0, state_epoch=0, leader_epoch=0, start_offset=-1, delivery_complete_count=-1,
                state_batches=[W.StateBatch(first_offset=100, last_offset=105, delivery_state=0, delivery_count=1)],
                pending_transactions=[W.PendingTransaction(producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                                                           outcome=0, acks=[W.PendingAck(
                                                               first_offset=a.first_offset, last_offset=a.last_offset,
                                                               acknowledge_type=a.acknowledge_type) for a in t.acks])
                                      for t in pending])])])
            assert conn.request(85, 1, request).results[0].partitions[0].error_code == 0

        def read():
            answer = conn.request(84, 0, R(group_id=group, topics=[R.ReadStateData(topic_id=topic_id, partitions=[
                R.PartitionData(partition=0, leader_epoch=0)])])).results[0].partitions[0]
            assert answer.error_code == 0
            return [(t.producer_id, t.producer_epoch, t.outcome,
                     [(a.first_offset, a.last_offset, a.acknowledge_type) for a in t.acks])
                    for t in answer.pending_transactions]

        write((TXN,))
        assert read() == [(7, 2, 0, [(100, 104, 1), (105, 105, 3)])]
        # The share coordinator's memory, as the loader would make it from the log, holds the same.
        shares = broker.broker.coordinators.shares
        key = SharePartitionKey(group, topic_id, 0)
        assert shares.states(shares.partition_for(key)).get(key).pending_transactions == (TXN,)
        write(())
        assert read() == []


def test_initialize_and_delete_are_refused_while_a_transaction_holds_records():
    log = initialized()
    log.write(pending=(TXN,))
    for refused in (log.states.initialize(KEY, 1, 200, now_ms=2), log.states.delete(KEY)):
        assert refused.error.name == "NON_EMPTY_GROUP" and refused.record is None
    assert log.states.initialize(OTHER, 1, 200, now_ms=2).error.name == "NONE"  # another share partition
    log.marker(7, 2, False)
    # decided: the outcome only waits for a leader to apply it, which a reset or a deletion makes moot
    assert log.states.delete(KEY).error.name == "NONE"


def test_a_marker_in_the_log_decides_the_pending_set_when_the_partition_loads(tmp_path):
    """The share coordinator's loader reads the COMMIT/ABORT control batches of ``__share_group_state``
    (written there by the transaction coordinator) as markers: a partition loaded after a marker has the
    transaction decided, as the live listener decided it."""
    import asyncio

    from eoslog.coordinator.share.shard import read_records
    from eoslog.records.control import ControlType, build_control_batch
    from tests.coordinator.share.test_share_shard import SoleBroker, durable, initialize

    async def scenario():
        broker = SoleBroker(tmp_path)
        try:
            shard, key = broker.shard, SharePartitionKey("g", uuid.UUID(int=7), 0)
            assert (await durable(broker, initialize(shard, key))).error.name == "NONE"
            written = await durable(broker, shard.write_state(
                key.group_id, key.topic_id, key.partition, state_epoch=0, leader_epoch=0, start_offset=-1,
                state_batches=(), pending_transactions=(TXN,)))
            assert written.error.name == "NONE"
            partition = broker.partition()
            partition.append_control(build_control_batch(ControlType.ABORT, 7, 3, 0))  # bumped epoch
            assert shard.on_txn_marker(broker.index, 7, 3, committed=False) == [key]  # the live listener
            live = shard.states(broker.index).get(key).pending_transactions
            loaded = ShareStates()
            loaded.load(read_records(partition.log))
            assert loaded.get(key).pending_transactions == live == (TXN._replace(outcome=OUTCOME_ABORTED),)
        finally:
            await broker.close()

    asyncio.run(scenario())


def test_the_held_records_and_overdue_transactions_are_scraped(broker):
    """eoslog_share_partition_transaction_held_records and _overdue_transactions: a transaction holding 3
    records, past its timeout (overdue: it may add nothing, its records stay held), then aborted."""
    import time

    from eoslog.client.share_txn import ACCEPT, ShareAcknowledgeError, ShareTxnProducer
    from eoslog.protocol.errors import ErrorCode
    from tests.share.test_share_admin_metrics import share_samples
    from tests.share.test_share_txn_broker import Member, setup

    topic, _, group = setup(broker.bootstrap, records=5)
    member = Member(broker.bootstrap, group, topic)
    producer = ShareTxnProducer(broker.bootstrap, "o-" + uuid.uuid4().hex[:8], transaction_timeout_ms=1000)
    producer.init()
    try:
        assert member.fetch_until(lambda got: got) == [(0, 4, 1)]
        producer.acknowledge(group, [(topic, 0, o, ACCEPT) for o in range(3)], member_id=member.member_id)
        samples = share_samples(broker, group)
        assert (samples["acquired_records"], samples["transaction_held_records"], samples["overdue_transactions"]) \
            == (5, 3, 0)
        deadline = time.monotonic() + 10
        while share_samples(broker, group)["overdue_transactions"] != 1:  # the share partition's timer
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert share_samples(broker, group)["transaction_held_records"] == 3  # overdue, still held
        with pytest.raises(ShareAcknowledgeError) as refused:  # and it may add nothing
            producer.acknowledge(group, [(topic, 0, 3, ACCEPT)], member_id=member.member_id)
        assert refused.value.code == ErrorCode.INVALID_TXN_STATE
        producer.abort()
        deadline = time.monotonic() + 10
        while (samples := share_samples(broker, group))["transaction_held_records"] != 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert samples["overdue_transactions"] == 0
    finally:
        producer.close()
        member.close()


def test_a_producer_holding_nothing_is_forgotten_after_the_expiration():
    """The share-partition manager's memory of producer epochs (the core's zombie fence) forgets a producer
    that holds nothing here once it has not acknowledged for transactional.id.expiration.ms."""
    from share_helpers import CONFIG

    from eoslog.share import SharePartition
    from eoslog.share.in_flight import AcknowledgementBatch, OffsetRange
    from eoslog.share.manager import forget_expired_producers
    from eoslog.share.transactional_acks import PendingAcknowledgements

    p = SharePartition.initial(CONFIG, 0).acquire("m", 0, [OffsetRange(0, 9)], now_ms=0, max_records=10,
                                                  upper_bound=10).after
    value = PendingAcknowledgements.of(p)
    for pid, first in ((7, 0), (8, 1)):
        value = value.acknowledge("m", pid, 3, [AcknowledgementBatch(first, first, (1,))], now_ms=0,
                                  transaction_timeout_ms=60_000).after
    value = value.complete(7, 3, commit=True).after  # producer 7 holds nothing now; 8 still holds record 1
    seen = {7: 0, 8: 0}
    assert forget_expired_producers(value, seen, 100, expiration_ms=100).producer_epochs == {7: 3, 8: 3}
    forgotten = forget_expired_producers(value, seen, 101, expiration_ms=100)
    assert forgotten.producer_epochs == {8: 3} and seen == {8: 0}  # 8 is kept while it holds records
    # forgotten, producer 7's zombie epoch is no longer refused here (the coordinator's check still is)
    assert value.acknowledge("m", 7, 2, [AcknowledgementBatch(2, 2, (1,))], now_ms=0,
                             transaction_timeout_ms=1).error.value == "PRODUCER_FENCED"
    assert forgotten.acknowledge("m", 7, 2, [AcknowledgementBatch(2, 2, (1,))], now_ms=0,
                                 transaction_timeout_ms=1).error.value == "NONE"
