"""The namespace nemesis's partitions (verify/net_faults.py), each injected into a real cluster (3 brokers, a
3-node ZooKeeper ensemble, every process in a network namespace of its own) and healed, with the cluster's
reaction checked as ZooKeeper and the brokers show it: the leader moved, the old leader fenced and its
unreplicated tail truncated, the ISR shrunk and grown again, writes refused where they must be and taken
where they may be. The first test is docs/cluster.md's "A leader cut off from ZooKeeper" rule: acks=all is
never acknowledged by such a leader; acks=1 is, and is lost."""

from __future__ import annotations

import itertools
import random
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client.connection import BrokerConnection
from eoslog.faults import nftables
from eoslog.faults.netns import Network
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import build_simple
from eoslog.testing.faults import require_network
from eoslog.tools.local.cluster import EmbeddedCluster
from eoslog.verify.net_faults import NetNemesis

pytestmark = pytest.mark.slow

SETTLE_S = 60
_topics = itertools.count(1)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_network()
    with Network(zookeeper_nodes=3, brokers=3) as network, network.entered(network.clients):
        cluster = EmbeddedCluster(tmp_path_factory.mktemp("net"), 3, zookeeper_nodes=3, network=network,
                                  properties={"replica.lag.time.max.ms": "3000"})
        with cluster:
            nemesis = NetNemesis((), seed=38, cluster=cluster, topic="unused", transactional_ids=["unused"],
                                 internal_partitions=4)
            yield cluster, network, nemesis


def new_topic(cluster: EmbeddedCluster) -> str:
    topic = f"net-{next(_topics)}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    cluster.wait_for(lambda s: len(s.isr_of(topic, 0)) == 3, SETTLE_S, f"{topic} led with its whole ISR")
    return topic


def settle(cluster: EmbeddedCluster, topic: str) -> None:
    cluster.wait_for(lambda s: len(s.brokers) == 3 and len(s.isr_of(topic, 0)) == 3 and s.controller > 0,
                     SETTLE_S, "every broker registered and back in the ISR")


def produce(cluster: EmbeddedCluster, broker: int, topic: str, value: str, acks: int, timeout_ms: int = 2000
            ) -> int | None:
    """The error code the broker answers a Produce of one record with, or None when no answer came."""
    m = messages.ProduceRequest
    request = m(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[m.TopicProduceData(
        name=topic, partition_data=[m.PartitionProduceData(index=0, records=build_simple([value.encode()]))])])
    host = cluster.broker(broker).host
    try:
        with BrokerConnection(host, 9092, timeout_s=timeout_ms / 1000 + 5) as connection:
            response = connection.request(0, 9, request)
    except (TimeoutError, ConnectionError):
        return None
    return response.responses[0].partition_responses[0].error_code


NOT_APPENDED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS)


def accepted(cluster: EmbeddedCluster, broker: int, topic: str, value: str, timeout_ms: int = 5000) -> int | None:
    """acks=all, again while the broker answers that it appended nothing (a new leader that ZooKeeper
    names but that has not taken its leadership yet); the last answer."""
    deadline = time.monotonic() + SETTLE_S
    while (code := produce(cluster, broker, topic, value, -1, timeout_ms)) in NOT_APPENDED and time.monotonic() < deadline:
        time.sleep(0.1)
    return code


def values(cluster: EmbeddedCluster, topic: str) -> list[str]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"read-{random.random()}",
                         "enable.auto.commit": False})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        consumer.assign([TopicPartition(topic, 0, 0)])
        read: list[str] = []
        while len(read) < end:
            message = consumer.poll(15)
            assert message is not None, f"read {len(read)} of {end}"
            if message.error() is None:
                read.append(message.value().decode())
        return read
    finally:
        consumer.close()


def moved_off(cluster: EmbeddedCluster, topic: str, old: int, epoch: int):
    return cluster.wait_for(lambda s: s.leader_of(topic, 0) not in (old, -1, None) and s.epoch_of(topic, 0) > epoch
                            and old not in s.isr_of(topic, 0), SETTLE_S, f"leadership of {topic} moved off {old}")


