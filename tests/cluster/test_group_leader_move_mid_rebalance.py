"""A classic group in the middle of a rebalance when its ``__consumer_offsets`` partition's leadership
moves to another live broker (a preferred-leader election): the JoinGroup waiting at the old coordinator
is answered NOT_COORDINATOR at once, so its member looks the coordinator up again, as Kafka's
onGroupUnloaded does. (It used to be left unanswered: librdkafka then waits out the rebalance timeout,
5 minutes by default.) The new coordinator, which loaded the group, completes the rebalance.

Members speak the protocol directly, each on its own connection, so a JoinGroup can stay in flight
while the partition moves. A new leader epoch of a partition its leader keeps is
test_group_coordinator_epoch_bump.py."""

from __future__ import annotations

import pytest

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import EmbeddedCluster, embedded_cluster
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop
GROUP = "mid-rebalance"
OFFSETS = "__consumer_offsets"
INDEX = partition_for(GROUP, 4)  # offsets.topic.num.partitions of the embedded cluster
JOIN, SYNC, DESCRIBE, FIND_COORDINATOR, ELECT_LEADERS, REASSIGN = 11, 14, 15, 10, 43, 45
# Long enough that nothing in the test is decided by a session or the rebalance timing out.
SESSION_MS, REBALANCE_MS = 60_000, 120_000
ANSWER_S = 15  # how long a waiting JoinGroup may take to be answered once the partition changed


class Member:
    """One member of GROUP, on its own connection to ``bootstrap``: a new one (the MEMBER_ID_REQUIRED round
    trip), or ``member_id`` reconnecting."""

    def __init__(self, bootstrap: str, member_id: str | None = None) -> None:
        self.wire = BrokerConnection.from_bootstrap(bootstrap, timeout_s=ANSWER_S)
        if member_id is None:
            first = self.wire.request(JOIN, 5, self._join_request(""))
            assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED, ErrorCode(first.error_code)
            member_id = first.member_id
        self.member_id = member_id

    def _join_request(self, member_id: str):
        return messages.JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS, member_id=member_id,
            group_instance_id=None, protocol_type="consumer",
            protocols=[messages.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")])

    def send_join(self) -> None:
        self.wire.send(JOIN, 5, self._join_request(self.member_id))

    def join_answer(self):
        """The answer to the JoinGroup in flight; the socket's timeout (ANSWER_S) fails the test."""
        return self.wire.receive()

    def sync(self, generation: int, assignment: bytes):
        return self.wire.request(SYNC, 3, messages.SyncGroupRequest(
            group_id=GROUP, generation_id=generation, member_id=self.member_id, group_instance_id=None,
            protocol_type="consumer", protocol_name="range",
            assignments=[messages.SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=self.member_id, assignment=assignment)]))

    def group_state(self) -> str:
        return self.wire.request(DESCRIBE, 5, messages.DescribeGroupsRequest(groups=[GROUP])).groups[0].group_state

    def close(self) -> None:
        self.wire.close()


def call(bootstrap: str, api_key: int, version: int, request):
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        return wire.request(api_key, version, request)
    finally:
        wire.close()


def coordinator_found(bootstrap: str) -> bool:
    """FindCoordinator (it creates ``__consumer_offsets`` on first use) names one."""
    found = call(bootstrap, FIND_COORDINATOR, 4, messages.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]))
    return found.coordinators[0].error_code == 0


def serves_the_group(cluster: EmbeddedCluster, broker: int) -> bool:
    """``broker`` itself names itself coordinator: it has applied the view in which it leads the group's
    partition (ZooKeeper names a leader before that broker's own view, which follows a watch, has it).
    And it has loaded the partition: until its log is open, its new leader epoch durable and the
    partition loaded, the group answers COORDINATOR_LOAD_IN_PROGRESS, which a client retries but these
    raw requests do not."""
    bootstrap = cluster.broker(broker).bootstrap
    found = call(bootstrap, FIND_COORDINATOR, 4, messages.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]))
    if found.coordinators[0].error_code != 0 or found.coordinators[0].node_id != broker:
        return False
    return call(bootstrap, DESCRIBE, 5, messages.DescribeGroupsRequest(groups=[GROUP])).groups[0].error_code == 0


