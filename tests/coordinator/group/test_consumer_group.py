"""The consumer group core (KIP-848) without I/O: assignors, reconciliation, epochs and fencing, static
members, timeouts, offset-commit fencing, and the records that bring a group back after a restart."""

from __future__ import annotations

import itertools

import pytest

from eoslog.coordinator.group import PartitionCommit
from eoslog.coordinator.group.assignors import range_, uniform
from eoslog.coordinator.group.consumer_group import ConsumerHeartbeat
from eoslog.coordinator.group.consumer_log_format import decode_key, group_records
from eoslog.coordinator.group.consumer_member import ConsumerMember, reconcile
from eoslog.coordinator.group.consumer_state import (
    VALID_PREVIOUS_GROUP_STATES,
    VALID_PREVIOUS_MEMBER_STATES,
    ConsumerGroupState,
    IllegalConsumerGroupTransition,
    MemberState,
    check_group_transition,
    check_member_transition,
)
from eoslog.coordinator.group.errors import Errors

TOPICS = {"t": 6, "u": 3}
SESSION = 3000


@pytest.fixture
def ch(make_harness):
    h = make_harness(consumer_session_timeout_ms=SESSION, consumer_heartbeat_interval_ms=500)
    h.topics = dict(TOPICS)

    def hb(member_id, epoch, group="cg", **kw):
        result = h.run(h.c.consumer_group_heartbeat(group, ConsumerHeartbeat(member_id, epoch, **kw),
                                                   topics=h.topics, now_ms=h.now))
        return h.answer(result)

    h.hb = hb
    return h


def parts(response, topic="t"):
    return set((response.assignment or {}).get(topic, ()))


# ---- assignors ---------------------------------------------------------------------------------------

def test_uniform_is_balanced_and_sticky():
    subs = {m: frozenset({"t"}) for m in ("a", "b", "c")}
    first = uniform(subs, {"t": 7}, {})
    sizes = sorted(len(first[m].get("t", ())) for m in subs)
    assert sizes == [2, 2, 3]
    assert set().union(*(first[m]["t"] for m in subs)) == set(range(7))
    # A fourth member takes only what balance needs; the others keep the rest.
    subs["d"] = frozenset({"t"})
    second = uniform(subs, {"t": 7}, first)
    assert sorted(len(second[m].get("t", ())) for m in subs) == [1, 2, 2, 2]
    moved = sum(len(first[m]["t"] - second[m].get("t", frozenset())) for m in ("a", "b", "c"))
    assert moved == len(second["d"]["t"])
    assert uniform(subs, {"t": 7}, first) == second  # deterministic


def test_uniform_respects_heterogeneous_subscriptions():
    subs = {"a": frozenset({"t"}), "b": frozenset({"t", "u"}), "c": frozenset({"u"})}
    out = uniform(subs, TOPICS, {})
    assert "u" not in out["a"] and "t" not in out["c"]
    owned = [(t, p) for m in out.values() for t, ps in m.items() for p in ps]
    assert sorted(owned) == sorted((t, p) for t, n in TOPICS.items() for p in range(n))


def test_range_gives_contiguous_runs_in_member_order():
    subs = {m: frozenset({"t", "u"}) for m in ("b", "a")}
    out = range_(subs, {"t": 5, "u": 3}, {})
    assert out["a"] == {"t": frozenset({0, 1, 2}), "u": frozenset({0, 1})}
    assert out["b"] == {"t": frozenset({3, 4}), "u": frozenset({2})}


# ---- state tables ------------------------------------------------------------------------------------

@pytest.mark.parametrize("before", list(MemberState))
@pytest.mark.parametrize("after", list(MemberState))
def test_member_transition_table(before, after):
    if before in VALID_PREVIOUS_MEMBER_STATES[after]:
        check_member_transition("m", before, after)
    else:
        with pytest.raises(IllegalConsumerGroupTransition):
            check_member_transition("m", before, after)


@pytest.mark.parametrize("before", list(ConsumerGroupState))
@pytest.mark.parametrize("after", list(ConsumerGroupState))
def test_group_transition_table(before, after):
    allowed = before in VALID_PREVIOUS_GROUP_STATES[after]
    # Dead is final except for a failed deletion's revival as Empty; only Empty may be deleted.
    if before is ConsumerGroupState.DEAD:
        assert allowed == (after in (ConsumerGroupState.DEAD, ConsumerGroupState.EMPTY))
    if after is ConsumerGroupState.DEAD:
        assert allowed == (before in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD))
    if allowed:
        check_group_transition("g", before, after)
    else:
        with pytest.raises(IllegalConsumerGroupTransition):
            check_group_transition("g", before, after)


