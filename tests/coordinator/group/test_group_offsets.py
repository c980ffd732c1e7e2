"""Committed offsets: OffsetCommit / OffsetFetch / OffsetDelete / DeleteGroups / TxnOffsetCommit."""

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.offsets import TopicPartition
from eoslog.coordinator.group.state import GroupState

E = Errors
S = GroupState


def commit(h, group="g", offsets=(("t", 0, 10),), **kw):
    return h.run(h.c.commit_offsets(group, list(offsets), now_ms=h.now, **kw))


def txn_commit(h, pid, offsets, group="g", **kw):
    return h.run(h.c.txn_commit_offsets(group, pid, 0, list(offsets), now_ms=h.now, **kw))


def fetch(h, group="g", tps=None, stable=False):
    return {(p.topic, p.partition): (p.offset, p.error)
            for p in h.c.fetch_offsets(group, tps, require_stable=stable).response.partitions}


def test_simple_commit_and_fetch(h):
    h.now = 1234
    r = commit(h, offsets=[("t", 0, 10, 3, "meta"), ("t", 1, 20)])
    assert [p.error for p in h.answer(r).partitions] == [E.NONE, E.NONE]
    parts = h.c.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)]).response.partitions
    assert [(p.partition, p.offset, p.leader_epoch, p.metadata) for p in parts] == [
        (0, 10, 3, "meta"), (1, 20, -1, ""), (2, -1, -1, "")]
    assert fetch(h) == {("t", 0): (10, E.NONE), ("t", 1): (20, E.NONE)}
    assert h.c.offsets.committed("g")[TopicPartition("t", 0)].commit_timestamp_ms == 1234
    assert fetch(h, group="unknown") == {}


def test_commit_is_invisible_until_written(h):
    h.auto_write = False
    r = commit(h)
    assert r.pending is not None
    assert fetch(h) == {}
    assert fetch(h, tps=[("t", 0)], stable=True) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    h.release_writes()
    assert fetch(h, stable=True) == {("t", 0): (10, E.NONE)}


def test_failed_write_commits_nothing(h):
    h.auto_write = False
    r = commit(h)
    h.release_writes(E.COORDINATOR_NOT_AVAILABLE)
    assert h.answer(r).partitions[0].error is E.COORDINATOR_NOT_AVAILABLE
    assert fetch(h, tps=[("t", 0)], stable=True) == {("t", 0): (-1, E.NONE)}


def test_metadata_too_large_is_refused_per_partition(make_harness):
    h = make_harness(offset_metadata_max_bytes=4)
    r = commit(h, offsets=[("t", 0, 1, -1, "12345"), ("t", 1, 2, -1, "1234")])
    assert [p.error for p in h.answer(r).partitions] == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    assert fetch(h) == {("t", 1): (2, E.NONE)}


def test_commit_with_negative_generation_into_an_empty_group_is_accepted_whatever_the_member_id(h):
    """Kafka's ClassicGroup.validateOffsetCommit: a consumer that only used assign() may still carry a
    member id of its own (librdkafka, KIP-1082)."""
    assert h.answer(commit(h, group="simple", member_id="self-named", generation_id=-1)).error is E.NONE
    assert h.answer(commit(h, group="simple", member_id="self-named", generation_id=-1,
                           group_instance_id="static")).error is E.NONE
    assert fetch(h, group="simple") == {("t", 0): (10, E.NONE)}
    # a non-negative generation still needs the member
    assert h.answer(commit(h, group="simple", member_id="self-named", generation_id=0)).error \
        is E.UNKNOWN_MEMBER_ID