def waiting_rebalance(cluster: EmbeddedCluster, coordinator: int, stable: Member) -> Member:
    """A new member whose JoinGroup waits at ``coordinator`` for ``stable`` to rejoin."""
    joining = Member(cluster.broker(coordinator).bootstrap)
    joining.send_join()
    wait_until(lambda: stable.group_state() == "PreparingRebalance", 10, "the group waits for its member")
    return joining


def move_leadership(cluster: EmbeddedCluster, to: int) -> None:
    """``to`` becomes the preferred replica (a new replica order), then the preferred-leader election."""
    replicas = cluster.state().replicas[(OFFSETS, INDEX)]
    order = [to, *(r for r in replicas if r != to)]
    moved = call(cluster.bootstrap, REASSIGN, 0, messages.AlterPartitionReassignmentsRequest(
        timeout_ms=30_000, topics=[messages.AlterPartitionReassignmentsRequest.ReassignableTopic(
            name=OFFSETS, partitions=[messages.AlterPartitionReassignmentsRequest.ReassignablePartition(
                partition_index=INDEX, replicas=order)])]))
    assert moved.responses[0].partitions[0].error_code == 0
    cluster.wait_for(lambda s: s.replicas[(OFFSETS, INDEX)][0] == to, 30, "the new replica order")

    def elected() -> bool:
        # The controller's view follows ZooKeeper by a watch: until it has the new order it answers
        # ELECTION_NOT_NEEDED, so ask again.
        controller = cluster.broker(cluster.state().controller).bootstrap
        call(controller, ELECT_LEADERS, 1, messages.ElectLeadersRequest(
            election_type=0, timeout_ms=30_000,
            topic_partitions=[messages.ElectLeadersRequest.TopicPartitions(topic=OFFSETS, partitions=[INDEX])]))
        return cluster.state().leader_of(OFFSETS, INDEX) == to
    wait_until(elected, 30, f"broker {to} leads {OFFSETS}-{INDEX}", interval=0.2)


def test_a_join_waiting_at_a_coordinator_that_loses_the_partition_is_told_to_look_again(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        wait_until(lambda: coordinator_found(cluster.bootstrap), 30, "a coordinator for the group")
        state = cluster.wait_for(lambda s: (s.leader_of(OFFSETS, INDEX) or -1) > 0
                                 and len(s.isr_of(OFFSETS, INDEX)) == 3, 30, f"{OFFSETS}-{INDEX} in sync")
        first = state.leader_of(OFFSETS, INDEX)
        wait_until(lambda: serves_the_group(cluster, first), 10, f"broker {first} serving the group")
        members: list[Member] = []
        try:
            # A Stable group of one at the first coordinator, and a second member waiting in its rebalance.
            a = Member(cluster.broker(first).bootstrap)
            members.append(a)
            a.send_join()
            joined = a.join_answer()
            assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, a.member_id)
            assert a.sync(1, b"a").error_code == 0
            waiting = waiting_rebalance(cluster, first, a)
            members.append(waiting)

            second = next(b for b in state.replicas[(OFFSETS, INDEX)] if b != first)
            move_leadership(cluster, second)
            answer = waiting.join_answer()
            assert (ErrorCode(answer.error_code), answer.member_id) == (ErrorCode.NOT_COORDINATOR, waiting.member_id)

            # At the new coordinator (which loaded the group: a at generation 1) both rejoin, and the
            # rebalance completes in generation 2.
            wait_until(lambda: serves_the_group(cluster, second), 10, f"broker {second} serving the group")
            a = Member(cluster.broker(second).bootstrap, a.member_id)
            b = Member(cluster.broker(second).bootstrap)
            members += [a, b]
            b.send_join()
            wait_until(lambda: a.group_state() == "PreparingRebalance", 10, "the group waits for a")
            a.send_join()
            rejoined, answer = a.join_answer(), b.join_answer()
            assert (rejoined.error_code, answer.error_code) == (0, 0)
            assert rejoined.generation_id == answer.generation_id == 2
            assert sorted(m.member_id for m in rejoined.members) == sorted([a.member_id, b.member_id])
        finally:
            for member in members:
                member.close()