def test_reconcile_never_assigns_a_partition_another_member_holds():
    member = ConsumerMember("b", member_epoch=1)
    owners = {("t", 0): "a"}
    result = reconcile(member, 2, {"t": frozenset({0, 1})}, {}, owners.get)
    assert result.state is MemberState.UNRELEASED_PARTITIONS
    assert result.member_epoch == 2 and result.assigned == {"t": frozenset({1})}


def test_reconcile_revokes_first_and_keeps_the_epoch():
    member = ConsumerMember("a", member_epoch=1, assigned={"t": frozenset({0, 1, 2})})
    result = reconcile(member, 2, {"t": frozenset({0})}, None, {}.get)
    assert result.state is MemberState.UNREVOKED_PARTITIONS and result.member_epoch == 1
    assert result.assigned == {"t": frozenset({0})} and result.pending_revocation == {"t": frozenset({1, 2})}


# ---- the group through the coordinator ---------------------------------------------------------------

def test_join_reconcile_and_stable(ch):
    a = ch.hb("a", 0, subscribed_topic_names=("t",))
    assert a.error is Errors.NONE and a.member_epoch == 1 and parts(a) == set(range(6))
    b = ch.hb("b", 0, subscribed_topic_names=("t",))
    assert b.member_epoch == 2 and parts(b) == set()
    group = ch.c.consumer.groups["cg"]
    assert group.state is ConsumerGroupState.RECONCILING
    a2 = ch.hb("a", 1, owned={"t": frozenset(range(6))})
    assert a2.member_epoch == 1 and len(parts(a2)) == 3  # revoking 3, epoch held back
    assert parts(ch.hb("b", 2, owned={})) == set()
    a3 = ch.hb("a", 1, owned={"t": frozenset(parts(a2))})
    assert a3.member_epoch == 2
    b2 = ch.hb("b", 2, owned={})
    assert parts(b2) == set(range(6)) - parts(a2)
    assert group.state is ConsumerGroupState.STABLE


def test_fencing_errors(ch):
    a = ch.hb("a", 0, subscribed_topic_names=("t",))
    assert ch.hb("a", a.member_epoch + 1).error is Errors.FENCED_MEMBER_EPOCH
    assert ch.hb("zz", 1).error is Errors.UNKNOWN_MEMBER_ID
    assert ch.hb("a", 1, group="other").error is Errors.UNKNOWN_MEMBER_ID
    assert ch.hb("n", 0, subscribed_topic_names=("t",), server_assignor="nope").error is Errors.UNSUPPORTED_ASSIGNOR
    assert ch.hb("n", 0, subscribed_topic_regex="[").error is Errors.INVALID_REGULAR_EXPRESSION
    # The previous epoch is accepted once more when the client owns nothing it was not given.
    ch.hb("b", 0, subscribed_topic_names=("t",))
    revoking = ch.hb("a", 1, owned={"t": frozenset(range(6))})
    moved = ch.hb("a", 1, owned={"t": frozenset(parts(revoking))})
    assert moved.member_epoch == 2
    assert ch.hb("a", 1, owned={"t": frozenset(parts(revoking))}).error is Errors.NONE
    assert ch.hb("a", 1, owned={"t": frozenset(range(6))}).error is Errors.FENCED_MEMBER_EPOCH


def test_regex_subscription_follows_new_topics(ch):
    r = ch.hb("a", 0, subscribed_topic_regex="t|v.*")
    assert parts(r) == set(range(6)) and "u" not in r.assignment
    ch.topics["v1"] = 2
    r = ch.hb("a", r.member_epoch, owned=r.assignment)
    assert r.member_epoch == 2 and set(r.assignment["v1"]) == {0, 1}
    assert ch.hb("z", 0, subscribed_topic_regex="nomatch").assignment == {}