def test_a_leader_cut_off_from_zookeeper_never_acks_all_and_loses_what_it_acked_with_acks_1(lab):
    cluster, network, nemesis = lab
    topic = new_topic(cluster)
    state = cluster.state()
    old, epoch = state.leader_of(topic, 0), state.epoch_of(topic, 0)
    assert accepted(cluster, old, topic, "before") == 0
    drops, _ = nemesis.isolate_leader(victim=old)
    network.add_drops(drops)
    try:
        # It still believes it leads: acks=1 is answered from its own log, acks=all waits for followers
        # it cannot reach and an ISR shrink it cannot write to ZooKeeper.
        assert produce(cluster, old, topic, "acks-1-isolated", acks=1) == 0
        assert produce(cluster, old, topic, "acks-all-isolated", acks=-1) in (
            None, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        state = moved_off(cluster, topic, old, epoch)
        new = state.leader_of(topic, 0)
        assert accepted(cluster, new, topic, "acks-all-new-leader") == 0
        # Deposed without knowing it (its session expired on ZooKeeper's side only): still the same.
        assert produce(cluster, old, topic, "acks-1-deposed", acks=1) == 0
        assert produce(cluster, old, topic, "acks-all-deposed", acks=-1) != 0
    finally:
        network.heal()
    settle(cluster, topic)
    # Back, it finds its session gone, follows the new leader and truncates its own tail to the new
    # leader's log (leader epochs): what it acknowledged alone is gone, what the ISR had is all there.
    assert values(cluster, topic) == ["before", "acks-all-new-leader"]
    assert produce(cluster, old, topic, "to-the-old-leader", acks=-1) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_isolated_controller_is_replaced_and_its_leaderships_move(lab):
    cluster, network, nemesis = lab
    topic = new_topic(cluster)
    before = cluster.state()
    controller = before.controller
    led = {tp for tp, s in before.partitions.items() if s.leader == controller}
    drops, detail = nemesis.isolate_controller()
    assert f"controller {controller}" in detail
    network.add_drops(drops)
    try:
        state = cluster.wait_for(lambda s: s.controller not in (controller, -1) and s.controller_epoch > before.controller_epoch
                                 and all(s.leader_of(*tp) != controller for tp in led), SETTLE_S,
                                 "a new controller, and the old one's leaderships moved")
        new_controller = state.controller
        assert accepted(cluster, state.leader_of(topic, 0), topic, "during") == 0
    finally:
        network.heal()
    settle(cluster, topic)
    state = cluster.state()
    assert state.controller == new_controller and state.controller_epoch >= before.controller_epoch + 1
    assert "during" in values(cluster, topic)


def test_a_minority_with_the_leader_loses_it_to_the_majority(lab):
    cluster, network, nemesis = lab
    topic = new_topic(cluster)
    state = cluster.state()
    old, epoch = state.leader_of(topic, 0), state.epoch_of(topic, 0)
    drops, detail = nemesis.majority_split(minority=[old])
    assert "a ZooKeeper node" in detail  # one of the three goes with the minority, which has no quorum
    network.add_drops(drops)
    try:
        state = moved_off(cluster, topic, old, epoch)
        assert accepted(cluster, state.leader_of(topic, 0), topic, "majority") == 0
        assert produce(cluster, old, topic, "minority", acks=-1) != 0
    finally:
        network.heal()
    settle(cluster, topic)
    assert values(cluster, topic) == ["majority"]


def test_a_leader_whose_packets_are_lost_one_way_is_replaced(lab):
    cluster, network, nemesis = lab
    topic = new_topic(cluster)
    state = cluster.state()
    old, epoch = state.leader_of(topic, 0), state.epoch_of(topic, 0)
    drops, _ = nemesis.one_way_loss(victim=old, outgoing=True)
    assert {d.source for d in drops} == {network.broker_address(old)}
    network.add_drops(drops)
    try:
        state = moved_off(cluster, topic, old, epoch)
        assert accepted(cluster, state.leader_of(topic, 0), topic, "after") == 0
    finally:
        network.heal()
    settle(cluster, topic)
    assert values(cluster, topic) == ["after"]


def test_a_bridge_leader_keeps_leading_while_the_far_follower_leaves_the_isr(lab):
    cluster, network, nemesis = lab
    topic = new_topic(cluster)
    state = cluster.state()
    leader = state.leader_of(topic, 0)
    near, far = [b for b in state.replicas[(topic, 0)] if b != leader]
    side_a = nemesis.zookeeper_addresses() + [network.broker_address(near)]
    drops, detail = nemesis.bridge(middle=leader, side_a=side_a, side_b=[network.broker_address(far)])
    assert f"broker {leader} talks to both" in detail
    network.add_drops(drops)
    try:
        state = cluster.wait_for(lambda s: far not in s.isr_of(topic, 0), SETTLE_S, f"broker {far} out of the ISR")
        assert state.leader_of(topic, 0) == leader  # it still reaches ZooKeeper: nothing to elect
        assert set(state.isr_of(topic, 0)) == {leader, near}
        assert accepted(cluster, leader, topic, "bridged") == 0  # ISR of 2 = min.insync.replicas
    finally:
        network.heal()
    settle(cluster, topic)
    assert cluster.state().leader_of(topic, 0) == leader
    assert values(cluster, topic) == ["bridged"]


def test_an_isolated_zookeeper_leader_is_replaced_and_the_cluster_keeps_writing(lab):
    cluster, network, nemesis = lab
    topic = new_topic(cluster)
    zk_leader = cluster.zookeeper.leader()
    assert zk_leader is not None
    drops, detail = nemesis.isolate_zookeeper(node_id=zk_leader.node_id)
    assert "(leader)" in detail
    network.add_drops(drops)
    try:
        cluster.wait_for(lambda s: (n := cluster.zookeeper.leader()) is not None and n.node_id != zk_leader.node_id,
                         SETTLE_S, "the two other ZooKeeper nodes elect a leader")
        state = cluster.wait_for(lambda s: (s.leader_of(topic, 0) or -1) > 0, SETTLE_S, "the topic led")
        assert accepted(cluster, state.leader_of(topic, 0), topic, "quorum of two", timeout_ms=10000) == 0
    finally:
        network.heal()
    cluster.wait_for(lambda s: zk_leader.mode() == "follower", SETTLE_S, "the old ZooKeeper leader follows again")
    settle(cluster, topic)
    assert values(cluster, topic) == ["quorum of two"]


def test_every_partition_kind_cuts_only_links_of_this_network(lab):
    cluster, network, nemesis = lab
    nemesis.topic = new_topic(cluster)  # the one whose leaders are aimed at
    addresses = {h.address for h in network.hosts.values()}
    for kind in ("isolate_leader", "isolate_controller", "majority_split", "one_way_loss", "bridge",
                 "isolate_zookeeper"):
        drops, _ = getattr(nemesis, kind)()
        assert drops, kind
        assert all(isinstance(d, nftables.Drop) and {d.source, d.destination} <= addresses for d in drops), kind
        assert network.clients not in {d.source for d in drops} | {d.destination for d in drops} \
            or kind == "isolate_zookeeper", kind  # only a ZooKeeper node is ever hidden from the clients
