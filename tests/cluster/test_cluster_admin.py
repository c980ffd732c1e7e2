"""Administering a cluster: Metadata/DescribeCluster as clients see them (confluent-kafka, kcat),
`eoslog cluster describe|elect-leaders`, topic changes, startup refusals, and the replica protocol's
refusals (wrong epoch, not a replica, not the leader)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import confluent_kafka
import pytest
from cluster_helpers import create_topic
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import CHROOT, embedded_cluster
from eoslog.testing.process import BrokerProcess, free_port
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop


def eoslog(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eoslog", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with embedded_cluster(3, tmp_path_factory.mktemp("admin")) as running:
        create_topic(running, "admin", 3, 3, {"min.insync.replicas": "2"})
        yield running


def test_clients_see_leaders_replicas_and_isr(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    metadata = admin.list_topics(timeout=30)
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert metadata.controller_id in (1, 2, 3)
    partitions = metadata.topics["admin"].partitions
    state = cluster.state()
    for p in range(3):
        assert partitions[p].leader == state.leader_of("admin", p)
        assert list(partitions[p].replicas) == list(state.replicas[("admin", p)])
        assert sorted(partitions[p].isrs) == [1, 2, 3]
    described = admin.describe_cluster().result(30)
    assert sorted(node.id for node in described.nodes) == [1, 2, 3]
    assert described.controller.id == state.controller


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by make test")
def test_kcat_lists_the_cluster(cluster):
    listing = subprocess.run(["kcat", "-b", cluster.bootstrap, "-L", "-t", "admin", "-J"], capture_output=True,
                             text=True, timeout=60, check=True)
    info = json.loads(listing.stdout)
    assert sorted(b["id"] for b in info["brokers"]) == [1, 2, 3]
    topic = next(t for t in info["topics"] if t["topic"] == "admin")
    assert len(topic["partitions"]) == 3
    for partition in topic["partitions"]:
        assert len(partition["replicas"]) == 3 and len(partition["isrs"]) == 3, (partition, listing.stdout)
        assert partition["leader"] in (1, 2, 3)


def test_cluster_describe_cli(cluster):
    result = eoslog("cluster", "describe", "--bootstrap", cluster.broker(1).bootstrap, "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert [b["id"] for b in info["brokers"]] == [1, 2, 3]
    rows = [p for p in info["partitions"] if p["topic"] == "admin"]
    assert len(rows) == 3 and all(len(p["isr"]) == 3 and p["leader"] in (1, 2, 3) for p in rows)
    table = eoslog("cluster", "describe", "--bootstrap", cluster.broker(2).bootstrap, "--topic", "admin")
    assert table.returncode == 0 and "controller: broker" in table.stdout and "admin" in table.stdout


def test_preferred_leader_election_moves_leadership_back(cluster):
    state = cluster.state()
    preferred = state.replicas[("admin", 0)][0]
    assert state.leader_of("admin", 0) == preferred
    cluster.broker(preferred).terminate()  # SIGTERM: leadership moves at once (no session timeout)
    moved = time.monotonic()
    cluster.wait_for(lambda s: s.leader_of("admin", 0) not in (-1, preferred), 30, "leadership moved")
    assert time.monotonic() - moved < cluster.session_timeout_ms / 1000, "a SIGTERM'd broker is not waited for"
    cluster.broker(preferred).start()
    cluster.wait_for(lambda s: preferred in s.isr_of("admin", 0), 60, "the preferred replica caught up")
    result = eoslog("cluster", "elect-leaders", "--preferred", "--topic", "admin", "--bootstrap", cluster.bootstrap.split(",")[0])
    assert result.returncode == 0, result.stderr
    cluster.wait_for(lambda s: all(s.leader_of("admin", p) == s.replicas[("admin", p)][0] for p in range(3)), 30,
                     "preferred leaders everywhere")


def test_create_partitions_and_delete_topic(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    create_topic(cluster, "grow", 1, 2)
    admin.create_partitions([NewPartitions("grow", 3)])["grow"].result(60)
    state = cluster.wait_for(lambda s: all(s.leader_of("grow", p) not in (None, -1) for p in range(3)), 60, "grown")
    assert all(len(state.replicas[("grow", p)]) == 2 for p in range(3))
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    delivered = []
    producer.produce("grow", b"x", partition=2, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None]
    admin.delete_topics(["grow"])["grow"].result(60)
    cluster.wait_for(lambda s: ("grow", 0) not in s.replicas, 30, "deleted")
    deadline = time.monotonic() + 30
    while any((b.data_dir / "grow-0").exists() or (b.data_dir / "grow-2").exists() for b in cluster.brokers.values()):
        assert time.monotonic() < deadline, "replicas of a deleted topic were not removed"
        time.sleep(0.1)


def test_a_grown_topic_is_answered_once_led_and_deleted_within_the_request_timeout(cluster):
    """CreatePartitions used to answer before the new partitions had leaders (its wait looked at the view
    from before the change, where every old partition was led), and a DeleteTopics right after it chased
    the controller, which kept making states for the partitions being deleted one znode at a time: with
    120 partitions it did not answer within a minute (docs/benchmarks.md, "Large topics on a cluster")."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("wide", 60, 3)], operation_timeout=60)["wide"].result(90)
    admin.create_partitions([NewPartitions("wide", 120)], operation_timeout=60)["wide"].result(90)
    state = cluster.state()  # ZooKeeper right after the answer
    assert all(state.leader_of("wide", p) not in (None, -1) for p in range(120))
    admin.delete_topics(["wide"], operation_timeout=30, request_timeout=30)["wide"].result(40)
    cluster.wait_for(lambda s: not any(topic == "wide" for topic, _ in s.replicas), 30, "deleted")
    create_topic(cluster, "wide", 2, 3)  # its config znode went too, or this would be TOPIC_ALREADY_EXISTS
    admin.delete_topics(["wide"], operation_timeout=30, request_timeout=30)["wide"].result(40)