def test_a_regex_resolves_per_member_to_what_its_principal_may_describe(ch, make_harness):
    ch.topics = {"t": 2, "secret": 2}

    def alice_may(topic: str) -> bool:
        return topic != "secret"

    a = ch.hb("a", 0, subscribed_topic_regex=".*", may_describe=alice_may)
    assert a.assignment == {"t": frozenset({0, 1})}
    # b may describe everything: its heartbeats do not widen a's resolution.
    b = ch.hb("b", 0, subscribed_topic_regex=".*", may_describe=None)
    a = ch.hb("a", a.member_epoch, owned=a.assignment, may_describe=alice_may)
    for _ in range(3):
        b = ch.hb("b", b.member_epoch, owned=b.assignment, may_describe=None)
        a = ch.hb("a", a.member_epoch, owned=a.assignment, may_describe=alice_may)
    group = ch.c.consumer.groups["cg"]
    assert set(group.target["a"]) == {"t"} and "secret" in group.target["b"]
    assert set(b.assignment["secret"]) == {0, 1}
    # A describe right granted later counts from the member's next heartbeat (a new group epoch).
    epoch = group.group_epoch
    ch.hb("a", a.member_epoch, owned=a.assignment, may_describe=None)
    assert group.group_epoch == epoch + 1 and group.members["a"].regex_topics == {"t", "secret"}
    # After a load nobody's rights are known: until a member's own heartbeat, its regex counts only
    # the topics it already had, whoever's heartbeat recomputes the target.
    ch.hb("a", group.members["a"].member_epoch, owned=dict(group.members["a"].assigned), may_describe=alice_may)
    other = make_harness(consumer_session_timeout_ms=SESSION)
    partition = ch.c.partition_for("cg")
    other.c.load_partition(partition, ch.log[partition], now_ms=ch.now)
    loaded = other.c.consumer.groups["cg"]
    assert loaded.members["a"].regex_topics is None
    assert loaded.subscribed_topics(loaded.members["a"], ch.topics) == frozenset(loaded.target["a"])
    assert "secret" not in loaded.subscribed_topics(loaded.members["a"], ch.topics)


def test_static_member_leave_and_return(ch):
    a = ch.hb("a", 0, subscribed_topic_names=("t",), instance_id="i1")
    assert ch.hb("a2", 0, subscribed_topic_names=("t",), instance_id="i1").error is Errors.UNRELEASED_INSTANCE_ID
    assert ch.hb("a", -2, instance_id="i1").member_epoch == -2
    back = ch.hb("a2", 0, subscribed_topic_names=("t",), instance_id="i1")
    assert back.error is Errors.NONE and back.member_epoch == a.member_epoch and parts(back) == parts(a)
    assert "a" not in ch.c.consumer.groups["cg"].members


def test_a_static_member_comes_back_as_a_classic_member(ch):
    a = ch.hb("a", 0, subscribed_topic_names=("t",), instance_id="i1")
    ch.hb("b", 0, subscribed_topic_names=("u",))
    protocols = (("range", subscription(["t"])),)
    # Still heartbeating with the consumer protocol: the instance id is not released.
    live = ch.answer(ch.join("", "cg", instance="i1", protocols=protocols, topics=dict(TOPICS)))
    assert live.error is Errors.UNRELEASED_INSTANCE_ID
    assert ch.hb("a", -2, instance_id="i1").error is Errors.NONE
    epoch = ch.c.consumer.groups["cg"].group_epoch
    back = ch.answer(ch.join("", "cg", instance="i1", protocols=protocols, topics=dict(TOPICS)))
    group = ch.c.consumer.groups["cg"]
    assert back.error is Errors.NONE and a.member_epoch <= back.generation_id == group.assignment_epoch
    member = group.members[back.member_id]
    assert member.classic is not None and set(member.assigned["t"]) == set(range(6))
    assert group.group_epoch == epoch and "a" not in group.members
    # A dynamic classic member's first v4+ join: MEMBER_ID_REQUIRED, then the id it was given works.
    first = ch.answer(ch.join("", "cg", protocols=protocols, topics=dict(TOPICS)))
    assert first.error is Errors.MEMBER_ID_REQUIRED
    assert ch.answer(ch.join("made-up", "cg", protocols=protocols)).error is Errors.UNKNOWN_MEMBER_ID
    assert ch.answer(ch.join(first.member_id, "cg", protocols=protocols)).error is Errors.NONE


