"""The `eoslog transactions|producers|groups` tools against a cluster: whichever broker they are pointed
at, each request reaches the broker that serves it (the id's coordinator, the partition's leader, every
broker for a listing); and the hanging-transaction tooling finds and aborts a transaction a partition
holds open that no coordinator knows any more (made here with the test-only switch that makes a new
coordinator skip its load step)."""

from __future__ import annotations

import confluent_kafka
import pytest
from click.testing import CliRunner
from cluster_helpers import consume_all
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.protocol.coordinator_partition import partition_for
from eoslog.testing.cluster import embedded_cluster
from eoslog.tools.groups_cli import groups_group
from eoslog.tools.txn_cli import producers_group, transactions_group

pytestmark = pytest.mark.interop
TRANSACTIONAL_ID = "tools-tx"
GROUP = "tools-group"


def test_tools_follow_coordinators_and_leaders_and_abort_a_hanging_transaction(tmp_path, monkeypatch):
    monkeypatch.setenv("EOSLOG_ALLOW_TEST_FAULTS", "1")
    with embedded_cluster(3, tmp_path, properties={"eoslog.test.skip.coordinator.load": "true"}) as cluster:
        probe = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "probe"})
        probe.init_transactions(60)
        index = partition_for(TRANSACTIONAL_ID, 4)
        state = cluster.wait_for(lambda s: (s.leader_of("__transaction_state", index) or -1) > 0
                                 and len(s.isr_of("__transaction_state", index)) == 3, 30, "txn log in sync")
        coordinator = state.leader_of("__transaction_state", index)
        leader = next(b for b in cluster.brokers if b != coordinator)
        third = next(b for b in cluster.brokers if b not in (coordinator, leader))
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("tools", 1, replica_assignment=[[leader, third, coordinator]])])["tools"].result(60)
        cluster.wait_for(lambda s: s.leader_of("tools", 0) == leader and len(s.isr_of("tools", 0)) == 3, 30, "led")

        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                             "transactional.id": TRANSACTIONAL_ID, "transaction.timeout.ms": 600000})
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce("tools", b"open", partition=0)
        assert producer.flush(30) == 0
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                                             "enable.auto.commit": False})
        consumer.commit(offsets=[confluent_kafka.TopicPartition("tools", 0, 0)], asynchronous=False)
        consumer.close()

        # Pointed at the broker that neither coordinates the id nor leads the partition.
        runner = CliRunner()
        elsewhere = cluster.broker(third).bootstrap
        listed = runner.invoke(transactions_group, ["list", "-b", elsewhere, "--state", "Ongoing"])
        assert listed.exit_code == 0 and TRANSACTIONAL_ID in listed.output, listed.output
        described = runner.invoke(transactions_group, ["describe", "-b", elsewhere, TRANSACTIONAL_ID])
        assert described.exit_code == 0, described.output
        assert "State: Ongoing" in described.output and "Partitions: tools-0" in described.output
        producers = runner.invoke(producers_group, ["describe", "-b", elsewhere, "tools-0"])
        assert producers.exit_code == 0, producers.output
        [row] = [line.split() for line in producers.output.splitlines()[1:]]
        start = int(row[-1])
        assert start == 0, producers.output  # the open transaction's first offset
        groups = runner.invoke(groups_group, ["list", "-b", elsewhere])
        assert groups.exit_code == 0 and GROUP in groups.output, groups.output
        group = runner.invoke(groups_group, ["describe", GROUP, "-b", elsewhere])
        assert group.exit_code == 0 and "tools" in group.output, group.output
        # The coordinator knows it as Ongoing over tools-0: not hanging.
        hanging = runner.invoke(transactions_group, ["find-hanging", "-b", elsewhere, "--topic", "tools"])
        assert hanging.exit_code == 0 and hanging.output.count("\n") == 1, hanging.output

        # The coordinator dies; its successor skips the load and forgets the transaction: now it hangs.
        cluster.broker(coordinator).kill()
        cluster.wait_for(lambda s: s.leader_of("__transaction_state", index) not in (None, -1, coordinator),
                         60, "a new coordinator")
        cluster.broker(coordinator).start()
        after = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap})
        after.produce("tools", b"after", partition=0)
        assert after.flush(30) == 0
        assert consume_all(cluster.bootstrap, "tools", 1, 1, timeout=5)[0] == []  # held back by the LSO
        hanging = runner.invoke(transactions_group, ["find-hanging", "-b", elsewhere, "--topic", "tools"])
        assert hanging.exit_code == 0, hanging.output
        rows = [line.split() for line in hanging.output.splitlines()[1:]]
        assert [(r[0], r[3]) for r in rows] == [("tools-0", str(start))], hanging.output
        aborted = runner.invoke(transactions_group, ["abort", "-b", elsewhere, "tools-0", "--start-offset",
                                                     str(start)])
        assert aborted.exit_code == 0, aborted.output
        assert consume_all(cluster.bootstrap, "tools", 1, 1, timeout=30)[0] == [b"after"]
        hanging = runner.invoke(transactions_group, ["find-hanging", "-b", elsewhere, "--topic", "tools"])
        assert hanging.output.count("\n") == 1, hanging.output
