"""A broker that leads its ``__transaction_state`` partition from the moment it starts coordinates it with
that partition's leader epoch, exactly as one that takes the partition over later (regression test of
cd138fd, found by the cluster verifier, seed 20261125).

The bug lived in the start-up load, a separate path for partitions ZooKeeper already named this
broker leader of when its first view was read (partitions elected afterwards were loaded by another);
the coordinator runtime now loads both the same way. The window is made certain, not lucky: with one ``__transaction_state`` partition on
two brokers, the other broker stops first and the coordinator's broker last. The last one to leave is the
controller, so nobody rewrites the state znode: it still names that broker leader, with the epoch it had.
Started again first, the broker reads that view before its coordinator starts, and no election follows
(the test checks the epoch did not move). Markers it then writes must carry that epoch: before the fix
they said 0, partitions that had seen a marker of an older but non-zero epoch refused them, and the
transaction stayed in PrepareCommit. (The non-zero epoch comes from a takeover: a broker that keeps leading
through an ISR change keeps the coordinator epoch it loaded with.)
"""

from __future__ import annotations

import confluent_kafka
import pytest
from cluster_helpers import consume_all
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import EmbeddedCluster, embedded_cluster
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop
TXN_STATE = "__transaction_state"
TRANSACTIONAL_ID = "epoch-at-start-up"
PROPERTIES = {
    # One partition, a replica on each broker: the coordinator of every id is the leader of partition 0.
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "2",
    "transaction.state.log.min.isr": "1",
    "offsets.topic.num.partitions": "1",
    # No preferred-leader election behind the test's back.
    "auto.leader.rebalance.enable": "false",
}


def _coordinator_epochs(bootstrap: str, topic: str) -> dict[int, int]:
    """What partition 0 of ``topic`` remembers per producer id: the coordinator epoch of its last marker."""
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        response = wire.request(61, 0, messages.DescribeProducersRequest(topics=[
            messages.DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]))
    finally:
        wire.close()
    partition = response.topics[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE, partition.error_message
    return {p.producer_id: p.coordinator_epoch for p in partition.active_producers}


def _leads_in(bootstrap: str, epoch: int) -> bool:
    """Whether that broker leads __transaction_state-0 in leader epoch ``epoch`` (its replica manager's
    answer to OffsetForLeaderEpoch, KIP-320); its coordinator loads the partition in the same step."""
    Topic = messages.OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        response = wire.request(23, 4, messages.OffsetForLeaderEpochRequest(replica_id=-1, topics=[Topic(
            topic=TXN_STATE, partitions=[Topic.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=epoch, leader_epoch=epoch)])]))
    finally:
        wire.close()
    return response.topics[0].partitions[0].error_code == ErrorCode.NONE