def test_session_timeout_removes_a_silent_member(ch):
    a = ch.hb("a", 0, subscribed_topic_names=("t",))
    b = ch.hb("b", 0, subscribed_topic_names=("t",))
    ch.advance(SESSION - 1)
    revoking = ch.hb("a", a.member_epoch, owned=a.assignment)  # a keeps its session; b stays silent
    assert len(parts(revoking)) == 3
    ch.advance(2)
    group = ch.c.consumer.groups["cg"]
    assert set(group.members) == {"a"} and group.group_epoch == b.member_epoch + 1
    # a had not revoked yet: the new target gives everything back, without a revocation round.
    back = ch.hb("a", a.member_epoch, owned=a.assignment)
    assert back.member_epoch == group.group_epoch and parts(back) == set(range(6))


def test_a_member_that_never_revokes_is_removed_after_its_rebalance_timeout(ch):
    a = ch.hb("a", 0, subscribed_topic_names=("t",), rebalance_timeout_ms=2 * SESSION)
    b = ch.hb("b", 0, subscribed_topic_names=("t",))
    for _ in range(3):  # both heartbeat within their sessions; a never gives anything up
        assert ch.hb("a", a.member_epoch, owned=a.assignment).member_epoch == a.member_epoch
        assert parts(ch.hb("b", b.member_epoch, owned={})) == set()
        ch.advance(SESSION - 1)
    group = ch.c.consumer.groups["cg"]
    assert set(group.members) == {"b"}
    assert ch.hb("a", a.member_epoch, owned=a.assignment).error is Errors.UNKNOWN_MEMBER_ID
    now_b = ch.hb("b", b.member_epoch, owned={})
    assert parts(now_b) == set(range(6))


def test_offset_commits_are_fenced_by_member_epoch(ch):
    a = ch.hb("a", 0, subscribed_topic_names=("t",))
    commit = [PartitionCommit("t", 0, 10)]

    def commit_error(**kw):
        return ch.answer(ch.run(ch.c.commit_offsets("cg", commit, now_ms=ch.now, **kw))).partitions[0].error

    assert commit_error(member_id="a", generation_id=a.member_epoch) is Errors.NONE
    assert commit_error(member_id="a", generation_id=a.member_epoch - 1) is Errors.STALE_MEMBER_EPOCH
    assert commit_error(member_id="x", generation_id=a.member_epoch) is Errors.UNKNOWN_MEMBER_ID
    assert commit_error() is Errors.UNKNOWN_MEMBER_ID  # an admin commit while members are there
    # librdkafka's self-named assign() consumer (KIP-1082): epoch -1 with an id the group never saw
    assert commit_error(member_id="self-named", generation_id=-1) is Errors.UNKNOWN_MEMBER_ID
    txn = ch.answer(ch.run(ch.c.txn_commit_offsets("cg", 5, 0, commit, member_id="a",
                                                   generation_id=a.member_epoch + 1, now_ms=ch.now)))
    assert txn.partitions[0].error is Errors.STALE_MEMBER_EPOCH
    fetched = ch.c.fetch_offsets("cg", [("t", 0)], member_id="a", member_epoch=a.member_epoch).response
    assert fetched.error is Errors.NONE and fetched.partitions[0].offset == 10
    assert ch.c.fetch_offsets("cg", None, member_id="a", member_epoch=a.member_epoch + 1
                              ).response.error is Errors.STALE_MEMBER_EPOCH
    assert ch.c.fetch_offsets("cg", None, member_id="x", member_epoch=1).response.error is Errors.UNKNOWN_MEMBER_ID
    ch.hb("a", -1)
    assert commit_error() is Errors.NONE
    # With no members, Kafka accepts a negative epoch whatever the member id.
    assert commit_error(member_id="self-named", generation_id=-1) is Errors.NONE
    assert commit_error(member_id="a", generation_id=-1) is Errors.NONE