def test_member_commit_checks_generation_and_member(h):
    a, b = h.stable_group(2)
    assert h.answer(commit(h, member_id=a, generation_id=1)).error is E.NONE
    assert h.answer(commit(h, member_id=a, generation_id=0)).error is E.ILLEGAL_GENERATION
    assert h.answer(commit(h, member_id="ghost", generation_id=1)).error is E.UNKNOWN_MEMBER_ID
    # a commit without group management while the group has members, also from a self-named
    # assign() consumer (KIP-1082: a member id, generation -1)
    assert h.answer(commit(h)).error is E.UNKNOWN_MEMBER_ID
    assert h.answer(commit(h, member_id="self-named", generation_id=-1)).error is E.UNKNOWN_MEMBER_ID
    assert h.answer(commit(h, group="gone", member_id=a, generation_id=3)).error is E.ILLEGAL_GENERATION
    assert h.answer(commit(h, group="gone", member_id=a, generation_id=3, api_version=9)).error \
        is E.GROUP_ID_NOT_FOUND  # Kafka 4.x from OffsetCommit v9
    h.join(a)  # PreparingRebalance: commits of the current generation are still fine (revocation)
    assert h.answer(commit(h, member_id=b, generation_id=1)).error is E.NONE
    h.join(b)  # CompletingRebalance
    assert h.answer(commit(h, member_id=b, generation_id=2)).error is E.REBALANCE_IN_PROGRESS


def test_offset_delete_respects_subscriptions(h):
    sub = b"\x00\x01" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"  # v1: topics ["t"], no user data
    h.stable_group(1)
    leader = h.group().leader_id
    h.join(leader, protocols=(("range", sub),))
    h.sync(leader, 2, {leader: b""})
    assert h.answer(commit(h, offsets=[("t", 0, 1), ("u", 0, 2)], member_id=leader, generation_id=2)).error \
        is E.NONE
    r = h.run(h.c.delete_offsets("g", [("t", 0), ("u", 0)], now_ms=h.now))
    assert [(p.topic, p.error) for p in h.answer(r).partitions] == [
        ("t", E.GROUP_SUBSCRIBED_TO_TOPIC), ("u", E.NONE)]
    assert fetch(h) == {("t", 0): (1, E.NONE)}
    assert h.c.delete_offsets("nope", [("t", 0)], now_ms=h.now).response.error is E.GROUP_ID_NOT_FOUND


def test_offset_delete_for_non_consumer_groups(h):
    h.stable_group(1)
    h.group().protocol_type = "connect"  # a group whose subscriptions we cannot read
    assert h.c.delete_offsets("g", [("t", 0)], now_ms=h.now).response.error is E.NON_EMPTY_GROUP
    commit(h, group="simple")
    r = h.run(h.c.delete_offsets("simple", [("t", 0)], now_ms=h.now))
    assert h.answer(r).partitions[0].error is E.NONE
    assert fetch(h, group="simple") == {}


def test_delete_groups(h):
    commit(h, group="simple", offsets=[("t", 0, 1), ("t", 1, 2)])
    h.stable_group(1, group="busy")
    r = h.run(h.c.delete_groups(["simple", "busy", "missing"], now_ms=h.now))
    assert [(g.group_id, g.error) for g in h.answer(r).groups] == [
        ("simple", E.NONE), ("busy", E.NON_EMPTY_GROUP), ("missing", E.GROUP_ID_NOT_FOUND)]
    assert "simple" not in h.c.groups and fetch(h, group="simple") == {}
    tombstones = [e for e in h.log[h.c.partition_for("simple")] if e.value is None]
    assert len(tombstones) == 3  # two offsets and the group


def test_delete_group_is_dead_while_tombstones_are_written(h):
    commit(h, group="simple")
    h.auto_write = False
    r = h.run(h.c.delete_groups(["simple"], now_ms=h.now))
    assert h.c.groups["simple"].state is S.DEAD
    assert h.join("", group="simple").response.error is E.COORDINATOR_NOT_AVAILABLE
    h.release_writes(E.NOT_COORDINATOR)
    assert h.answer(r).groups[0].error is E.NOT_COORDINATOR
    assert h.c.groups["simple"].state is S.EMPTY and fetch(h, group="simple") == {("t", 0): (10, E.NONE)}


# ---------------------------------------------------------------------------------------------------
# Transactional offsets


