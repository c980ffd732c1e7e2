"""The share coordinator's pure core (ShareStates): Kafka's decisions for Initialize/Write/Read/ReadSummary/
DeleteShareGroupState (the cases of Kafka's ShareCoordinatorShardTest), snapshots after N updates, cold
snapshots, what pruning may delete, and loading: any history of decisions, loaded back from the records it
appended, gives the state memory has."""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.coordinator.share.log_format import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    SharePartitionKey,
    ShareRecord,
    ShareSnapshotValue,
    ShareStateFormatError,
    ShareUpdateValue,
    StateBatch,
    encode_key,
    encode_value,
)
from eoslog.coordinator.share.state import UNINITIALIZED, Decision, ShareGroupOffset, ShareStates
from eoslog.protocol.errors import ErrorCode

TOPIC, OTHER_TOPIC = uuid.UUID(int=1), uuid.UUID(int=2)
KEY = SharePartitionKey("group1", TOPIC, 0)
NOW = 1_000


class Harness:
    """A ShareStates whose records are 'appended' to a list and applied at once, in order."""

    def __init__(self, updates_per_snapshot: int = 500, partition_exists=None) -> None:
        self.states = ShareStates(updates_per_snapshot, partition_exists)
        self.log: list[tuple[int, bytes, bytes | None]] = []

    def carry(self, decision: Decision) -> Decision:
        if decision.record is not None:
            offset = len(self.log)
            self.log.append((offset, *decision.record.encode()))
            self.states.apply(decision.record, offset)
        return decision

    def init(self, key=KEY, state_epoch=0, start_offset=0, now=NOW) -> Decision:
        return self.carry(self.states.initialize(key, state_epoch, start_offset, now_ms=now))

    def write(self, key=KEY, *, batches=(), state_epoch=0, leader_epoch=0, start_offset=-1, count=-1, now=NOW):
        return self.carry(self.states.write(key, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                            start_offset=start_offset, state_batches=batches, now_ms=now,
                                            delivery_complete_count=count))

    def read(self, key=KEY, leader_epoch=0, now=NOW) -> Decision:
        return self.carry(self.states.read(key, leader_epoch, now_ms=now))

    def reloaded(self) -> ShareStates:
        fresh = ShareStates(self.states.updates_per_snapshot)
        fresh.load(self.log)
        return fresh


# ---- InitializeShareGroupState ----------------------------------------------------------------------------

def test_initialize_writes_a_snapshot_and_changes_nothing_until_it_is_applied():
    h = Harness()
    decision = h.states.initialize(KEY, 5, 10, now_ms=NOW)
    assert decision.error is ErrorCode.NONE
    assert decision.record == ShareRecord(SHARE_SNAPSHOT, KEY, ShareSnapshotValue(
        snapshot_epoch=0, state_epoch=5, leader_epoch=0, start_offset=10, create_timestamp=NOW,
        write_timestamp=NOW, state_batches=(), delivery_complete_count=0))
    assert KEY not in h.states  # prepare changes nothing
    h.carry(decision)
    assert h.states.get(KEY) == ShareGroupOffset(0, 5, 0, 10, 0, (), NOW, NOW)
    assert h.states.state_epoch_fence(KEY) == 5


def test_an_unknown_start_offset_leaves_the_delivery_complete_count_unknown():
    assert Harness().init(start_offset=-1).record.value.delivery_complete_count == -1


def test_initializing_again_takes_the_next_snapshot_epoch_and_an_older_state_epoch_is_fenced():
    h = Harness()
    h.init(state_epoch=5)
    assert h.init(state_epoch=5).record.value.snapshot_epoch == 1  # the same epoch again is allowed
    assert h.init(state_epoch=6, start_offset=-1).record.value.snapshot_epoch == 2
    fenced = h.states.initialize(KEY, 0, 0, now_ms=NOW)
    assert (fenced.error, fenced.record) == (ErrorCode.FENCED_STATE_EPOCH, None)
    assert h.states.initialize(KEY, -1, 0, now_ms=NOW).error is ErrorCode.NONE  # -1: not given, not fenced


# ---- WriteShareGroupState ---------------------------------------------------------------------------------

def test_writing_an_uninitialized_share_partition_is_an_invalid_request():
    decision = Harness().write(batches=[StateBatch(0, 10, 0, 1)])
    assert (decision.error, decision.record) == (ErrorCode.INVALID_REQUEST, None)


