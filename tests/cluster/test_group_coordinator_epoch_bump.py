"""A rebalance in flight survives a new leader epoch of its ``__consumer_offsets`` partition when the
coordinator's broker keeps leading it.

In ZooKeeper mode the controller bumps a partition's leader epoch when it takes an offline follower out
of the ISR; the leader stays where it is. The group coordinator used to read its groups again from the
log at every new epoch, which dropped what only memory held: a JoinGroup waiting for the rebalance was
never answered, and its client waited out its request timeout (five minutes for librdkafka), which is
how the cluster copier test stalled. Raw requests on the wire, so the JoinGroup held in flight is
exactly the one observed."""

from __future__ import annotations

import time

import pytest
from cluster_helpers import create_topic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages as M
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import embedded_cluster

pytestmark = pytest.mark.interop
GROUP = "epoch-bump-group"
OFFSETS_PARTITIONS = 4  # offsets.topic.num.partitions of the embedded cluster
JOIN, SYNC, DESCRIBE, FIND_COORDINATOR, METADATA = 11, 14, 15, 10, 3


def join_request(member_id: str) -> M.JoinGroupRequest:
    return M.JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member_id,
        group_instance_id=None, protocol_type="consumer",
        protocols=[M.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])


def member_id_for(wire: BrokerConnection) -> str:
    first = wire.request(JOIN, 5, join_request(""))
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return first.member_id


def describe_error(wire: BrokerConnection) -> int:
    (group,) = wire.request(DESCRIBE, 3, M.DescribeGroupsRequest(groups=[GROUP])).groups
    return group.error_code


def group_state(wire: BrokerConnection) -> str:
    (group,) = wire.request(DESCRIBE, 3, M.DescribeGroupsRequest(groups=[GROUP])).groups
    return group.group_state


def leader_epoch_seen_by(wire: BrokerConnection, index: int) -> int:
    response = wire.request(METADATA, 9, M.MetadataRequest(
        topics=[M.MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False))
    (topic,) = response.topics
    return next(p.leader_epoch for p in topic.partitions if p.partition_index == index)


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached within {timeout} s"
        time.sleep(0.05)


def test_a_join_waiting_for_the_rebalance_is_answered_after_a_leader_epoch_bump(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "t", 1, 3)
        index = partition_for(GROUP, OFFSETS_PARTITIONS)

        def coordinator_found(bootstrap: str):  # the first FindCoordinator creates __consumer_offsets
            wire = BrokerConnection.from_bootstrap(bootstrap)
            try:
                found = wire.request(FIND_COORDINATOR, 3, M.FindCoordinatorRequest(key=GROUP, key_type=0))
            finally:
                wire.close()
            return found.node_id if found.error_code == 0 else None

        coordinator = wait_until(lambda: coordinator_found(cluster.bootstrap), 30, "a group coordinator")
        state = cluster.wait_for(lambda s: len(s.isr_of("__consumer_offsets", index)) == 3
                                 and s.leader_of("__consumer_offsets", index) == coordinator, 30, "full ISR")
        # The coordinator's own view (it follows ZooKeeper by a watch) names it too.
        wait_until(lambda: coordinator_found(cluster.broker(coordinator).bootstrap) == coordinator, 10,
                   f"broker {coordinator} naming itself coordinator")
        epoch = state.epoch_of("__consumer_offsets", index)
        address = cluster.broker(coordinator).bootstrap
        a, b, admin = (BrokerConnection.from_bootstrap(address) for _ in range(3))
        try:
            # And it has loaded the partition: until its log is open, its leader epoch durable and the
            # partition loaded, the group answers COORDINATOR_LOAD_IN_PROGRESS, which a client would
            # retry but the raw requests below do not.
            wait_until(lambda: describe_error(admin) == ErrorCode.NONE, 30, f"broker {coordinator} serving the group")
            # Member a alone: generation 1, stable.
            a_id = member_id_for(a)
            joined = a.request(JOIN, 5, join_request(a_id))
            assert (joined.error_code, joined.generation_id) == (0, 1)
            synced = a.request(SYNC, 3, M.SyncGroupRequest(
                group_id=GROUP, generation_id=1, member_id=a_id, group_instance_id=None, assignments=[
                    M.SyncGroupRequest.SyncGroupRequestAssignment(member_id=a_id, assignment=b"x")]))
            assert synced.error_code == 0
            # Member b joins: the rebalance waits for a to join again; b's JoinGroup stays in flight.
            b_id = member_id_for(b)
            b.send(JOIN, 5, join_request(b_id))
            wait_until(lambda: group_state(admin) == "PreparingRebalance", 10, "the rebalance")

            # A follower goes offline: the controller takes it out of the ISR with a new leader epoch,
            # and the coordinator's broker keeps leading.
            follower = next(r for r in cluster.state().isr_of("__consumer_offsets", index) if r != coordinator)
            cluster.broker(follower).kill()
            bumped = cluster.wait_for(lambda s: s.epoch_of("__consumer_offsets", index) > epoch, 30, "epoch bump")
            assert bumped.leader_of("__consumer_offsets", index) == coordinator
            new_epoch = bumped.epoch_of("__consumer_offsets", index)
            wait_until(lambda: leader_epoch_seen_by(admin, index) == new_epoch, 10, "the coordinator's new epoch")
            assert group_state(admin) == "PreparingRebalance"

            # a joins again: the rebalance completes with both members, and b's waiting join is answered.
            rejoined = a.request(JOIN, 5, join_request(a_id))
            assert (rejoined.error_code, rejoined.generation_id) == (0, 2)
            assert sorted(m.member_id for m in rejoined.members) == sorted([a_id, b_id])
            b.sock.settimeout(10)
            try:
                answered = b.receive()
            except TimeoutError:
                pytest.fail("the JoinGroup that waited for the rebalance was never answered")
            assert (answered.error_code, answered.generation_id, answered.leader) == (0, 2, a_id)
        finally:
            for wire in (a, b, admin):
                wire.close()