def test_txn_offsets_invisible_until_commit_marker(h):
    commit(h, offsets=[("t", 0, 5)])
    r = txn_commit(h, 7, [("t", 0, 50), ("t", 1, 60)])
    assert [p.error for p in h.answer(r).partitions] == [E.NONE, E.NONE]
    assert h.log[h.c.partition_for("g")][-1].is_transactional
    assert fetch(h) == {("t", 0): (5, E.NONE)}
    assert h.c.has_pending_txn_offsets("g")
    assert h.c.has_pending_txn_offsets("g", [TopicPartition("t", 1)])
    assert not h.c.has_pending_txn_offsets("g", [TopicPartition("t", 9)])
    assert fetch(h, tps=[("t", 0), ("t", 9)], stable=True) == {
        ("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT), ("t", 9): (-1, E.NONE)}
    assert fetch(h, stable=True) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT),
                                     ("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    h.marker(7, commit=True)
    assert not h.c.has_pending_txn_offsets("g")
    assert fetch(h, stable=True) == {("t", 0): (50, E.NONE), ("t", 1): (60, E.NONE)}


def test_txn_offsets_dropped_on_abort(h):
    commit(h, offsets=[("t", 0, 5)])
    txn_commit(h, 7, [("t", 0, 50)])
    h.marker(7, commit=False)
    assert not h.c.has_pending_txn_offsets("g")
    assert fetch(h, stable=True) == {("t", 0): (5, E.NONE)}


def test_plain_commit_after_txn_record_wins(h):
    txn_commit(h, 7, [("t", 0, 50)])
    commit(h, offsets=[("t", 0, 70)])  # written after the txn record, before the marker
    h.marker(7, commit=True)
    assert fetch(h) == {("t", 0): (70, E.NONE)}


def test_txn_markers_of_other_producers_do_not_touch_pending(h):
    txn_commit(h, 7, [("t", 0, 50)])
    txn_commit(h, 8, [("t", 1, 80)])
    h.marker(8, commit=True)
    assert fetch(h) == {("t", 1): (80, E.NONE)}
    assert h.c.has_pending_txn_offsets("g", [TopicPartition("t", 0)])


def test_txn_commit_creates_group_and_kip447_fencing(h):
    assert h.answer(txn_commit(h, 7, [("t", 0, 1)], group="fresh")).error is E.NONE
    a, b = h.stable_group(2)
    ok = txn_commit(h, 9, [("t", 0, 1)], member_id=a, generation_id=1)
    assert h.answer(ok).error is E.NONE
    assert h.answer(txn_commit(h, 9, [("t", 0, 1)], member_id=a, generation_id=0)).error \
        is E.ILLEGAL_GENERATION
    assert h.answer(txn_commit(h, 9, [("t", 0, 1)], member_id="zombie", generation_id=1)).error \
        is E.UNKNOWN_MEMBER_ID
    h.join(a)
    h.join(b)
    # transactional commits are allowed while completing a rebalance, with the new generation
    assert h.answer(txn_commit(h, 9, [("t", 0, 2)], member_id=b, generation_id=2)).error is E.NONE
    # an old-generation producer (a zombie from before the rebalance) is fenced
    assert h.answer(txn_commit(h, 9, [("t", 0, 3)], member_id=b, generation_id=1)).error \
        is E.ILLEGAL_GENERATION
    # a transactional commit without generation info is allowed even with members (v0-v2)
    assert h.answer(txn_commit(h, 9, [("t", 0, 4)])).error is E.NONE


def test_offset_expiry_of_an_empty_group(make_harness):
    h = make_harness(offsets_retention_ms=1000)
    commit(h, group="simple")
    h.now = 999
    assert h.run(h.c.expire_offsets(h.now)).writes == []
    h.now = 1000
    r = h.run(h.c.expire_offsets(h.now))
    assert len(r.writes) == 1 and "simple" not in h.c.groups
    a, = h.stable_group(1)
    commit(h, member_id=a, generation_id=1)
    h.now += 5000
    assert h.run(h.c.expire_offsets(h.now)).writes == []  # subscribed topic of a Stable group: kept