def test_consumer_group_offsets_expire_by_commit_time_and_an_expired_empty_group_is_deleted(make_harness):
    h = make_harness(consumer_session_timeout_ms=SESSION, offsets_retention_ms=10_000)
    h.topics = dict(TOPICS)

    def hb(member_id, epoch, **kw):
        return h.answer(h.run(h.c.consumer_group_heartbeat("cg", ConsumerHeartbeat(member_id, epoch, **kw),
                                                           topics=h.topics, now_ms=h.now)))

    def expire():
        return h.run(h.c.expire_offsets(h.now))

    a = hb("a", 0, subscribed_topic_names=("t",))
    commits = [PartitionCommit("t", 0, 10), PartitionCommit("u", 0, 7)]  # u: not subscribed
    h.run(h.c.commit_offsets("cg", commits, member_id="a", generation_id=a.member_epoch, now_ms=h.now))
    h.now = 9_999
    hb("a", a.member_epoch)
    assert expire().writes == []
    h.now = 10_000
    assert len(expire().writes) == 1  # u-0 only: a subscribes to t
    assert set(h.c.offsets.committed("cg")) == {("t", 0)}
    # The last member leaves; t-0 was committed 10 s ago, so it is due at once (Kafka 4.x counts from
    # the commit, not from the group becoming empty), and the empty group goes with it.
    h.run(h.c.commit_offsets("cg", [PartitionCommit("t", 0, 11)], member_id="a", generation_id=a.member_epoch,
                             now_ms=h.now))
    hb("a", -1)
    h.now = 19_999
    assert expire().writes == []
    assert h.c.consumer.groups["cg"].is_empty()
    h.now = 20_000
    (write,) = expire().writes
    assert "cg" not in h.c.consumer.groups and not h.c.offsets.committed("cg")
    assert write.records and all(value is None for _, value in write.records)
    # the offset (key version 1), then the group's own records (3, 4, 6; its member's went when it left)
    assert sorted({int.from_bytes(k[:2], "big") for k, _ in write.records}) == [1, 3, 4, 6]
    # Reloaded from the log, nothing of the group is left.
    other = make_harness(consumer_session_timeout_ms=SESSION)
    partition = h.c.partition_for("cg")
    other.c.load_partition(partition, h.log[partition], now_ms=h.now)
    assert "cg" not in other.c.consumer.groups and not other.c.offsets.committed("cg")


def test_an_empty_consumer_group_with_pending_transactional_offsets_is_not_deleted(make_harness):
    h = make_harness(consumer_session_timeout_ms=SESSION, offsets_retention_ms=1_000)
    h.run(h.c.consumer_group_heartbeat("cg", ConsumerHeartbeat("a", 0, subscribed_topic_names=("t",)),
                                       topics=dict(TOPICS), now_ms=h.now))
    h.run(h.c.consumer_group_heartbeat("cg", ConsumerHeartbeat("a", -1), topics=dict(TOPICS), now_ms=h.now))
    h.run(h.c.txn_commit_offsets("cg", 5, 0, [PartitionCommit("t", 0, 3)], now_ms=h.now))
    h.now = 5_000
    assert h.run(h.c.expire_offsets(h.now)).writes == [] and "cg" in h.c.consumer.groups
    h.marker(5, commit=True)
    h.now = 10_000
    h.run(h.c.expire_offsets(h.now))
    assert "cg" not in h.c.consumer.groups and not h.c.offsets.committed("cg")


def test_a_commit_racing_the_members_epoch_bump_is_accepted_for_partitions_it_kept(ch):
    a = ch.hb("a", 0, subscribed_topic_names=("t",))
    b = ch.hb("b", 0, subscribed_topic_names=("t",))
    revoking = ch.hb("a", a.member_epoch, owned=a.assignment)
    moved = ch.hb("a", a.member_epoch, owned=revoking.assignment)
    assert moved.member_epoch == b.member_epoch > a.member_epoch
    kept, lost = min(parts(moved)), min(set(range(6)) - parts(moved))

    def commit_error(partition, epoch):
        return ch.answer(ch.run(ch.c.commit_offsets("cg", [PartitionCommit("t", partition, 1)], member_id="a",
                                                    generation_id=epoch, now_ms=ch.now))).partitions[0].error

    assert commit_error(kept, a.member_epoch) is Errors.NONE  # held since that epoch
    assert commit_error(lost, a.member_epoch) is Errors.STALE_MEMBER_EPOCH  # given up since
    assert commit_error(lost, moved.member_epoch) is Errors.NONE  # the current epoch commits anything
    assert commit_error(kept, moved.member_epoch + 1) is Errors.STALE_MEMBER_EPOCH
    b2 = ch.hb("b", b.member_epoch, owned={})
    got = min(parts(b2))
    assert ch.answer(ch.run(ch.c.commit_offsets("cg", [PartitionCommit("t", got, 1)], member_id="b",
                                                generation_id=b.member_epoch - 1, now_ms=ch.now))
                     ).partitions[0].error is Errors.STALE_MEMBER_EPOCH  # got it at b's current epoch


