"""Transaction groups (the exactly-once Spark sink's multi-task commit) on a 3-broker cluster, through the
sink's own client (client/txn_groups.py): the members, named as the sink names them (coordinated
with their group), write to partitions led by every broker; the group's coordinator SIGKILLs itself
right after the commit point (a test-only crash point), and the broker that takes over its
__transaction_state partition rolls the group forward. The client's retry finds it already committed;
a second coordinator move keeps it; a batch whose coordinator dies before its commit point is
committed by the client's retry at the new one; every record is visible exactly once. A member
coordinated elsewhere is refused."""

from __future__ import annotations

import confluent_kafka
import pytest
from cluster_helpers import consume_all, create_topic

from eoslog.client.txn_groups import TxnGroupClient, TxnGroupError, TxnMember
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.spark.task_writer import colocated_transactional_id
from eoslog.testing.cluster import EmbeddedCluster, embedded_cluster
from eoslog.tools.brokers import Brokers
from eoslog.tools.txn_cli import describe_transactions

pytestmark = pytest.mark.interop
GROUP = "gk-query"
PARTITIONS = 4  # transaction.state.log.num.partitions of the embedded cluster
CRASH = "eoslog.test.crash.after.group.commit.record"


def open_members(bootstrap: str, sequence: int) -> tuple[list, list[TxnMember], dict]:
    """One open transaction per output partition, as the sink's tasks leave them."""
    producers, expected = [], {}
    for p in range(3):
        tid = colocated_transactional_id(f"{GROUP}-{sequence}-{p}", GROUP, PARTITIONS)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                                             "transaction.timeout.ms": 120000, "linger.ms": 5})
        producer.init_transactions(60)
        producer.begin_transaction()
        values = [f"s{sequence}-p{p}-{i}".encode() for i in range(5)]
        for value in values:
            producer.produce("gk-out", value, partition=p)
        assert producer.flush(30) == 0
        producers.append(producer)
        expected[p] = values
    with Brokers(bootstrap) as brokers:
        described = describe_transactions(brokers, [colocated_transactional_id(f"{GROUP}-{sequence}-{p}", GROUP,
                                                                               PARTITIONS) for p in range(3)])
    assert all(d.transaction_state == "Ongoing" for d in described), described
    return producers, [TxnMember(d.transactional_id, d.producer_id, d.producer_epoch) for d in described], expected


def group_coordinator(cluster: EmbeddedCluster) -> int:
    return cluster.state().leader_of("__transaction_state", partition_for(GROUP, PARTITIONS))


def move_coordinator(cluster: EmbeddedCluster, old: int) -> int:
    state = cluster.wait_for(lambda s: s.leader_of("__transaction_state", partition_for(GROUP, PARTITIONS))
                             not in (None, -1, old), 60, "the group's coordinator moved")
    return state.leader_of("__transaction_state", partition_for(GROUP, PARTITIONS))


def in_sync(state) -> bool:
    return len(state.brokers) == 3 and all(len(state.isr_of(t, p)) == len(r) for (t, p), r in state.replicas.items())


def test_a_group_commit_survives_its_coordinator_dying_at_and_before_the_commit_point(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSLOG_ALLOW_TEST_FAULTS", "1")
    # Every broker carries the crash point for batch 4; each is restarted without it afterwards.
    with embedded_cluster(3, tmp_path, properties={"min.insync.replicas": "2", CRASH: "true"}) as cluster:
        create_topic(cluster, "gk-out", 3, 3)
        probe = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": GROUP})
        probe.init_transactions(60)  # __transaction_state exists, the group's partition is led
        cluster.wait_for(in_sync, 60, "every replica in sync")
        client = TxnGroupClient(cluster.bootstrap, timeout_s=90)
        assert client.supported()

        # A member coordinated by another broker than the group is refused; nothing is decided.
        stray = next(f"stray-{n}" for n in range(1000)
                     if partition_for(f"stray-{n}", PARTITIONS) != partition_for(GROUP, PARTITIONS))
        with pytest.raises(TxnGroupError) as refused:
            client.commit(GROUP, 3, [TxnMember(stray, 1, 0)])
        assert refused.value.code == ErrorCode.INVALID_REQUEST
        assert client.last_committed(GROUP) == -1

        # Batch 4: the coordinator dies right after its commit point; the client's retry reaches the
        # broker that took the group's partition over, which rolled the group forward.
        producers, members, expected = open_members(cluster.bootstrap, 4)
        first = group_coordinator(cluster)
        response = client.commit(GROUP, 4, members)
        assert cluster.broker(first).process.wait(30) == -9  # it killed itself at the commit point
        assert (response.already_committed, response.last_committed_sequence) == (True, 4)
        with Brokers(cluster.bootstrap) as brokers:
            states = [d.transaction_state for d in describe_transactions(brokers, [m.transactional_id for m in members])]
        assert states == ["CompleteCommit"] * 3
        assert consume_all(cluster.bootstrap, "gk-out", 3, 15, timeout=60) == expected

        # Every broker restarted without the crash point, one at a time: the group's partition moves
        # several times, and the decision stays.
        # The one that killed itself first: every other restart waits for all three to be in sync.
        for broker_id in [first, *(b for b in cluster.brokers if b != first)]:
            broker = cluster.broker(broker_id)
            broker.properties.pop(CRASH)
            if broker_id == first:
                broker.start()
            else:
                broker.restart(hard=True)
            cluster.wait_for(in_sync, 90, f"broker {broker_id} back in sync")
            assert client.last_committed(GROUP) == 4

        # Batch 5: the coordinator dies before any commit point; the client's retry commits at the next.
        more, members5, expected5 = open_members(cluster.bootstrap, 5)
        third = group_coordinator(cluster)
        cluster.broker(third).kill()
        # What the Spark sink's driver asks at every micro-batch to name its tasks' transactional ids:
        # any live broker can say it while the group's coordinator is dead. Before, the client waited for
        # that coordinator (FindCoordinator first): for the dead broker's ZooKeeper session (4 s) and an
        # election. Had that outlasted the sink's wait, the batch's members would not be colocated with
        # their group and its commit would be refused with INVALID_REQUEST.
        with TxnGroupClient(cluster.bootstrap, timeout_s=3) as probe:
            assert probe.transaction_state_partitions(GROUP) == PARTITIONS
        move_coordinator(cluster, third)
        response = client.commit(GROUP, 5, members5)
        assert (response.already_committed, response.last_committed_sequence) == (False, 5)
        cluster.broker(third).start()
        everything = consume_all(cluster.bootstrap, "gk-out", 3, 30, timeout=60)
        assert everything == {p: expected[p] + expected5[p] for p in range(3)}
        # Nothing else in the log: no duplicate, no stray record (the reader stops at its count).
        assert consume_all(cluster.bootstrap, "gk-out", 3, 31, timeout=5, isolation="read_uncommitted") == everything
        client.close()
        for producer in producers + more:
            producer.flush(1)