def test_a_write_is_an_update_of_the_written_batches_only():
    h = Harness()
    h.init()
    h.read(leader_epoch=0)
    h.write(batches=[StateBatch(0, 10, 0, 1)], start_offset=0, count=0)
    decision = h.write(batches=[StateBatch(11, 20, 0, 1)], start_offset=0, count=21)
    assert decision.record == ShareRecord(SHARE_UPDATE, KEY, ShareUpdateValue(
        snapshot_epoch=0, leader_epoch=0, start_offset=0, state_batches=(StateBatch(11, 20, 0, 1),),
        delivery_complete_count=21))
    state = h.states.get(KEY)
    assert state.state_batches == (StateBatch(0, 20, 0, 1),)  # combined: the same state and count
    assert (state.start_offset, state.delivery_complete_count, state.snapshot_epoch) == (0, 21, 0)


def test_a_write_keeps_the_recorded_leader_epoch():
    h = Harness()
    h.init()
    h.read(leader_epoch=4)
    assert h.write(leader_epoch=-1, batches=[StateBatch(0, 1, 0, 1)]).record.value.leader_epoch == 4
    assert h.write(leader_epoch=7, batches=[StateBatch(0, 1, 0, 1)]).record.value.leader_epoch == 4


def test_an_older_leader_epoch_or_state_epoch_is_fenced():
    h = Harness()
    h.init(state_epoch=1)
    h.read(leader_epoch=1)
    decision = h.states.write(KEY, state_epoch=1, leader_epoch=0, start_offset=0, state_batches=(), now_ms=NOW)
    assert (decision.error, decision.record) == (ErrorCode.FENCED_LEADER_EPOCH, None)
    decision = h.states.write(KEY, state_epoch=0, leader_epoch=5, start_offset=0, state_batches=(), now_ms=NOW)
    assert (decision.error, decision.record) == (ErrorCode.FENCED_STATE_EPOCH, None)
    assert h.states.leader_epoch_fence(KEY) == 1 and h.states.state_epoch_fence(KEY) == 1
    not_given = h.states.write(KEY, state_epoch=-1, leader_epoch=-1, start_offset=0, state_batches=(), now_ms=NOW)
    assert not_given.error is ErrorCode.NONE


def test_a_batch_ending_before_it_starts_is_refused():
    h = Harness()
    h.init()
    assert h.write(batches=[StateBatch(10, 9, 0, 1)]).error is ErrorCode.INVALID_REQUEST


def test_a_snapshot_after_the_configured_number_of_updates():
    h = Harness(updates_per_snapshot=3)
    h.init(start_offset=0)
    kinds = []
    for i in range(8):
        record = h.write(batches=[StateBatch(i * 10, i * 10 + 9, 2, 1)], now=NOW + i).record
        kinds.append((record.record_type, record.value.snapshot_epoch))
    # three updates of snapshot 0, then snapshot 1, three updates of it, snapshot 2
    assert kinds == [(1, 0), (1, 0), (1, 0), (0, 1), (1, 1), (1, 1), (1, 1), (0, 2)]
    snapshot = h.log[4]
    assert snapshot[0] == 4
    value = h.states.get(KEY)
    assert value.state_batches == (StateBatch(0, 79, 2, 1),) and value.snapshot_epoch == 2
    assert (value.create_timestamp, value.write_timestamp) == (NOW + 7, NOW + 7)
    assert h.states.updates_since_snapshot(KEY) == 0


def test_kafkas_non_sequential_batch_updates_with_only_snapshots():
    """Kafka's testNonSequentialBatchUpdates (share.coordinator.snapshot.update.records.per.snapshot=0)."""
    h = Harness(updates_per_snapshot=0)
    h.init()  # snapshot 0
    h.read(leader_epoch=1)  # snapshot 1, recording the leader epoch
    h.write(leader_epoch=1, start_offset=0, batches=[StateBatch(0, 10, 0, 1)], count=0)  # snapshot 2
    first = h.write(leader_epoch=1, start_offset=100, count=0, batches=[
        StateBatch(100, 109, 1, 1), StateBatch(110, 119, 1, 2), StateBatch(120, 129, 1, 0)]).record
    assert first.record_type == SHARE_SNAPSHOT and first.value.snapshot_epoch == 3
    h.write(leader_epoch=1, start_offset=-1, count=10, batches=[StateBatch(100, 109, 2, 1)])
    final = h.write(leader_epoch=1, start_offset=110, count=10, batches=[StateBatch(120, 129, 2, 1)], now=NOW + 5).record
    assert final.value == ShareSnapshotValue(5, 0, 1, 110, NOW + 5, NOW + 5,
                                             (StateBatch(110, 119, 1, 2), StateBatch(120, 129, 2, 1)), 10)