def test_records_bring_the_group_back(ch, make_harness):
    a = ch.hb("a", 0, subscribed_topic_names=("t",), instance_id="ia", server_assignor="range")
    b = ch.hb("b", 0, subscribed_topic_regex="u")
    ch.hb("a", a.member_epoch, owned=a.assignment)
    ch.hb("b", b.member_epoch, owned={})
    group = ch.c.consumer.groups["cg"]
    versions = sorted({decode_key(k)[0] for k in group_records(group)})
    assert versions == [3, 4, 5, 6, 7, 8]
    other = make_harness(consumer_session_timeout_ms=SESSION)
    partition = ch.c.partition_for("cg")
    other.c.load_partition(partition, ch.log[partition], now_ms=ch.now)
    loaded = other.c.consumer.groups["cg"]
    assert group_records(loaded) == group_records(group)
    assert loaded.state is group.state and loaded.owners == group.owners
    assert "cg" not in other.c.groups  # not also a classic group


def test_a_failed_write_rolls_the_group_back(ch):
    a = ch.hb("a", 0, subscribed_topic_names=("t",))
    ch.fail_writes = Errors.NOT_COORDINATOR
    failed = ch.hb("b", 0, subscribed_topic_names=("t",))
    assert failed.error is Errors.NOT_COORDINATOR
    group = ch.c.consumer.groups["cg"]
    assert set(group.members) == {"a"} and group.group_epoch == a.member_epoch
    ch.fail_writes = None
    assert ch.hb("a", a.member_epoch).error is Errors.NONE


def test_classic_and_consumer_groups_do_not_share_an_id(ch):
    ch.stable_group(1, group="classic")
    assert ch.hb("a", 0, group="classic", subscribed_topic_names=("t",)).error is Errors.GROUP_ID_NOT_FOUND
    ch.hb("a", 0, subscribed_topic_names=("t",))
    joined = ch.join("", "cg")
    assert joined.response.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    listed = {g.group_id: g.group_type for g in ch.c.list_groups()}
    assert listed == {"classic": "classic", "cg": "consumer"}
    assert [g.group_id for g in ch.c.list_groups(types=["consumer"])] == ["cg"]


def test_member_ids_are_generated_for_v0(ch):
    ids = itertools.count()
    ch.c.consumer._new_member_id = lambda: f"gen-{next(ids)}"
    r = ch.hb("", 0, subscribed_topic_names=("t",))
    assert r.member_id == "gen-0"


def test_delete_an_empty_consumer_group(ch, make_harness):
    a = ch.hb("a", 0, subscribed_topic_names=("t",))
    ch.answer(ch.run(ch.c.commit_offsets("cg", [PartitionCommit("t", 0, 3)], member_id="a",
                                         generation_id=a.member_epoch, now_ms=ch.now)))
    deleted = ch.answer(ch.run(ch.c.delete_groups(["cg"], now_ms=ch.now)))
    assert deleted.groups[0].error is Errors.NON_EMPTY_GROUP
    ch.hb("a", -1)
    ch.auto_write = False
    pending = ch.run(ch.c.delete_groups(["cg"], now_ms=ch.now))
    assert ch.hb("b", 0, subscribed_topic_names=("t",)).error is Errors.COORDINATOR_NOT_AVAILABLE
    assert ch.c.consumer_group_describe("cg").error is Errors.GROUP_ID_NOT_FOUND
    ch.release_writes()
    assert ch.answer(pending).groups[0].error is Errors.NONE
    assert "cg" not in ch.c.consumer.groups
    assert ch.c.fetch_offsets("cg", [("t", 0)]).response.partitions[0].offset == -1
    # Nothing comes back from the log either.
    other = make_harness()
    partition = ch.c.partition_for("cg")
    other.c.load_partition(partition, ch.log[partition], now_ms=ch.now)
    assert "cg" not in other.c.consumer.groups and "cg" not in other.c.groups