def _fetch_as_replica(bootstrap: str, replica_id: int, epoch: int):
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        request = messages.FetchRequest(
            replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
            topics=[messages.FetchRequest.FetchTopic(topic="admin", partitions=[messages.FetchRequest.FetchPartition(
                partition=1, current_leader_epoch=epoch, fetch_offset=0, log_start_offset=0,
                partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
        response = wire.request(1, 11, request)
    finally:
        wire.close()
    return ErrorCode(response.responses[0].partitions[0].error_code)


def test_replica_fetches_with_wrong_epoch_or_from_strangers_are_refused(cluster):
    state = cluster.state()
    leader, epoch = state.leader_of("admin", 1), state.epoch_of("admin", 1)
    follower = next(r for r in state.replicas[("admin", 1)] if r != leader)
    at_leader = cluster.broker(leader).bootstrap
    assert _fetch_as_replica(at_leader, follower, epoch) == ErrorCode.NONE
    assert _fetch_as_replica(at_leader, follower, epoch - 1) == ErrorCode.FENCED_LEADER_EPOCH if epoch > 0 else True
    assert _fetch_as_replica(at_leader, follower, epoch + 1) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert _fetch_as_replica(at_leader, 77, epoch) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _fetch_as_replica(cluster.broker(follower).bootstrap, leader, epoch) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # OffsetForLeaderEpoch: the current epoch ends at the leader's log end offset.
    wire = BrokerConnection.from_bootstrap(at_leader)
    try:
        response = wire.request(23, 3, messages.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            messages.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="admin", partitions=[
                messages.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=1, current_leader_epoch=epoch, leader_epoch=epoch)])]))
    finally:
        wire.close()
    answer = response.topics[0].partitions[0]
    assert (answer.error_code, answer.leader_epoch) == (0, epoch) and answer.end_offset >= 0


def test_startup_refusals_say_why(cluster, tmp_path):
    connect = cluster.zookeeper.connect_string_with_chroot(CHROOT)
    duplicate = BrokerProcess(data_dir=tmp_path / "dup", properties={"broker.id": "1", "zookeeper.connect": connect})
    with pytest.raises(RuntimeError, match="broker.id 1 is already registered"):
        duplicate.start(timeout=60)
    foreign_dir = tmp_path / "foreign"
    foreign_dir.mkdir()
    (foreign_dir / "meta.properties").write_text("version=1\ncluster.id=someoneelse\nnode.id=9\n")
    foreign = BrokerProcess(data_dir=foreign_dir, properties={"broker.id": "9", "zookeeper.connect": connect})
    with pytest.raises(RuntimeError, match="belongs to cluster someoneelse"):
        foreign.start(timeout=60)
    nowhere = BrokerProcess(data_dir=tmp_path / "nowhere", properties={
        "broker.id": "5", "zookeeper.connect": f"127.0.0.1:{free_port()}", "zookeeper.connection.timeout.ms": "1500"})
    with pytest.raises(RuntimeError, match="cannot reach ZooKeeper"):
        nowhere.start(timeout=60)


def test_topic_config_changes_reach_every_broker(cluster):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": cluster.broker(1).bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, "admin", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    deadline = time.monotonic() + 30
    for broker_id in (2, 3):
        other = AdminClient({"bootstrap.servers": cluster.broker(broker_id).bootstrap})
        while True:
            described = other.describe_configs([ConfigResource(ResourceType.TOPIC, "admin")])
            entries = next(iter(described.values())).result(30)
            if entries["retention.ms"].value == "3600000":
                break
            assert time.monotonic() < deadline, f"broker {broker_id} still shows {entries['retention.ms'].value}"
            time.sleep(0.1)
    bad = ConfigResource(ResourceType.TOPIC, "admin", incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(confluent_kafka.KafkaException, match="retention.ms"):
        admin.incremental_alter_configs([bad])[bad].result(30)


def test_each_broker_describes_its_own_configs(cluster):
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    admin = AdminClient({"bootstrap.servers": cluster.broker(1).bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "2")  # the client sends it to broker 2 itself
    entries = admin.describe_configs([resource])[resource].result(30)
    assert entries["broker.id"].value == "2"
    assert entries["broker.id"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["zookeeper.connect"].value.endswith(CHROOT)
    assert entries["min.insync.replicas"].source == ConfigSource.DEFAULT_CONFIG.value
    described = eoslog("configs", "describe", "--broker", "3", "--json", "-b", cluster.broker(1).bootstrap)
    assert described.returncode == 0, described.stderr
    assert {e["name"]: e["value"] for e in json.loads(described.stdout)}["broker.id"] == "3"
    # broker 1 asked about broker 3: Kafka's refusal
    wire = BrokerConnection.from_bootstrap(cluster.broker(1).bootstrap)
    try:
        [refused] = wire.request(32, 4, messages.DescribeConfigsRequest(resources=[
            messages.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="3")])).results
    finally:
        wire.close()
    assert refused.error_code == ErrorCode.INVALID_REQUEST and "expected 1 or empty string" in refused.error_message

    # Dynamic configs live in ZooKeeper (/config/brokers/<id>, /config/brokers/<default>): a default set
    # through broker 1 reaches every broker, a broker's own value only that broker.
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    assert not entries["max.connections"].is_read_only
    altered = eoslog("configs", "alter", "--broker-defaults", "--set", "max.connections=5000",
                     "-b", cluster.broker(1).bootstrap)
    assert altered.returncode == 0, altered.stderr
    own = ConfigResource(ResourceType.BROKER, "2", incremental_configs=[
        ConfigEntry("max.connections.per.ip", "100", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([own])[own].result(30)

    def described(broker_id: int) -> dict:
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        return admin.describe_configs([resource])[resource].result(30)

    for broker_id in (1, 2, 3):
        wait_until(lambda b=broker_id: described(b)["max.connections"].value == "5000", 30,
                   f"broker {broker_id} applies the default")
        assert described(broker_id)["max.connections"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert (described(2)["max.connections.per.ip"].value, described(2)["max.connections.per.ip"].source) == (
        "100", ConfigSource.DYNAMIC_BROKER_CONFIG.value)  # the writer waited for its own read-back
    assert described(3)["max.connections.per.ip"].value == str(2**31 - 1)
    altered = eoslog("configs", "alter", "--broker-defaults", "--set", "log.roll.ms=3600000",
                     "-b", cluster.broker(3).bootstrap)
    assert altered.returncode == 0, altered.stderr

    def topic_segment_ms(broker_id: int) -> tuple[str, int]:
        # each broker's own copy, not any one's
        wire = BrokerConnection.from_bootstrap(cluster.broker(broker_id).bootstrap)
        try:
            [result] = wire.request(32, 4, messages.DescribeConfigsRequest(resources=[
                messages.DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=2, resource_name="admin", configuration_keys=["segment.ms"])])).results
        finally:
            wire.close()
        return result.configs[0].value, result.configs[0].config_source

    for broker_id in (1, 2, 3):  # a topic without its own segment.ms follows the new default everywhere
        wait_until(lambda b=broker_id: topic_segment_ms(b) == ("3600000", 3), 30, f"broker {broker_id}'s logs")
    for args in (("--broker-defaults", "--delete", "max.connections", "--delete", "log.roll.ms"),
                 ("--broker", "2", "--delete", "max.connections.per.ip")):
        assert eoslog("configs", "alter", *args, "-b", cluster.broker(1).bootstrap).returncode == 0
    wait_until(lambda: described(3)["max.connections"].source == ConfigSource.DEFAULT_CONFIG.value, 30,
               "the default deleted everywhere")
    wait_until(lambda: topic_segment_ms(1) == ("604800000", 5), 30, "the log default deleted")


def test_each_broker_describes_its_own_log_directory(cluster):
    """DescribeLogDirs (issue 41): kafka-python asks every broker, and each answers for the replicas in
    its own data directory; ListConfigResources names the three brokers."""
    from kafka import KafkaAdminClient

    create_topic(cluster, "logdirs", 3, 1)
    state = cluster.state()
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        answers = {a["broker"]: a["log_dirs"] for a in admin.describe_log_dirs({"logdirs": [0, 1, 2]})}
        assert admin.list_config_resources(["BROKER"]) == {"broker": ["1", "2", "3"]}
    finally:
        admin.close()
    assert sorted(answers) == [1, 2, 3]
    for broker_id, (log_dir,) in answers.items():
        assert log_dir["log_dir"] == os.path.abspath(cluster.broker(broker_id).data_dir)
        held = sorted(p for p in range(3) if broker_id in state.replicas[("logdirs", p)])
        assert [p["partition_index"] for t in log_dir["topics"] for p in t["partitions"]] == held


def test_partition_reassignment_moves_replicas_and_keeps_every_record(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic("moving", 1, replica_assignment=[[1, 2]])
    admin.create_topics([topic])["moving"].result(60)
    cluster.wait_for(lambda s: s.isr_of("moving", 0) == (1, 2), 30, "in sync on 1 and 2")
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(3000):
        producer.produce("moving", b"before-%05d" % i, partition=0)
    assert producer.flush(60) == 0
    moved = eoslog("cluster", "reassign", "--bootstrap", cluster.broker(2).bootstrap, "--topic", "moving",
                   "--partition", "0", "--replicas", "3,2")
    assert moved.returncode == 0 and "moving-0: accepted" in moved.stdout, moved.stdout + moved.stderr
    final = cluster.wait_for(lambda s: s.replicas[("moving", 0)] == (3, 2) and set(s.isr_of("moving", 0)) == {2, 3},
                             60, "the reassignment finished")
    assert final.leader_of("moving", 0) in (2, 3)
    listed = eoslog("cluster", "reassignments", "--bootstrap", cluster.broker(1).bootstrap)
    assert (listed.returncode, listed.stdout) == (0, "none\n")
    deadline = time.monotonic() + 30
    while (cluster.broker(1).data_dir / "moving-0").exists():
        assert time.monotonic() < deadline, "broker 1 kept the replica it no longer has"
        time.sleep(0.1)
    for i in range(100):
        producer.produce("moving", b"after-%05d" % i, partition=0)
    assert producer.flush(60) == 0
    from cluster_helpers import consume_all, wait_replicas_identical

    values = consume_all(cluster.bootstrap, "moving", 1, 3100)[0]
    assert values == [b"before-%05d" % i for i in range(3000)] + [b"after-%05d" % i for i in range(100)]
    wait_replicas_identical(cluster, "moving", 0)
