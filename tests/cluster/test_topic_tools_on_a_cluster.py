"""`eoslog topics`, `configs` and `records` against a 3-broker cluster, pointed at one broker that is
neither the controller nor the partition's leader: topic creation reaches the controller, record
deletion the leader, and `topics describe` shows each partition's leader, replicas and ISR as ZooKeeper
and a Kafka client see them, also after a broker stops."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from click.testing import CliRunner
from cluster_helpers import described_at
from confluent_kafka.admin import AdminClient, ConfigResource

from eoslog.testing.cluster import embedded_cluster
from eoslog.testing.wait import wait_until
from eoslog.tools.configs_cli import configs_group
from eoslog.tools.records_cli import records_group
from eoslog.tools.topics_cli import topics_group

pytestmark = pytest.mark.interop


def run(group, *args: str):
    result = CliRunner().invoke(group, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_topic_tools_follow_the_controller_and_leaders_and_describe_replicas_and_isr(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        controller = cluster.state().controller
        asked = next(b for b in cluster.brokers if b != controller)
        elsewhere = cluster.broker(asked).bootstrap
        run(topics_group, "create", "replicated", "--partitions", "2", "--replication-factor", "3",
            "--config", "min.insync.replicas=2", "-b", elsewhere)
        state = cluster.wait_for(lambda s: all(len(s.isr_of("replicated", p)) == 3 for p in range(2)), 30,
                                 "replicas in sync")

        def described_in_sync(bootstrap):  # once that broker has the controller's metadata for both partitions
            view = described_at(bootstrap, "replicated")
            return view if view and all(p["leader"] > 0 and len(p["isr"]) == 3 for p in view["partitions"]) else None

        def every_broker_described_in_sync():  # the steps below ask several brokers
            views = {b: described_in_sync(cluster.broker(b).bootstrap) for b in cluster.brokers}
            return views if all(views.values()) else None

        view = wait_until(every_broker_described_in_sync, 30, "every broker's metadata")[asked]
        assert view["replication_factor"] == 3 and view["configs"] == {"min.insync.replicas": "2"}
        for p in view["partitions"]:
            tp = ("replicated", p["partition"])
            assert p["leader"] == state.leader_of(*tp)
            assert p["replicas"] == list(state.replicas[tp])
            assert sorted(p["isr"]) == [1, 2, 3]
        metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("replicated", timeout=30)
        assert {p.id: (p.leader, list(p.replicas)) for p in metadata.topics["replicated"].partitions.values()} == \
            {p["partition"]: (p["leader"], p["replicas"]) for p in view["partitions"]}

        # DeleteRecords reaches partition 0's leader from a broker that does not lead it.
        leader = state.leader_of("replicated", 0)
        other = cluster.broker(next(b for b in cluster.brokers if b != leader)).bootstrap
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for n in range(5):
            producer.produce("replicated", value=b"%d" % n, partition=0)
        assert producer.flush(30) == 0
        run(records_group, "delete-before", "--topic", "replicated", "--partition", "0", "--offset", "2", "-b", other)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "checker"})
        assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition("replicated", 0), 30) == (2, 5)
        consumer.close()

        run(configs_group, "alter", "--topic", "replicated", "--set", "retention.ms=3600000", "-b", other)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, "replicated")
        # As in Kafka's ZooKeeper mode, the alter is written to ZooKeeper and each broker applies it when its
        # watch fires: the broker the admin client asks may answer with the old value for a moment.
        wait_until(lambda: admin.describe_configs([resource])[resource].result(30)["retention.ms"].value == "3600000",
                   30, "every broker has the altered retention.ms")

        # A stopped follower leaves the ISR, and describe says so.
        follower = next(b for b in state.replicas[("replicated", 0)] if b != leader)
        cluster.broker(follower).terminate()
        cluster.wait_for(lambda s: follower not in s.isr_of("replicated", 0), 30, "the follower left the ISR")

        def described_without_follower():
            [view] = json.loads(run(topics_group, "describe", "replicated", "-b", cluster.broker(leader).bootstrap,
                                    "--json"))
            return view["partitions"][0] if follower not in view["partitions"][0]["isr"] else None

        row = wait_until(described_without_follower, 30, "the leader's metadata without the follower")
        assert follower in row["replicas"] and follower not in row["isr"] and len(row["isr"]) == 2
        table = run(topics_group, "describe", "replicated", "-b", cluster.broker(leader).bootstrap)
        cells = [line.split() for line in table.splitlines()][2]
        assert cells[:4] == ["0", str(leader), ",".join(map(str, row["replicas"])), ",".join(map(str, row["isr"]))]