def test_upgrade_and_downgrade_through_an_empty_group(ch, make_harness):
    """classic -> consumer when the classic group is empty (offsets only), consumer -> classic when the
    last consumer-protocol member has left; the committed offsets carry over both ways."""
    leader = ch.stable_group(1, group="mig")[0]
    generation = ch.group("mig").generation_id
    ch.answer(ch.run(ch.c.commit_offsets("mig", [PartitionCommit("t", 0, 5)], member_id=leader,
                                         generation_id=generation, now_ms=ch.now)))
    assert ch.hb("a", 0, group="mig", subscribed_topic_names=("t",)).error is Errors.GROUP_ID_NOT_FOUND
    ch.leave((leader, None), group="mig")
    joined = ch.hb("a", 0, group="mig", subscribed_topic_names=("t",))
    assert joined.error is Errors.NONE and "mig" not in ch.c.groups
    assert ch.c.fetch_offsets("mig", [("t", 0)]).response.partitions[0].offset == 5
    ch.answer(ch.run(ch.c.commit_offsets("mig", [PartitionCommit("t", 0, 9)], member_id="a",
                                         generation_id=joined.member_epoch, now_ms=ch.now)))
    assert ch.join("", "mig").response.error is Errors.INCONSISTENT_GROUP_PROTOCOL  # a member is still there
    ch.hb("a", -1, group="mig")
    first = ch.join("", "mig")
    assert first.response.error is Errors.MEMBER_ID_REQUIRED
    assert "mig" not in ch.c.consumer.groups and ch.group("mig") is not None
    member_id = first.response.member_id
    assert ch.answer(ch.join(member_id, "mig")).error is Errors.NONE
    assert ch.c.fetch_offsets("mig", [("t", 0)]).response.partitions[0].offset == 9
    # The log says the same: a classic group with the offsets, no consumer group.
    other = make_harness()
    partition = ch.c.partition_for("mig")
    other.c.load_partition(partition, ch.log[partition], now_ms=ch.now)
    assert "mig" not in other.c.consumer.groups and "mig" in other.c.groups
    assert other.c.fetch_offsets("mig", [("t", 0)]).response.partitions[0].offset == 9


def subscription(topics, owned=None) -> bytes:
    from eoslog.protocol import codec, messages

    cls = messages.ConsumerProtocolSubscription
    value = cls(topics=list(topics), user_data=None, owned_partitions=[
        cls.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in (owned or {}).items()],
        generation_id=-1, rack_id=None)
    return (1).to_bytes(2, "big") + codec.encode_data(value, 1)


def test_classic_members_carry_on_inside_a_consumer_group(ch, make_harness):
    """Kafka 4.0's online upgrade: a consumer-protocol member joins a Stable classic group; the classic
    members rejoin when told, and partitions move only once released."""
    from eoslog.coordinator.group.consumer_classic import decode_assignment, encode_assignment

    protocols = (("range", subscription(["t"])),)
    m1 = ch.join("", "mix", protocols=protocols, require_known=False).response.member_id
    m2_first = ch.join("", "mix", protocols=protocols, require_known=False)
    m2 = m2_first.response.member_id if m2_first.response is not None else m2_first.pending.member_id
    ch.join(m1, "mix", protocols=protocols)
    group = ch.group("mix")
    generation = group.generation_id
    for member in (m1, m2):
        if member != group.leader_id:
            ch.sync(member, generation, group="mix")
    ch.sync(group.leader_id, generation, {m1: encode_assignment({"t": frozenset({0, 1, 2})}),
                                          m2: encode_assignment({"t": frozenset({3, 4, 5})})}, group="mix")
    assert ch.group("mix").state.name == "STABLE"

    c = ch.hb("c", 0, group="mix", subscribed_topic_names=("t",))
    assert c.error is Errors.NONE and "mix" not in ch.c.groups and parts(c) == set()  # nothing free yet
    types = {m.member_id: m.member_type for m in ch.c.consumer_group_describe("mix").members}
    assert types == {m1: 0, m2: 0, "c": 1}
    assert ch.heartbeat(m1, generation, group="mix").error is Errors.REBALANCE_IN_PROGRESS
    assert ch.heartbeat(m1, generation + 7, group="mix").error is Errors.ILLEGAL_GENERATION
    kept = {}
    for member in (m1, m2):  # eager clients: everything revoked before the JoinGroup
        joined = ch.answer(ch.join(member, "mix", protocols=protocols))
        assert joined.error is Errors.NONE and joined.generation_id == c.member_epoch and joined.leader == ""
        synced = ch.answer(ch.sync(member, joined.generation_id, group="mix"))
        kept[member] = decode_assignment(synced.assignment).get("t", frozenset())
        assert ch.heartbeat(member, joined.generation_id, group="mix").error is Errors.NONE
    got = parts(ch.hb("c", c.member_epoch, group="mix", owned={}))
    assert got and not got & (kept[m1] | kept[m2]) and got | kept[m1] | kept[m2] == set(range(6))
    # A classic member's commit is fenced by generation, the classic way.
    commit = [PartitionCommit("t", min(kept[m1]), 1)]
    ok = ch.answer(ch.run(ch.c.commit_offsets("mix", commit, member_id=m1, generation_id=c.member_epoch,
                                              now_ms=ch.now)))
    assert ok.partitions[0].error is Errors.NONE
    stale = ch.answer(ch.run(ch.c.commit_offsets("mix", commit, member_id=m1, generation_id=generation,
                                                 now_ms=ch.now)))
    assert stale.partitions[0].error is Errors.ILLEGAL_GENERATION
    # After a restart the classic members are still classic members of the consumer group.
    other = make_harness(consumer_session_timeout_ms=SESSION)
    partition = ch.c.partition_for("mix")
    other.c.load_partition(partition, ch.log[partition], now_ms=ch.now)
    assert other.c.heartbeat("mix", m1, c.member_epoch, now_ms=ch.now).response.error is Errors.NONE
    # A classic LeaveGroup removes the member and its partitions go to the others.
    left = ch.answer(ch.run(ch.c.leave_group("mix", [(m2, None)], now_ms=ch.now)))
    assert left.members[0].error is Errors.NONE
    assert set(ch.c.consumer.groups["mix"].members) == {m1, "c"}
    # The last consumer-protocol member leaves: a classic group again (Kafka 4.0's downgrade), in a
    # rebalance that the remaining classic member completes the classic way.
    assert ch.hb("c", ch.c.consumer.groups["mix"].members["c"].member_epoch, group="mix").error is Errors.NONE
    ch.hb("c", -1, group="mix")
    assert "mix" not in ch.c.consumer.groups and ch.group("mix").state.name == "PREPARING_REBALANCE"
    assert ch.heartbeat(m1, c.member_epoch, group="mix").error is Errors.REBALANCE_IN_PROGRESS
    rejoined = ch.answer(ch.join(m1, "mix", protocols=protocols))
    assert rejoined.error is Errors.NONE and rejoined.leader == m1
    ch.sync(m1, rejoined.generation_id, {m1: encode_assignment({"t": frozenset(range(6))})}, group="mix")
    assert ch.group("mix").state.name == "STABLE"
    assert ch.c.list_groups(types=["classic"])[0].group_id == "mix"
    assert ch.c.fetch_offsets("mix", [("t", min(kept[m1]))]).response.partitions[0].offset == 1