# ---- ReadShareGroupState ----------------------------------------------------------------------------------

def test_reading_an_uninitialized_share_partition_is_an_invalid_request():
    assert Harness().read(leader_epoch=1).error is ErrorCode.INVALID_REQUEST


def test_a_read_with_a_newer_leader_epoch_records_it_and_fences_the_old_leader():
    h = Harness()
    h.init(start_offset=-1)
    decision = h.states.read(KEY, 2, now_ms=NOW)
    assert decision.state == h.states.get(KEY)
    assert decision.record == ShareRecord(SHARE_UPDATE, KEY, ShareUpdateValue(0, 2, -1, (), -1))
    h.carry(decision)
    assert h.states.leader_epoch_fence(KEY) == 2 and h.states.get(KEY).leader_epoch == 2
    assert h.states.read(KEY, 1, now_ms=NOW).error is ErrorCode.FENCED_LEADER_EPOCH
    old_leader = h.states.write(KEY, state_epoch=0, leader_epoch=1, start_offset=0, state_batches=(), now_ms=NOW)
    assert old_leader.error is ErrorCode.FENCED_LEADER_EPOCH
    for same_or_none in (2, -1):
        decision = h.states.read(KEY, same_or_none, now_ms=NOW)
        assert (decision.error, decision.record) == (ErrorCode.NONE, None)


def test_a_read_answers_the_merged_state():
    h = Harness()
    h.init()
    h.read(leader_epoch=0)
    h.write(start_offset=0, batches=[StateBatch(0, 10, 0, 1)])
    h.write(batches=[StateBatch(5, 7, 2, 1)])
    state = h.read(leader_epoch=0).state
    assert (state.start_offset, state.state_epoch) == (0, 0)
    assert state.state_batches == (StateBatch(0, 4, 0, 1), StateBatch(5, 7, 2, 1), StateBatch(8, 10, 0, 1))


# ---- ReadShareGroupStateSummary and DeleteShareGroupState -------------------------------------------------

def test_the_summary_of_a_share_partition_without_state_is_kafkas_default():
    decision = Harness().states.read_summary(KEY)
    assert (decision.error, decision.record, decision.state) == (ErrorCode.NONE, None, UNINITIALIZED)
    assert (UNINITIALIZED.state_epoch, UNINITIALIZED.leader_epoch, UNINITIALIZED.start_offset,
            UNINITIALIZED.delivery_complete_count) == (0, 0, -1, -1)


def test_the_summary_records_nothing():
    h = Harness()
    h.init(state_epoch=3, start_offset=7)
    decision = h.states.read_summary(KEY)
    assert decision.record is None and decision.state == h.states.get(KEY)


def test_delete_writes_a_tombstone_and_forgets_everything():
    h = Harness()
    h.init(state_epoch=3)
    h.read(leader_epoch=4)
    decision = h.carry(h.states.delete(KEY))
    assert decision.record == ShareRecord.tombstone(KEY)
    assert KEY not in h.states and h.states.leader_epoch_fence(KEY) is None and h.states.state_epoch_fence(KEY) is None
    assert h.write(batches=[StateBatch(0, 1, 0, 1)]).error is ErrorCode.INVALID_REQUEST
    nothing = h.states.delete(KEY)
    assert (nothing.error, nothing.record) == (ErrorCode.NONE, None)


# ---- refusals of every operation --------------------------------------------------------------------------

def operations(states: ShareStates, key: SharePartitionKey) -> dict[str, Decision]:
    return {
        "initialize": states.initialize(key, 0, 0, now_ms=NOW),
        "write": states.write(key, state_epoch=0, leader_epoch=0, start_offset=0, state_batches=(), now_ms=NOW),
        "read": states.read(key, 0, now_ms=NOW),
        "summary": states.read_summary(key),
        "delete": states.delete(key),
    }


def test_a_negative_partition_is_an_invalid_request_everywhere():
    for name, decision in operations(Harness().states, SharePartitionKey("g", TOPIC, -1)).items():
        assert (decision.error, decision.record) == (ErrorCode.INVALID_REQUEST, None), name


