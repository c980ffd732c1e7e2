"""The group APIs on the wire, version by version, against an embedded broker (raw requests built
with eoslog's codec, so each version's layout is exercised exactly)."""

from __future__ import annotations

import pytest

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.embedded import EmbeddedBroker

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH, DESCRIBE, LIST, DELETE = 11, 14, 12, 13, 8, 9, 15, 16, 42
E = ErrorCode
M = messages


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("apis") / "data") as broker:
        broker.call(broker.broker.registry.create_topic, "t", 2)
        with BrokerConnection.from_bootstrap(broker.bootstrap) as connection:
            yield connection


def join(conn, version, group, member_id="", session=10_000, instance=None):
    return conn.request(JOIN, version, M.JoinGroupRequest(
        group_id=group, session_timeout_ms=session, rebalance_timeout_ms=10_000, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer",
        protocols=[M.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"meta")]))


def sync(conn, version, group, member_id, generation, assignment=b"A"):
    return conn.request(SYNC, version, M.SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id, protocol_type="consumer",
        protocol_name="range",
        assignments=[M.SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment)]))


def commit(conn, version, group, member_id, generation, offsets):
    T, P = M.OffsetCommitRequest.OffsetCommitRequestTopic, M.OffsetCommitRequest.OffsetCommitRequestPartition
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(P(partition_index=partition, committed_offset=offset,
                                                committed_metadata="m"))
    resp = conn.request(COMMIT, version, M.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


@pytest.mark.parametrize("version", [3, 5, 7, 9])
def test_join_sync_heartbeat_commit_fetch_leave(conn, version):
    group = f"wire-{version}"
    first = join(conn, version, group)
    if version >= 4:  # KIP-394: the first join only hands out a member id
        assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
        first = join(conn, version, group, member_id=first.member_id)
    assert first.error_code == 0 and first.generation_id == 1 and first.leader == first.member_id
    assert first.protocol_name == "range" and [m.metadata for m in first.members] == [b"meta"]
    if version >= 7:
        assert first.protocol_type == "consumer"
    member, generation = first.member_id, first.generation_id
    synced = sync(conn, min(version, 5), group, member, generation)
    assert (synced.error_code, synced.assignment) == (0, b"A")
    beat = conn.request(HEARTBEAT, min(version, 4), M.HeartbeatRequest(group_id=group, generation_id=generation,
                                                                      member_id=member))
    assert beat.error_code == 0
    stale = conn.request(HEARTBEAT, min(version, 4), M.HeartbeatRequest(group_id=group, generation_id=generation + 1,
                                                                       member_id=member))
    assert stale.error_code == E.ILLEGAL_GENERATION

    errors = commit(conn, version, group, member, generation, {("t", 0): 5, ("t", 1): 6, ("nope", 0): 1})
    assert errors == {("t", 0): 0, ("t", 1): 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert commit(conn, version, group, member, generation + 3, {("t", 0): 9}) == {("t", 0): E.ILLEGAL_GENERATION}

    if version >= 8:
        G, T = M.OffsetFetchRequest.OffsetFetchRequestGroup, M.OffsetFetchRequest.OffsetFetchRequestTopics
        fetched = conn.request(FETCH, version, M.OffsetFetchRequest(groups=[
            G(group_id=group, topics=[T(name="t", partition_indexes=[0, 1])]), G(group_id="unknown", topics=None)]))
        [mine, unknown] = fetched.groups
        assert (mine.error_code, unknown.error_code, unknown.topics) == (0, 0, [])
        got = {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in mine.topics for p in t.partitions}
    else:
        T = M.OffsetFetchRequest.OffsetFetchRequestTopic
        fetched = conn.request(FETCH, version, M.OffsetFetchRequest(
            group_id=group, topics=[T(name="t", partition_indexes=[0, 1])]))
        got = {(t.name, p.partition_index): (p.committed_offset, p.metadata)
               for t in fetched.topics for p in t.partitions}
    assert got == {("t", 0): (5, "m"), ("t", 1): (6, "m")}

    if version >= 3:
        Identity = M.LeaveGroupRequest.MemberIdentity
        left = conn.request(LEAVE, min(version, 5), M.LeaveGroupRequest(group_id=group, members=[
            Identity(member_id=member), Identity(member_id="ghost")]))
        assert left.error_code == 0
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, 0), ("ghost", E.UNKNOWN_MEMBER_ID)]
    described = conn.request(DESCRIBE, 5, M.DescribeGroupsRequest(groups=[group]))
    assert (described.groups[0].group_state, described.groups[0].members) == ("Empty", [])


def test_old_versions_leave_and_fetch_use_their_own_layout(conn):
    group = "old-layout"
    joined = join(conn, 1, group)  # v1-3: no MEMBER_ID_REQUIRED round trip
    assert joined.error_code == 0
    assert sync(conn, 0, group, joined.member_id, joined.generation_id).error_code == 0
    assert commit(conn, 2, group, joined.member_id, joined.generation_id, {("t", 0): 3}) == {("t", 0): 0}
    T = M.OffsetFetchRequest.OffsetFetchRequestTopic
    fetched = conn.request(FETCH, 1, M.OffsetFetchRequest(group_id=group, topics=[T(name="t", partition_indexes=[0])]))
    assert [(p.committed_offset, p.error_code) for t in fetched.topics for p in t.partitions] == [(3, 0)]
    # LeaveGroup v0-2: one member, its outcome is the top-level error.
    ghost = conn.request(LEAVE, 0, M.LeaveGroupRequest(group_id=group, member_id="ghost"))
    assert ghost.error_code == E.UNKNOWN_MEMBER_ID
    left = conn.request(LEAVE, 1, M.LeaveGroupRequest(group_id=group, member_id=joined.member_id))
    assert left.error_code == 0


def test_refusals(conn):
    assert join(conn, 5, "short", session=10).error_code == E.INVALID_SESSION_TIMEOUT
    assert join(conn, 5, "", member_id="").error_code == E.INVALID_GROUP_ID
    assert join(conn, 5, "unknown-member", member_id="who").error_code == E.UNKNOWN_MEMBER_ID
    assert sync(conn, 3, "nobody-here", "who", 1).error_code == E.UNKNOWN_MEMBER_ID
    # DescribeGroups: Dead before v6, GROUP_ID_NOT_FOUND from v6 (KIP-1043).
    assert conn.request(DESCRIBE, 5, M.DescribeGroupsRequest(groups=["nobody-here"])).groups[0].group_state == "Dead"
    v6 = conn.request(DESCRIBE, 6, M.DescribeGroupsRequest(groups=["nobody-here"])).groups[0]
    assert v6.error_code == E.GROUP_ID_NOT_FOUND
    deleted = conn.request(DELETE, 2, M.DeleteGroupsRequest(groups_names=["nobody-here"]))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("nobody-here", E.GROUP_ID_NOT_FOUND)]


def test_list_groups_filters_by_state(conn):
    joined = join(conn, 3, "listed-stable")
    assert sync(conn, 3, "listed-stable", joined.member_id, joined.generation_id).error_code == 0
    everything = conn.request(LIST, 3, M.ListGroupsRequest())
    assert "listed-stable" in {g.group_id for g in everything.groups}
    stable = conn.request(LIST, 4, M.ListGroupsRequest(states_filter=["Stable"]))
    assert all(g.group_state == "Stable" for g in stable.groups) and \
        "listed-stable" in {g.group_id for g in stable.groups}
    empty = conn.request(LIST, 5, M.ListGroupsRequest(states_filter=["Empty"], types_filter=["classic"]))
    assert "listed-stable" not in {g.group_id for g in empty.groups}