def test_a_regex_is_resolved_for_the_whole_group_in_one_round(ch):
    """Two members on one regex: topics that start to match reach both in the same assignment round, not
    all to the member that heartbeats first and half back from it later (a needless revocation)."""
    ch.topics = {"other": 2}
    a = ch.hb("a", 0, subscribed_topic_regex="orders-.*")
    b = ch.hb("b", 0, subscribed_topic_regex="orders-.*")
    a = ch.hb("a", a.member_epoch, owned=a.assignment)
    assert a.assignment == {} and b.assignment == {}
    ch.topics.update({"orders-1": 2, "orders-2": 2})
    a = ch.hb("a", a.member_epoch, owned=a.assignment)
    group = ch.c.consumer.groups["cg"]
    assert sum(len(ps) for ps in group.target["a"].values()) == 2  # half, b's half kept for b
    assert sum(len(ps) for ps in group.target["b"].values()) == 2
    b = ch.hb("b", b.member_epoch, owned=b.assignment)
    assert sum(len(ps) for ps in b.assignment.values()) == 2
    assert group.members["b"].regex_topics == {"orders-1", "orders-2"}


def test_a_regex_is_shared_only_between_members_of_the_same_principal(ch):
    ch.topics = {"other": 2}
    a = ch.hb("a", 0, subscribed_topic_regex="o.*", may_describe=lambda t: True, principal="User:alice")
    b = ch.hb("b", 0, subscribed_topic_regex="o.*", may_describe=lambda t: t != "orders", principal="User:bob")
    ch.topics["orders"] = 2
    ch.hb("a", a.member_epoch, owned=a.assignment, may_describe=lambda t: True, principal="User:alice")
    group = ch.c.consumer.groups["cg"]
    assert group.members["b"].regex_topics == {"other"}  # bob's rights were never asked: unchanged
    ch.hb("b", b.member_epoch, owned=b.assignment, may_describe=lambda t: t != "orders", principal="User:bob")
    assert group.members["b"].regex_topics == {"other"} and group.members["a"].regex_topics == {"other", "orders"}
