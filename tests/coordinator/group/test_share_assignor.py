"""The share groups' SimpleAssignor (share_assignor.py): Kafka 4.2's rules as properties over random
groups (who subscribes to what, how many partitions, any previous target), and a few worked cases."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.coordinator.group.share_assignor import TopicMetadata, sharing, simple_assign

NAMES = ("t", "u", "v", "w")
IDS = {name: uuid.UUID(int=i + 1) for i, name in enumerate(NAMES)}


def topics_of(counts):
    return {name: TopicMetadata(IDS[name], n) for name, n in counts.items()}


@st.composite
def groups(draw):
    counts = draw(st.dictionaries(st.sampled_from(NAMES[:3]), st.integers(0, 7), min_size=1))
    members = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=9, unique=True))
    # "w" is subscribed to but does not exist.
    pick = st.frozensets(st.sampled_from(NAMES), max_size=3)
    if draw(st.booleans()):
        same = draw(pick)
        subs = {m: same for m in members}
    else:
        subs = {m: draw(pick) for m in members}
    # Any previous target, even nonsense: partitions past the end, topics not subscribed, unknown ids.
    junk = st.dictionaries(st.sampled_from([*IDS.values(), uuid.UUID(int=99)]),
                           st.frozensets(st.integers(0, 9), max_size=5), max_size=3)
    current = {m: draw(junk) for m in members if draw(st.booleans())}
    return subs, counts, current


def pairs(assignment):
    return {(t, p) for t, ps in assignment.items() for p in ps}


def units(subs, counts):
    """The balancing units: (members, partitions) -- the whole group when homogeneous, else per topic."""
    topics = topics_of(counts)
    if len(set(subs.values())) == 1:
        names = next(iter(subs.values()))
        yield sorted(subs), {(IDS[n], p) for n in names if n in topics for p in range(counts[n])}
    else:
        for name in sorted(set().union(*subs.values())):
            if name in topics:
                yield sorted(m for m in subs if name in subs[m]), {(IDS[name], p) for p in range(counts[name])}


@settings(max_examples=300)
@given(groups())
def test_members_get_only_partitions_of_topics_they_subscribe_to(group):
    subs, counts, current = group
    out = simple_assign(subs, topics_of(counts), current)
    assert set(out) == set(subs)
    for member, assignment in out.items():
        allowed = {(IDS[n], p) for n in subs[member] if n in counts for p in range(counts[n])}
        assert pairs(assignment) <= allowed
        assert all(assignment.values())  # no empty topic entries


@settings(max_examples=300)
@given(groups())
def test_every_partition_has_a_holder_and_none_is_over_shared(group):
    subs, counts, current = group
    out = simple_assign(subs, topics_of(counts), current)
    for members, targets in units(subs, counts):
        holders = Counter(tp for m in members for tp in pairs(out[m]) if tp in targets)
        for tp in targets:
            assert 1 <= holders[tp] <= sharing(len(members), len(targets)), tp


@settings(max_examples=300)
@given(groups())
def test_members_sizes_differ_by_at_most_one(group):
    subs, counts, current = group
    out = simple_assign(subs, topics_of(counts), current)
    for members, targets in units(subs, counts):
        if not members or not targets:
            continue
        sizes = [len(pairs(out[m]) & targets) for m in members]
        assert max(sizes) - min(sizes) <= 1, sizes
        share = sharing(len(members), len(targets))
        assert max(sizes) <= -(-share * len(targets) // len(members))


@settings(max_examples=300)
@given(groups())
def test_a_fully_shared_target_is_kept_as_it_is(group):
    """Stickiness: run again on its own output, a target where every partition has its full sharing
    does not move (deterministic, too)."""
    subs, counts, current = group
    topics = topics_of(counts)
    first = simple_assign(subs, topics, current)
    assert simple_assign(subs, topics, current) == first
    full = all(sum(1 for m in members for tp in pairs(first[m]) if tp == target) == sharing(len(members), len(targets))
               for members, targets in units(subs, counts) for target in targets)
    if full:
        assert simple_assign(subs, topics, first) == first


def test_more_partitions_than_members_gives_each_partition_one_member():
    out = simple_assign({"a": {"t"}, "b": {"t"}}, topics_of({"t": 5}), {})
    t = IDS["t"]
    assert sorted(len(out[m][t]) for m in "ab") == [2, 3]
    assert out["a"][t] | out["b"][t] == set(range(5)) and not out["a"][t] & out["b"][t]


def test_more_members_than_partitions_shares_each_partition():
    members = {m: {"t"} for m in "abcde"}
    out = simple_assign(members, topics_of({"t": 2}), {})
    holders = Counter(p for a in out.values() for p in a.get(IDS["t"], ()))
    assert holders == {0: 3, 1: 3}  # sharing = ceil(5 / 2) = 3
    assert sorted(len(a[IDS["t"]]) for a in out.values()) == [1, 1, 1, 1, 2]


def test_a_new_member_takes_only_what_balance_needs():
    topics = topics_of({"t": 7})
    subs = {m: {"t"} for m in "abc"}
    first = simple_assign(subs, topics, {})
    second = simple_assign({**subs, "d": {"t"}}, topics, first)
    t = IDS["t"]
    moved = sum(len(first[m][t] - second[m].get(t, frozenset())) for m in "abc")
    assert moved == len(second["d"][t]) == 1  # one partition changes hands, no more
    assert sorted(len(second[m][t]) for m in "abcd") == [1, 2, 2, 2]


def test_a_departed_member_leaves_its_partitions_to_the_others_only():
    topics = topics_of({"t": 6})
    subs = {m: {"t"} for m in "abc"}
    first = simple_assign(subs, topics, {})
    second = simple_assign({m: {"t"} for m in "ab"}, topics, first)
    t = IDS["t"]
    for m in "ab":
        assert first[m][t] <= second[m][t]  # nobody loses anything
    assert second["a"][t] | second["b"][t] == set(range(6))


def test_heterogeneous_groups_balance_each_topic_among_its_subscribers():
    # Kafka's example: M1 on t, M2 on u, M3 on both: M3 gets half of each.
    out = simple_assign({"m1": {"t"}, "m2": {"u"}, "m3": {"t", "u"}}, topics_of({"t": 4, "u": 4}), {})
    assert {m: {t: len(ps) for t, ps in a.items()} for m, a in out.items()} == {
        "m1": {IDS["t"]: 2}, "m2": {IDS["u"]: 2}, "m3": {IDS["t"]: 2, IDS["u"]: 2}}


def test_unsubscribed_topics_and_missing_partitions_are_dropped():
    t, u = IDS["t"], IDS["u"]
    current = {"a": {t: {0, 1, 9}, u: {0}}}
    out = simple_assign({"a": {"t"}}, topics_of({"t": 2, "u": 1}), current)
    assert out == {"a": {t: frozenset({0, 1})}}


def test_only_assignable_partitions_are_assigned():
    t = IDS["t"]
    out = simple_assign({"a": {"t"}, "b": {"t"}}, topics_of({"t": 4}), {}, assignable=lambda topic, p: p < 2)
    assert sorted(p for a in out.values() for p in a.get(t, ())) == [0, 1]


def test_no_member_or_no_topic():
    assert simple_assign({}, topics_of({"t": 3}), {}) == {}
    assert simple_assign({"a": set()}, topics_of({"t": 3}), {}) == {"a": {}}
    assert simple_assign({"a": {"w"}}, topics_of({"t": 3}), {}) == {"a": {}}


def test_an_over_shared_partition_is_given_up_by_members_without_room_left():
    # Three members on one partition of two: one moves to the other partition, and it is one of the
    # members whose quota is one, so the member allowed two can add the second partition too.
    t = IDS["t"]
    out = simple_assign({m: {"t"} for m in "abc"}, topics_of({"t": 2}), {m: {t: {0}} for m in "abc"})
    holders = Counter(p for a in out.values() for p in a[t])
    assert holders == {0: 2, 1: 2}
    assert sum(1 for m in "abc" if 0 in out[m][t]) == 2  # two of the three kept partition 0
