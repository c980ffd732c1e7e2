"""A consumer group (KIP-848) survives a broker SIGKILL: its records in ``__consumer_offsets`` bring back
the group epoch, the members with their epochs and assignments, so members carry on without
rejoining, and a member that does not come back is removed after its session."""

from __future__ import annotations

import uuid

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.wait import wait_until
from tests.groups.conftest import create_topic
from tests.groups.consumer_protocol.test_consumer_protocol_wire import heartbeat, owned


def describe(bootstrap, group):
    with BrokerConnection.from_bootstrap(bootstrap) as conn:
        return conn.request(69, 1, messages.ConsumerGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False)).groups[0]


def view(group):
    return (group.group_state, group.group_epoch, group.assignment_epoch, sorted(
        (m.member_id, m.member_epoch, [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions])
        for m in group.members))


def test_broker_sigkill_keeps_the_group_and_its_epochs(consumer_broker):
    bootstrap = consumer_broker.bootstrap
    create_topic(bootstrap, "kept", 4)
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    with BrokerConnection.from_bootstrap(bootstrap) as conn:
        first = heartbeat(conn, "kept-group", a, 0, subscribed_topic_names=["kept"])
        second = heartbeat(conn, "kept-group", b, 0, subscribed_topic_names=["kept"])
        # Reconcile to Stable: a revokes, then both are at the group epoch with two partitions each.
        revoking = heartbeat(conn, "kept-group", a, first.member_epoch, topic_partitions=owned(first))
        a_done = heartbeat(conn, "kept-group", a, first.member_epoch, topic_partitions=owned(revoking))
        b_done = heartbeat(conn, "kept-group", b, second.member_epoch, topic_partitions=[])
        commit = messages.OffsetCommitRequest(
            group_id="kept-group", generation_id_or_member_epoch=a_done.member_epoch, member_id=a,
            group_instance_id=None, retention_time_ms=-1,
            topics=[messages.OffsetCommitRequest.OffsetCommitRequestTopic(name="kept", partitions=[
                messages.OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=7, committed_leader_epoch=-1, committed_metadata="")
                for tp in a_done.assignment.topic_partitions for p in tp.partitions])])
        assert all(p.error_code == 0 for t in conn.request(8, 9, commit).topics for p in t.partitions)
    before = describe(bootstrap, "kept-group")
    assert before.group_state == "Stable" and len(before.members) == 2
    assert sum(len(tp.partitions) for m in before.members for tp in m.assignment.topic_partitions) == 4

    consumer_broker.kill()
    consumer_broker.start()

    after = describe(bootstrap, "kept-group")
    assert view(after) == view(before)
    with BrokerConnection.from_bootstrap(bootstrap) as conn:
        # Members go on at their epochs, with what they own: no rejoin, same assignment.
        again = heartbeat(conn, "kept-group", a, a_done.member_epoch, topic_partitions=owned(a_done))
        assert again.error_code == 0 and again.member_epoch == a_done.member_epoch
        assert again.assignment.topic_partitions == a_done.assignment.topic_partitions
        # A stale epoch is still fenced after the restart, and commits keep their fencing.
        assert heartbeat(conn, "kept-group", a, a_done.member_epoch + 5).error_code == ErrorCode.FENCED_MEMBER_EPOCH
        assert all(p.error_code == 0 for t in conn.request(8, 9, commit).topics for p in t.partitions)
        # b never comes back: its session ends and a gets everything at a new epoch.
        assert b_done.error_code == 0

        epoch = {"a": again.member_epoch}

        def a_owns_all():
            r = heartbeat(conn, "kept-group", a, epoch["a"], topic_partitions=owned(again))
            assert r.error_code == 0, r
            epoch["a"] = r.member_epoch
            return sum(len(tp.partitions) for tp in r.assignment.topic_partitions) == 4

        wait_until(a_owns_all, 10, "the silent member's partitions moving to the live one")
    final = describe(bootstrap, "kept-group")
    assert [m.member_id for m in final.members] == [a] and final.group_epoch > before.group_epoch