def test_a_topic_partition_that_does_not_exist_is_unknown_everywhere():
    known = {(TOPIC, 0), (TOPIC, 1)}
    h = Harness(partition_exists=lambda topic_id, partition: (topic_id, partition) in known)
    gone = SharePartitionKey("group1", TOPIC, 1)
    h.init(gone)
    known.discard((TOPIC, 1))  # its topic was deleted, or shrank
    for name, decision in operations(h.states, gone).items():
        assert (decision.error, decision.record) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None), name
    # Kafka's order: a share partition with no state is refused as such before the topic is looked at
    never = operations(h.states, SharePartitionKey("group1", OTHER_TOPIC, 0))
    assert {name: d.error for name, d in never.items()} == {
        "initialize": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "write": ErrorCode.INVALID_REQUEST,
        "read": ErrorCode.INVALID_REQUEST, "summary": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "delete": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


# ---- cold snapshots, topic deletion, pruning --------------------------------------------------------------

def test_cold_snapshots_of_the_share_partitions_not_written_for_the_interval():
    h = Harness()
    h.init(SharePartitionKey("g", TOPIC, 0), now=0)
    h.init(SharePartitionKey("g", TOPIC, 1), now=15_000)
    assert h.states.cold_snapshots(now_ms=5_000, interval_ms=10_000) == []
    records = h.states.cold_snapshots(now_ms=12_000, interval_ms=10_000)
    assert [(r.key.partition, r.value.snapshot_epoch, r.value.create_timestamp, r.value.write_timestamp)
            for r in records] == [(0, 1, 0, 12_000)]
    for record in records:
        h.carry(Decision(record=record))
    assert h.states.get(SharePartitionKey("g", TOPIC, 1)).write_timestamp == 15_000


def test_cold_snapshots_stop_once_every_share_partition_had_one():
    h = Harness()
    h.init(now=0)
    [record] = h.states.cold_snapshots(now_ms=12_000, interval_ms=10_000)
    h.carry(Decision(record=record))
    assert h.states.cold_snapshots(now_ms=24_000, interval_ms=10_000) == []
    h.write(batches=[StateBatch(0, 0, 2, 1)], now=30_000)  # an update carries no time: still quiet
    assert h.states.cold_snapshots(now_ms=36_000, interval_ms=10_000) == []


def test_cold_snapshots_leave_busy_share_partitions():
    h = Harness()
    h.init(now=0)
    assert h.states.cold_snapshots(now_ms=12_000, interval_ms=10_000, busy=lambda key: key == KEY) == []


def test_tombstones_for_the_share_partitions_of_deleted_topics():
    h = Harness()
    h.init(SharePartitionKey("g", TOPIC, 0))
    h.init(SharePartitionKey("g", OTHER_TOPIC, 0))
    assert h.states.tombstones_for_topics({TOPIC}) == [ShareRecord.tombstone(SharePartitionKey("g", TOPIC, 0))]
    assert h.states.tombstones_for_topics(set()) == []


def test_what_pruning_may_delete_is_below_the_oldest_newest_snapshot():
    one, two = SharePartitionKey("g", TOPIC, 1), SharePartitionKey("g", TOPIC, 2)
    h = Harness(updates_per_snapshot=0)
    h.init(one)                                        # 0
    assert h.states.last_redundant_offset() is None    # offset 0: nothing below it
    h.init(two)                                        # 1
    h.write(one, batches=[StateBatch(0, 0, 2, 1)])     # 2: a snapshot (0 updates per snapshot)
    assert h.states.last_redundant_offset() == 1       # two's snapshot at 1 is still needed
    h.write(two, batches=[StateBatch(0, 0, 2, 1)])     # 3
    assert h.states.last_redundant_offset() == 2
    h.carry(h.states.delete(one))                      # 4: a tombstone
    assert h.states.last_redundant_offset() == 3
    h.init(one)                                        # 5
    assert h.states.last_redundant_offset() == 3
    h.write(two, batches=[StateBatch(1, 1, 2, 1)])     # 6
    assert h.states.last_redundant_offset() == 5


def test_updates_do_not_move_what_pruning_may_delete():
    h = Harness()
    h.init()
    h.init(SharePartitionKey("g", TOPIC, 1))
    before = h.states.last_redundant_offset()
    h.write(batches=[StateBatch(0, 0, 2, 1)])
    assert h.states.last_redundant_offset() == before


# ---- loading ----------------------------------------------------------------------------------------------

def test_loading_replays_snapshots_updates_and_tombstones():
    h = Harness(updates_per_snapshot=2)
    h.init(start_offset=0)
    h.read(leader_epoch=3)
    for i in range(5):
        h.write(leader_epoch=3, batches=[StateBatch(i, i, 2, 1)], start_offset=i // 2)
    gone = SharePartitionKey("other", TOPIC, 0)
    h.init(gone)
    h.carry(h.states.delete(gone))
    fresh = h.reloaded()
    assert fresh == h.states
    assert fresh.get(KEY).state_batches == h.states.get(KEY).state_batches and gone not in fresh


def test_loading_skips_records_of_unknown_types_and_fails_on_damage():
    h = Harness()
    h.init()
    unknown = (1, b"\x00\x09" + encode_key(SHARE_SNAPSHOT, KEY)[2:], b"\x00\x00")
    fresh = ShareStates()
    assert fresh.load([*h.log, unknown]) == 1 and fresh == h.states
    damaged = (2, encode_key(SHARE_SNAPSHOT, KEY), encode_value(ShareSnapshotValue(0, 0, 0, 0, 0, 0))[:-1])
    with pytest.raises(ShareStateFormatError):
        ShareStates().load([*h.log, damaged])


def test_an_update_without_its_snapshot_starts_a_state_as_kafka_does():
    states = ShareStates()
    update = ShareUpdateValue(2, 4, 10, (StateBatch(10, 12, 0, 1),), 3)
    states.apply(ShareRecord(SHARE_UPDATE, KEY, update), 7)
    assert states.get(KEY) == ShareGroupOffset(2, 0, 4, 10, 3, (StateBatch(10, 12, 0, 1),))


# ---- the property: memory equals the log ------------------------------------------------------------------

keys = st.sampled_from([SharePartitionKey(g, t, p) for g in ("a", "b") for t in (TOPIC, OTHER_TOPIC) for p in (0, 1)])
epochs = st.integers(-1, 4)
batches = st.lists(st.builds(lambda first, length, state, count: StateBatch(first, first + length, state, count),
                             st.integers(0, 40), st.integers(0, 6), st.sampled_from([0, 2, 4]), st.integers(0, 3)),
                   max_size=3)
operation = st.one_of(
    st.tuples(st.just("initialize"), keys, epochs, st.integers(-1, 20)),
    st.tuples(st.just("write"), keys, epochs, epochs, st.integers(-1, 20), batches, st.integers(-1, 30)),
    st.tuples(st.just("read"), keys, epochs),
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("cold"), st.integers(0, 20_000)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(operation, max_size=40), st.integers(0, 3))
def test_any_history_loaded_from_its_records_gives_the_state_in_memory(history, updates_per_snapshot):
    h = Harness(updates_per_snapshot)
    for now, op in enumerate(history):
        kind, args = op[0], op[1:]
        if kind == "initialize":
            decision = h.states.initialize(args[0], args[1], args[2], now_ms=now)
        elif kind == "write":
            key, state_epoch, leader_epoch, start_offset, written, count = args
            decision = h.states.write(key, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
                                      state_batches=written, now_ms=now, delivery_complete_count=count)
        elif kind == "read":
            decision = h.states.read(args[0], args[1], now_ms=now)
        elif kind == "delete":
            decision = h.states.delete(args[0])
        else:
            for record in h.states.cold_snapshots(now_ms=now + args[0], interval_ms=10_000):
                h.carry(Decision(record=record))
            continue
        before = h.reloaded()
        assert before == h.states  # deciding changed nothing
        h.carry(decision)
    assert h.reloaded() == h.states
    # Pruning deletes below the redundant offset: what is left still gives every share partition's state
    # (not the fences of epochs a re-initialize wrote lower: state.py says why that is safe).
    pruned = ShareStates(updates_per_snapshot)
    pruned.load(entry for entry in h.log if entry[0] >= (h.states.last_redundant_offset() or 0))
    assert list(pruned) == list(h.states)
    for key in h.states:
        assert pruned.get(key) == h.states.get(key)
        assert pruned.updates_since_snapshot(key) == h.states.updates_since_snapshot(key)
    for key in h.states:  # batches stay the shortest sorted cover
        stored = h.states.get(key).state_batches
        assert all(a.last_offset < b.first_offset for a, b in itertools.pairwise(stored))