def _commit(bootstrap: str, value: bytes) -> None:
    """One transaction over both data partitions, by a new producer of the same transactional id (the
    same producer id, a bumped producer epoch)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID,
                                         "transaction.timeout.ms": 60000, "linger.ms": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("remote", value, partition=0)
    producer.produce("local", value, partition=0)
    producer.commit_transaction(30)


def _stop(cluster: EmbeddedCluster, broker: int) -> None:
    cluster.broker(broker).terminate()
    cluster.wait_for(lambda s: broker not in s.brokers, 30, f"broker {broker} gone")


def test_a_coordinator_leading_at_start_up_writes_markers_with_its_leader_epoch(tmp_path):
    with embedded_cluster(2, tmp_path, properties=PROPERTIES) as cluster:
        probe = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "probe"})
        probe.init_transactions(30)  # creates __transaction_state
        del probe
        state = cluster.wait_for(lambda s: len(s.isr_of(TXN_STATE, 0)) == 2, 30, "__transaction_state in sync")
        b = state.leader_of(TXN_STATE, 0)
        (a,) = set(cluster.brokers) - {b}

        # The first leader B leaves: A takes __transaction_state-0 over in a new leader epoch and
        # coordinates with it (a takeover loads the partition). B comes back as a follower. (An ISR change
        # alone would bump the epoch too, but a broker that keeps leading keeps its coordinator epoch.)
        _stop(cluster, b)
        state = cluster.wait_for(lambda s: s.leader_of(TXN_STATE, 0) == a, 30, "A leads __transaction_state-0")
        first_epoch = state.epoch_of(TXN_STATE, 0)
        assert first_epoch >= 1
        wait_until(lambda: _leads_in(cluster.broker(a).bootstrap, first_epoch), 10,
                   f"broker {a} leading __transaction_state-0 in epoch {first_epoch}")
        cluster.broker(b).start()
        cluster.wait_for(lambda s: len(s.isr_of(TXN_STATE, 0)) == 2 and s.leader_of(TXN_STATE, 0) == a, 30,
                         "B back in the ISR, A still leading")
        # "remote" has its only replica on the other broker (markers go there as WriteTxnMarkers),
        # "local" on the coordinator's broker (markers appended in place).
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for future in admin.create_topics([NewTopic("remote", 1, replica_assignment=[[b]]),
                                           NewTopic("local", 1, replica_assignment=[[a]])]).values():
            future.result(30)
        cluster.wait_for(lambda s: s.leader_of("remote", 0) == b and s.leader_of("local", 0) == a, 30,
                         "both data partitions led")

        # The first transaction: its markers carry coordinator epoch first_epoch.
        bootstrap = cluster.bootstrap
        _commit(bootstrap, b"first")
        producer_ids = wait_until(lambda: _coordinator_epochs(cluster.broker(b).bootstrap, "remote"), 10,
                                  "the first marker on remote")
        assert list(producer_ids.values()) == [first_epoch]
        assert _coordinator_epochs(cluster.broker(a).bootstrap, "local") == producer_ids

        # B stops, then A. A is the controller at the end and nobody is left to move leadership, so the
        # state znode still names A leader of __transaction_state-0.
        _stop(cluster, b)
        # The controller's pass for B's departure is written before A leaves (else A, controller again
        # after its restart, would write it then: an election, and a takeover instead of a start-up load).
        cluster.wait_for(lambda s: s.isr_of(TXN_STATE, 0) == (a,) and s.leader_of("remote", 0) == -1, 30,
                         "B out of the ISR and remote offline")
        _stop(cluster, a)
        state = cluster.state()
        assert state.leader_of(TXN_STATE, 0) == a
        epoch_at_stop = state.epoch_of(TXN_STATE, 0)
        assert epoch_at_stop > first_epoch  # B's departure bumped it; A's coordinator kept first_epoch

        # A starts first: its first view names it leader, so its coordinator loads the partition at
        # start-up. B follows (for "remote"); no election touches __transaction_state-0 meanwhile.
        cluster.broker(a).start()
        cluster.broker(b).start()
        cluster.wait_for(lambda s: s.leader_of("remote", 0) == b and s.leader_of("local", 0) == a, 30,
                         "both data partitions led again")
        assert cluster.state().epoch_of(TXN_STATE, 0) == epoch_at_stop  # the start-up path, not a takeover

        # The second transaction commits: both partitions accept its markers, and read_committed sees it.
        _commit(bootstrap, b"second")
        for topic, leader in (("remote", b), ("local", a)):
            seen = consume_all(bootstrap, topic, 1, 2, timeout=10)[0]
            assert seen == [b"first", b"second"], (
                f"{topic}: the second transaction is not visible to read_committed\n{cluster.logs()}")
            # Its marker carries the leader epoch of __transaction_state-0 as coordinator epoch.
            wait_until(lambda: _coordinator_epochs(cluster.broker(leader).bootstrap, topic)  # noqa: B023
                       == dict.fromkeys(producer_ids, epoch_at_stop), 10, f"{topic}: marker of epoch {epoch_at_stop}")
