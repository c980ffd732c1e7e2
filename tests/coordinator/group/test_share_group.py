"""The share group core (KIP-932) without I/O: its state tables and configuration; heartbeats, fencing,
timeouts, the group-id namespace and persistence follow."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eoslog.coordinator.group import GroupConfig, PartitionCommit
from eoslog.coordinator.group.consumer_group import ConsumerHeartbeat
from eoslog.coordinator.group.errors import Errors as E
from eoslog.coordinator.group.results import GroupListing
from eoslog.coordinator.group.share_assignor import TopicMetadata
from eoslog.coordinator.group.share_group import ShareHeartbeat
from eoslog.coordinator.group.share_log_format import group_records
from eoslog.coordinator.group.share_state import (
    VALID_PREVIOUS_GROUP_STATES,
    VALID_PREVIOUS_MEMBER_STATES,
    IllegalShareGroupTransition,
    ShareGroupState,
    ShareMemberState,
    check_group_transition,
    check_member_transition,
)

G = ShareGroupState


# ---- state tables ------------------------------------------------------------------------------------

@pytest.mark.parametrize("before", list(G))
@pytest.mark.parametrize("after", list(G))
def test_group_transition_table(before, after):
    allowed = before in VALID_PREVIOUS_GROUP_STATES[after]
    # Only an Empty group is deleted; Dead is left only by a failed deletion, back to Empty.
    if after is G.DEAD or before is G.DEAD:
        assert allowed == ((before, after) in ((G.EMPTY, G.DEAD), (G.DEAD, G.EMPTY)))
    if allowed:
        check_group_transition("g", before, after)
    else:
        with pytest.raises(IllegalShareGroupTransition):
            check_group_transition("g", before, after)


def test_member_transition_table():
    assert VALID_PREVIOUS_MEMBER_STATES == {ShareMemberState.STABLE: frozenset({ShareMemberState.STABLE})}
    check_member_transition("m", ShareMemberState.STABLE, ShareMemberState.STABLE)
    assert [s.value for s in ShareMemberState] == [0]  # Kafka's MemberState.STABLE byte, persisted
    assert [s.kafka_name for s in G] == ["Empty", "Stable", "Dead"]


# ---- configuration -----------------------------------------------------------------------------------

def test_share_config_defaults_are_kafkas():
    c = GroupConfig()
    assert (c.share_session_timeout_ms, c.share_min_session_timeout_ms, c.share_max_session_timeout_ms) == \
        (45_000, 45_000, 60_000)
    assert (c.share_heartbeat_interval_ms, c.share_min_heartbeat_interval_ms, c.share_max_heartbeat_interval_ms) == \
        (5_000, 5_000, 15_000)
    assert c.share_max_size == 200


@pytest.mark.parametrize("bad", [
    {"share_max_size": 0}, {"share_max_size": 1001},
    {"share_session_timeout_ms": 44_999}, {"share_session_timeout_ms": 60_001},
    {"share_heartbeat_interval_ms": 4_999}, {"share_heartbeat_interval_ms": 15_001},
    {"share_min_session_timeout_ms": 0, "share_session_timeout_ms": 5_000},
    {"share_min_session_timeout_ms": 1_000, "share_session_timeout_ms": 5_000},  # interval >= timeout
])
def test_share_config_bounds_are_kafkas(bad):
    with pytest.raises(ValueError):
        GroupConfig(**bad)


# ---- heartbeats ----------------------------------------------------------------------------------------

T, U = uuid.UUID(int=0x7), uuid.UUID(int=0x8)
TOPICS = {"t": TopicMetadata(T, 6), "u": TopicMetadata(U, 3)}
SESSION = 3000
INTERVAL = 500


def share_harness(make_harness, **config):
    config.setdefault("share_session_timeout_ms", SESSION)
    h = make_harness(share_min_session_timeout_ms=1, share_heartbeat_interval_ms=INTERVAL,
                     share_min_heartbeat_interval_ms=1, **config)
    h.topics = dict(TOPICS)

    def hb(member_id, epoch, group="sg", topics=None, **kw):
        if topics is not None:
            kw["subscribed_topic_names"] = tuple(topics)
        result = h.run(h.c.share_group_heartbeat(group, ShareHeartbeat(member_id, epoch, **kw),
                                                 topics=h.topics, now_ms=h.now))
        return h.answer(result)

    h.hb = hb
    return h


@pytest.fixture
def sh(make_harness):
    return share_harness(make_harness)


def parts(response, topic_id=T):
    return set((response.assignment or {}).get(topic_id, ()))


def group(h, group_id="sg"):
    return h.c.share.groups[group_id]


def test_a_join_is_answered_once_its_records_are_durable(sh):
    sh.auto_write = False
    result = sh.run(sh.c.share_group_heartbeat("sg", ShareHeartbeat("a", 0, subscribed_topic_names=("t",),
                                                                     client_id="cid", client_host="/h"),
                                               topics=sh.topics, now_ms=sh.now))
    assert result.pending is not None and sh.answer(result) is None and len(sh.held) == 1
    sh.release_writes()
    a = sh.answer(result)
    assert (a.error, a.member_id, a.member_epoch, a.heartbeat_interval_ms) == (E.NONE, "a", 1, INTERVAL)
    assert a.assignment == {T: frozenset(range(6))}
    member = group(sh).members["a"]
    assert (member.member_epoch, member.previous_member_epoch, member.client_id, member.client_host) == (1, 0, "cid", "/h")
    assert group(sh).state is G.STABLE and group(sh).assignment_epoch == group(sh).group_epoch == 1


def test_a_second_member_takes_its_share_at_once(sh):
    sh.hb("a", 0, topics=["t"])
    b = sh.hb("b", 0, topics=["t"])
    assert b.member_epoch == 2 and len(parts(b)) == 3
    # No revocation phase: a moves to epoch 2 and its half in one heartbeat.
    a = sh.hb("a", 1)
    assert a.member_epoch == 2 and parts(a) == set(range(6)) - parts(b)
    # Nothing changed since: no assignment in the answer, and nothing written.
    writes = len(sh.log[sh.c.partition_for("sg")])
    again = sh.hb("a", 2)
    assert again.error is E.NONE and again.assignment is None
    assert len(sh.log[sh.c.partition_for("sg")]) == writes


def test_members_outnumbering_partitions_share_them(sh):
    members = [sh.hb(m, 0, topics=["u"]) for m in "abcde"]
    final = [sh.hb(m, r.member_epoch) for m, r in zip("abcde", members)]
    held = Counter(p for r in final for p in (r.assignment or group(sh).members[r.member_id].assigned).get(U, ()))
    assert held == {0: 2, 1: 2, 2: 2}  # ceil(5 / 3) members each


def test_epochs_the_current_and_the_previous_are_accepted_others_fenced(sh):
    sh.hb("a", 0, topics=["t"])
    sh.hb("b", 0, topics=["t"])
    assert sh.hb("a", 1).member_epoch == 2  # previous 1, current 2
    assert sh.hb("a", 1).error is E.NONE  # the answer with 2 may have been lost
    fenced = sh.hb("a", 3)
    assert fenced.error is E.FENCED_MEMBER_EPOCH and "greater member epoch (3)" in fenced.error_message
    assert (fenced.member_id, fenced.member_epoch, fenced.assignment) == (None, 0, None)
    sh.hb("c", 0, topics=["t"])
    sh.hb("a", 2)  # now at 3, previous 2
    assert sh.hb("a", 1).error is E.FENCED_MEMBER_EPOCH


def test_a_known_member_may_rejoin_with_epoch_zero(sh):
    sh.hb("a", 0, topics=["t"])
    epoch = group(sh).group_epoch
    again = sh.hb("a", 0, topics=["t"])
    assert again.error is E.NONE and again.member_epoch == 1 and parts(again) == set(range(6))
    assert group(sh).group_epoch == epoch  # nothing changed: no rebalance


def test_unknown_members_and_groups(sh):
    assert sh.hb("x", 3, topics=["t"]).error is E.GROUP_ID_NOT_FOUND  # only a join creates the group
    assert sh.hb("x", -1).error is E.GROUP_ID_NOT_FOUND
    assert "sg" not in sh.c.share.groups
    sh.hb("a", 0, topics=["t"])
    unknown = sh.hb("x", 1)
    assert unknown.error is E.UNKNOWN_MEMBER_ID and unknown.error_message == "Member x is not a member of group sg."
    assert sh.hb("x", -1).error is E.UNKNOWN_MEMBER_ID


def test_a_member_leaves_with_epoch_minus_one(sh, make_harness):
    sh.hb("a", 0, topics=["t"])
    b = sh.hb("b", 0, topics=["t"])
    left = sh.hb("a", -1)
    assert (left.error, left.member_id, left.member_epoch, left.assignment) == (E.NONE, "a", -1, None)
    assert set(group(sh).members) == {"b"} and group(sh).group_epoch == 3 and group(sh).assignment_epoch == 2
    # b takes everything at its next heartbeat, at the new epoch.
    again = sh.hb("b", b.member_epoch)
    assert again.member_epoch == 3 and parts(again) == set(range(6))
    assert sh.hb("b", -1).error is E.NONE and group(sh).state is G.EMPTY
    assert sh.c.list_groups() == [GroupListing("sg", "share", "Empty", "share")]
    # The member's records were tombstoned: a reload finds the group empty.
    other = make_harness()
    partition = sh.c.partition_for("sg")
    other.c.load_partition(partition, sh.log[partition], now_ms=sh.now)
    assert other.c.share.groups["sg"].is_empty() and other.c.share.groups["sg"].group_epoch == 4


def test_a_silent_member_is_removed_when_its_session_ends(sh):
    sh.hb("a", 0, topics=["t"])
    sh.hb("b", 0, topics=["t"])
    assert sh.c.next_deadline() == SESSION
    sh.advance(SESSION - 1)
    b = sh.hb("b", 2)  # b keeps its session alive, a does not
    assert sh.c.next_deadline() == SESSION
    sh.advance(1)
    assert set(group(sh).members) == {"b"} and group(sh).group_epoch == 3
    assert b.error is E.NONE and sh.c.next_deadline() == (SESSION - 1) + SESSION
    assert parts(sh.hb("b", 2)) == set(range(6))
    assert sh.hb("a", 2).error is E.UNKNOWN_MEMBER_ID


def test_the_group_size_is_capped(make_harness):
    h = share_harness(make_harness, share_max_size=2)
    h.hb("a", 0, topics=["t"])
    h.hb("b", 0, topics=["t"])
    full = h.hb("c", 0, topics=["t"])
    assert full.error is E.GROUP_MAX_SIZE_REACHED
    assert full.error_message == "The share group has reached its maximum capacity of 2 members."
    assert h.hb("x", 5).error is E.GROUP_MAX_SIZE_REACHED  # checked before the member, as Kafka does
    assert h.hb("a", 0, topics=["t"]).error is E.NONE  # members already in may rejoin
    h.hb("b", -1)
    assert h.hb("c", 0, topics=["t"]).error is E.NONE


def test_a_subscription_change_bumps_the_group_epoch(sh):
    a = sh.hb("a", 0, topics=["t"])
    both = sh.hb("a", a.member_epoch, topics=["t", "u"])
    assert both.member_epoch == 2 and both.assignment == {T: frozenset(range(6)), U: frozenset(range(3))}
    assert group(sh).members["a"].subscribed_topic_names == ("t", "u")
    only_u = sh.hb("a", 2, topics=["u"])
    assert only_u.member_epoch == 3 and only_u.assignment == {U: frozenset(range(3))}
    # The same subscription again (any order, duplicates) is no change.
    assert sh.hb("a", 3, topics=["u", "u"]).member_epoch == 3
    # A topic that does not exist yet is a subscription change, but assigns nothing until it is created.
    later = sh.hb("a", 3, topics=["u", "v"])
    assert later.member_epoch == 4 and later.assignment == {U: frozenset(range(3))}
    sh.topics["v"] = TopicMetadata(uuid.UUID(int=0x9), 1)
    created = sh.hb("a", 4)
    assert created.member_epoch == 5 and created.assignment[uuid.UUID(int=0x9)] == {0}


def test_topic_metadata_changes_bump_the_group_epoch(sh):
    a = sh.hb("a", 0, topics=["t"])
    sh.topics["t"] = TopicMetadata(T, 8)  # more partitions
    grown = sh.hb("a", a.member_epoch)
    assert grown.member_epoch == 2 and parts(grown) == set(range(8))
    del sh.topics["t"]  # deleted
    gone = sh.hb("a", 2)
    assert gone.member_epoch == 3 and gone.assignment == {}
    new_id = uuid.UUID(int=0x70)
    sh.topics["t"] = TopicMetadata(new_id, 8)  # created again: another topic id, same name and size
    back = sh.hb("a", 3)
    assert back.member_epoch == 4 and back.assignment == {new_id: frozenset(range(8))}


@pytest.mark.parametrize(("group_id", "request_", "message"), [
    ("sg", ShareHeartbeat("", 0, subscribed_topic_names=("t",)), "MemberId can't be empty."),
    ("", ShareHeartbeat("a", 0, subscribed_topic_names=("t",)), "GroupId can't be empty."),
    ("sg", ShareHeartbeat("a", 0, rack_id="", subscribed_topic_names=("t",)), "RackId can't be empty."),
    ("sg", ShareHeartbeat("a", 0), "SubscribedTopicNames must be set in first request."),
    ("sg", ShareHeartbeat("a", 0, subscribed_topic_names=()), "SubscribedTopicNames must be set in first request."),
    ("sg", ShareHeartbeat("a", -2), "MemberEpoch is invalid."),
])
def test_invalid_requests(sh, group_id, request_, message):
    answer = sh.run(sh.c.share_group_heartbeat(group_id, request_, topics=sh.topics, now_ms=0)).response
    assert (answer.error, answer.error_message) == (E.INVALID_REQUEST, message)
    assert not sh.c.share.groups


def test_the_coordinators_ownership_answers_first(sh):
    partition = sh.c.partition_for("sg")
    sh.ownership[partition] = E.NOT_COORDINATOR
    assert sh.hb("a", 0, topics=["t"]).error is E.NOT_COORDINATOR
    sh.ownership[partition] = E.COORDINATOR_LOAD_IN_PROGRESS
    assert sh.hb("a", 0, topics=["t"]).error is E.COORDINATOR_LOAD_IN_PROGRESS
    assert sh.c.share_group_describe(["sg"])[0].error is E.COORDINATOR_LOAD_IN_PROGRESS


# ---- one group id, one group type ----------------------------------------------------------------------

def test_a_group_id_names_one_group_type(sh):
    sh.stable_group(1, group="classic")
    consumer = sh.run(sh.c.consumer_group_heartbeat("cg", ConsumerHeartbeat("m", 0, subscribed_topic_names=("t",)),
                                                    topics={"t": 6}, now_ms=sh.now))
    assert sh.answer(consumer).error is E.NONE
    for other in ("classic", "cg"):
        refused = sh.hb("a", 0, group=other, topics=["t"])
        assert refused.error is E.GROUP_ID_NOT_FOUND and refused.error_message == f"Group {other} is not a share group."
        described = sh.c.share_group_describe([other])[0]
        assert described.error is E.GROUP_ID_NOT_FOUND and described.members == ()
    assert "classic" in sh.c.groups and "cg" in sh.c.consumer.groups and set(sh.c.share.groups) == set()

    sh.hb("a", 0, topics=["t"])
    # The classic and consumer APIs on a share group's id: Kafka 4.2's answers.
    assert sh.join("", "sg").response.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert sh.sync("m", 1, group="sg").response.error is E.UNKNOWN_MEMBER_ID
    assert sh.heartbeat("m", 1, group="sg").error is E.UNKNOWN_MEMBER_ID
    assert sh.leave(("m", None), group="sg").members[0].error is E.UNKNOWN_MEMBER_ID
    consumer = sh.run(sh.c.consumer_group_heartbeat("sg", ConsumerHeartbeat("m", 0, subscribed_topic_names=("t",)),
                                                    topics={"t": 6}, now_ms=sh.now)).response
    assert consumer.error is E.GROUP_ID_NOT_FOUND
    assert sh.c.consumer_group_describe("sg").error is E.GROUP_ID_NOT_FOUND
    assert sh.c.describe("sg").error is E.GROUP_ID_NOT_FOUND  # DescribeGroups: classic groups only
    committed = sh.run(sh.c.commit_offsets("sg", [PartitionCommit("t", 0, 5)], now_ms=sh.now)).response
    assert committed.error is E.GROUP_ID_NOT_FOUND and committed.partitions[0].error is E.GROUP_ID_NOT_FOUND
    txn = sh.run(sh.c.txn_commit_offsets("sg", 7, 0, [PartitionCommit("t", 0, 5)], now_ms=sh.now)).response
    assert txn.error is E.GROUP_ID_NOT_FOUND
    assert sh.c.fetch_offsets("sg", [("t", 0)]).response.error is E.GROUP_ID_NOT_FOUND
    assert sh.run(sh.c.delete_offsets("sg", [("t", 0)], now_ms=sh.now)).response.error is E.GROUP_ID_NOT_FOUND
    # Nothing of the share group was touched, and no classic group appeared beside it.
    assert "sg" not in sh.c.groups and "sg" not in sh.c.consumer.groups and group(sh).members.keys() == {"a"}
    listed = {g.group_id: (g.protocol_type, g.state, g.group_type) for g in sh.c.list_groups()}
    assert listed == {"classic": ("consumer", "Stable", "classic"), "cg": ("consumer", "Stable", "consumer"),
                      "sg": ("share", "Stable", "share")}
    assert [g.group_id for g in sh.c.list_groups(types=["SHARE"])] == ["sg"]
    assert [g.group_id for g in sh.c.list_groups(states=["empty"], types=["share"])] == []


def test_describe(sh):
    sh.hb("b", 0, topics=["t"], rack_id="r1", client_id="cb", client_host="/1.2.3.4")
    sh.hb("a", 0, topics=["t", "u"])
    sh.hb("b", 1, client_id="cb", client_host="/1.2.3.4")  # every heartbeat carries them (the connection's)
    described, missing = sh.c.share_group_describe(["sg", "nope"])
    assert (described.error, described.state, described.group_epoch, described.assignment_epoch,
            described.assignor_name) == (E.NONE, "Stable", 2, 2, "simple")
    assert [m.member_id for m in described.members] == ["a", "b"]
    b = described.members[1]
    assert (b.rack_id, b.member_epoch, b.client_id, b.client_host, b.subscribed_topic_names) == \
        ("r1", 2, "cb", "/1.2.3.4", ("t",))
    assert b.assignment == group(sh).members["b"].assigned and b.assignment
    assert (missing.error, missing.error_message, missing.state) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.", "Dead")


# ---- deletion, failed writes, unloading ----------------------------------------------------------------

def test_delete_an_empty_share_group(sh, make_harness):
    sh.hb("a", 0, topics=["t"])
    refused = sh.answer(sh.run(sh.c.delete_groups(["sg"], now_ms=sh.now)))
    assert refused.groups[0].error is E.NON_EMPTY_GROUP
    sh.hb("a", -1)
    sh.auto_write = False
    pending = sh.run(sh.c.delete_groups(["sg"], now_ms=sh.now))
    assert pending.pending is not None
    assert sh.hb("b", 0, topics=["t"]).error is E.COORDINATOR_NOT_AVAILABLE
    assert sh.c.share_group_describe(["sg"])[0].error is E.GROUP_ID_NOT_FOUND
    assert sh.c.list_groups() == []
    (write,) = sh.held
    assert [k[:2] for k, v in write.records] == [b"\x00\x0c", b"\x00\x0b"] and all(v is None for _, v in write.records)
    sh.release_writes()
    assert sh.answer(pending).groups[0].error is E.NONE
    assert "sg" not in sh.c.share.groups and sh.c.groups_in(sh.c.partition_for("sg")) == 0
    assert sh.answer(sh.run(sh.c.delete_groups(["sg"], now_ms=sh.now))).groups[0].error is E.GROUP_ID_NOT_FOUND
    other = make_harness()
    partition = sh.c.partition_for("sg")
    other.c.load_partition(partition, sh.log[partition], now_ms=sh.now)
    assert "sg" not in other.c.share.groups and "sg" not in other.c.groups
    # The id is free again, for any group type.
    sh.auto_write = True
    assert sh.hb("b", 0, topics=["t"]).member_epoch == 1


def test_a_failed_deletion_brings_the_group_back_empty(sh):
    sh.hb("a", 0, topics=["t"])
    sh.hb("a", -1)
    sh.fail_writes = E.NOT_COORDINATOR
    assert sh.answer(sh.run(sh.c.delete_groups(["sg"], now_ms=sh.now))).groups[0].error is E.NOT_COORDINATOR
    assert group(sh).state is G.EMPTY
    sh.fail_writes = None
    assert sh.hb("b", 0, topics=["t"]).member_epoch == 3


def test_a_failed_write_rolls_the_group_back(sh):
    a = sh.hb("a", 0, topics=["t"])
    sh.fail_writes = E.NOT_COORDINATOR
    failed = sh.hb("b", 0, topics=["t"])
    assert (failed.error, failed.member_id) == (E.NOT_COORDINATOR, None)
    assert set(group(sh).members) == {"a"} and group(sh).group_epoch == a.member_epoch
    sh.fail_writes = None
    assert sh.hb("a", a.member_epoch).error is E.NONE
    # A group whose first write failed is not kept at all.
    sh.fail_writes = E.COORDINATOR_NOT_AVAILABLE
    assert sh.hb("x", 0, group="other", topics=["t"]).error is E.COORDINATOR_NOT_AVAILABLE
    assert "other" not in sh.c.share.groups


def test_unloading_forgets_share_groups_and_their_writes_answer_once(sh):
    partition = sh.c.partition_for("sg")
    sh.hb("a", 0, topics=["t"])
    sh.auto_write = False
    waiting = sh.run(sh.c.share_group_heartbeat("sg", ShareHeartbeat("b", 0, subscribed_topic_names=("t",)),
                                                topics=sh.topics, now_ms=sh.now))
    unloaded = sh.run(sh.c.unload_partition(partition))
    assert unloaded.completed == [] and "sg" not in sh.c.share.groups and sh.c.groups_in(partition) == 0
    sh.release_writes(E.NOT_COORDINATOR)  # the runtime fails what was in flight: answered then, once
    assert sh.answer(waiting).error is E.NOT_COORDINATOR
    assert "sg" not in sh.c.share.groups and "sg" not in sh.c._share_written


def test_loaded_members_get_a_fresh_session(sh, make_harness):
    sh.hb("a", 0, topics=["t"])
    other = share_harness(make_harness)
    partition = sh.c.partition_for("sg")
    other.now = 10_000
    other.c.load_partition(partition, sh.log[partition], now_ms=other.now)
    assert other.c.next_deadline() == 10_000 + SESSION
    other.advance(SESSION)
    assert group(other).is_empty() and group(other).group_epoch == 2
    assert other.hb("a", 1).error is E.UNKNOWN_MEMBER_ID


# ---- persistence: whatever happened, the log gives the same groups back ----------------------------------

MEMBERS = "abcd"
op = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS), st.sampled_from(["sg", "sg2"]),
              st.lists(st.sampled_from(["t", "u", "v"]), min_size=1, max_size=3)),
    st.tuples(st.just("beat"), st.sampled_from(MEMBERS), st.sampled_from(["sg", "sg2"]), st.integers(-1, 1)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS), st.sampled_from(["sg", "sg2"])),
    st.tuples(st.just("advance"), st.integers(0, SESSION)),
    st.tuples(st.just("topics"), st.sampled_from(["t", "u", "v"]), st.integers(0, 4)),
    st.tuples(st.just("delete"), st.sampled_from(["sg", "sg2"])),
    st.tuples(st.just("fail_next"),),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(op, max_size=30))
def test_the_log_gives_back_the_same_share_groups(make_harness, ops):
    h = share_harness(make_harness)
    ids = {"t": T, "u": U, "v": uuid.UUID(int=0x9)}
    for step in ops:
        h.fail_writes = None
        kind = step[0]
        if kind == "fail_next":
            h.fail_writes = E.NOT_COORDINATOR
            step = ("beat", "a", "sg", 0)
            kind = "beat"
        if kind == "join":
            h.hb(step[1], 0, group=step[2], topics=step[3])
        elif kind == "beat":
            g = h.c.share.groups.get(step[2])
            member = g.members.get(step[1]) if g is not None else None
            h.hb(step[1], (member.member_epoch if member else 1) + step[3], group=step[2])
        elif kind == "leave":
            h.hb(step[1], -1, group=step[2])
        elif kind == "advance":
            h.advance(step[1])
        elif kind == "topics":
            if step[2]:
                h.topics[step[1]] = TopicMetadata(ids[step[1]], step[2])
            else:
                h.topics.pop(step[1], None)
        else:
            h.answer(h.run(h.c.delete_groups([step[1]], now_ms=h.now)))
    h.fail_writes = None

    other = share_harness(make_harness)
    other.now, other.topics = h.now, h.topics
    for partition, entries in h.log.items():
        other.c.load_partition(partition, entries, now_ms=h.now)
    assert set(other.c.share.groups) == set(h.c.share.groups)
    for group_id, original in h.c.share.groups.items():
        loaded = other.c.share.groups[group_id]
        assert group_records(loaded) == group_records(original)
        assert loaded.state is original.state
        assert other.c._share_durable[group_id] == h.c._share_durable[group_id] == group_records(original)
        # And they carry on alike: every member's next heartbeat gets the same answer from both.
        for member_id, member in sorted(original.members.items()):
            assert other.hb(member_id, member.member_epoch, group=group_id) == \
                h.hb(member_id, member.member_epoch, group=group_id)
