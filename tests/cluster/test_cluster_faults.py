"""Faults of the cluster itself (issue 13's tests 3, 5 and 6): a divergent tail on a returning leader,
a controller SIGKILL, a ZooKeeper ensemble member SIGKILL, and ZooKeeper gone entirely and back."""

from __future__ import annotations

import subprocess
import sys
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from cluster_helpers import consume_all, create_topic, log_bytes, wait_replicas_identical

from eoslog.testing.cluster import embedded_cluster

pytestmark = pytest.mark.interop


def _produce(bootstrap: str, topic: str, values: list[bytes], **config) -> list:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **config})
    outcomes = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(60)
    return outcomes


def test_a_returning_leader_truncates_its_divergent_tail_to_the_new_leaders_log(tmp_path):
    # The divergent tail Kafka's KIP-101 is about, built on purpose: both followers are killed, the
    # leader alone takes acks=1 writes, then dies; an unclean election (through `eoslog cluster
    # elect-leaders --unclean`, i.e. ElectLeaders at the controller) makes a follower without those
    # writes the leader. When the old leader returns it must end byte-for-byte like the new one.
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "diverge", 1, 3, {"min.insync.replicas": "1"})
        first = [b"common-%03d" % i for i in range(50)]
        assert _produce(cluster.bootstrap, "diverge", first, acks="all") == [None] * 50
        wait_replicas_identical(cluster, "diverge", 0)
        state = cluster.state()
        old_leader = state.leader_of("diverge", 0)
        followers = [b for b in state.replicas[("diverge", 0)] if b != old_leader]
        for follower in followers:
            cluster.broker(follower).kill()
        cluster.wait_for(lambda s: s.isr_of("diverge", 0) == (old_leader,), 60, "ISR of the leader alone")
        tail = [b"divergent-%03d" % i for i in range(20)]
        assert _produce(cluster.broker(old_leader).bootstrap, "diverge", tail, acks=1) == [None] * 20
        cluster.broker(old_leader).kill()
        assert b"divergent-019" in log_bytes(cluster.broker(old_leader).data_dir, "diverge", 0)
        for follower in followers:
            cluster.broker(follower).start()
        # No live ISR member: a clean election cannot happen, the partition stays offline.
        offline = cluster.wait_for(lambda s: s.brokers == set(followers) and s.leader_of("diverge", 0) == -1, 60,
                                   "the followers registered and the partition offline")
        assert offline.isr_of("diverge", 0) == (old_leader,)  # kept, so the old leader could lead cleanly
        elect = subprocess.run([sys.executable, "-m", "eoslog", "cluster", "elect-leaders", "--unclean",
                                "--topic", "diverge", "--bootstrap", cluster.broker(followers[0]).bootstrap],
                               capture_output=True, text=True, timeout=60)
        assert elect.returncode == 0, elect.stderr
        assert "diverge-0: new leader elected" in elect.stdout
        new_state = cluster.wait_for(lambda s: s.leader_of("diverge", 0) in followers, 60, "a follower leads")
        new_leader = new_state.leader_of("diverge", 0)
        after = [b"new-%03d" % i for i in range(30)]
        assert _produce(cluster.broker(new_leader).bootstrap, "diverge", after, acks=1,
                        **{"message.timeout.ms": 30000}) == [None] * 30
        cluster.broker(old_leader).start()
        cluster.wait_for(lambda s: old_leader in s.isr_of("diverge", 0), 60, "the old leader rejoined")
        identical = wait_replicas_identical(cluster, "diverge", 0)
        assert b"divergent-" not in identical
        values = consume_all(cluster.bootstrap, "diverge", 1, 80)[0]
        assert values == first + after
        assert "truncating from" in cluster.broker(old_leader).log_tail(400)


def test_controller_sigkill_elects_a_new_controller_that_handles_the_next_leader_failure(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "ctl", 3, 3, {"min.insync.replicas": "2"})
        state = cluster.state()
        controller, controller_epoch = state.controller, state.controller_epoch
        cluster.broker(controller).kill()
        killed = time.monotonic()
        after = cluster.wait_for(lambda s: s.controller not in (-1, controller)
                                 and s.controller_epoch > controller_epoch, 60, "a new controller")
        controller_failover = time.monotonic() - killed
        # Leadership of the dead controller's partitions moved too.
        after = cluster.wait_for(lambda s: all(s.leader_of("ctl", p) not in (None, -1, controller) for p in range(3)),
                                 60, "no partition led by the dead broker")
        new_controller = after.controller
        # A leader failure after the controller moved: the new controller handles it.
        victim = next(after.leader_of("ctl", p) for p in range(3) if after.leader_of("ctl", p) != new_controller)
        victim_partitions = [p for p in range(3) if after.leader_of("ctl", p) == victim]
        epochs = {p: after.epoch_of("ctl", p) for p in victim_partitions}
        cluster.broker(victim).kill()
        killed = time.monotonic()
        cluster.wait_for(lambda s: all(s.leader_of("ctl", p) == new_controller and s.epoch_of("ctl", p) > epochs[p]
                                       for p in victim_partitions), 60, "the new controller moved leadership")
        leader_failover = time.monotonic() - killed
        print(f"controller failover {controller_failover:.2f} s, leader failover after it {leader_failover:.2f} s "
              f"(zookeeper.session.timeout.ms = {cluster.session_timeout_ms})")
        # One broker left, min.insync.replicas=2: restart one and write acks=all through the new leaders.
        cluster.broker(controller).start()
        cluster.wait_for(lambda s: all(len(s.isr_of("ctl", p)) >= 2 for p in range(3)), 60, "ISR of two again")
        values = [b"after-%d" % i for i in range(10)]
        assert _produce(cluster.bootstrap, "ctl", values, acks="all", **{"message.timeout.ms": 30000}) == [None] * 10
        assert leader_failover < 2 * cluster.session_timeout_ms / 1000 + 5


def test_zookeeper_member_loss_and_full_zookeeper_outage_recover_without_an_operator(tmp_path):
    with embedded_cluster(3, tmp_path, zookeeper_nodes=3) as cluster:
        create_topic(cluster, "zk", 1, 3, {"min.insync.replicas": "2"})
        # One ensemble member down: ZooKeeper keeps its quorum, the cluster does not notice.
        member = cluster.zookeeper.nodes[0]
        member.kill()
        assert _produce(cluster.bootstrap, "zk", [b"one-member-down"], acks="all",
                        **{"message.timeout.ms": 30000}) == [None]
        member.start()
        member.wait_ready()
        # All of ZooKeeper gone: the brokers keep serving what their ISR already guarantees.
        for node in cluster.zookeeper.nodes:
            node.kill()
        assert _produce(cluster.bootstrap, "zk", [b"zookeeper-down"], acks="all",
                        **{"message.timeout.ms": 30000}) == [None]
        assert consume_all(cluster.bootstrap, "zk", 1, 2)[0] == [b"one-member-down", b"zookeeper-down"]
        describe = subprocess.run([sys.executable, "-m", "eoslog", "cluster", "describe", "--bootstrap",
                                   cluster.bootstrap.split(",")[0], "--zookeeper", cluster.zookeeper.connect_string],
                                  capture_output=True, text=True, timeout=60)
        assert describe.returncode == 0, describe.stderr
        assert "ZooKeeper: NO QUORUM" in describe.stdout
        assert "lost the connection to ZooKeeper" in cluster.broker(1).log_tail(400)
        for node in cluster.zookeeper.nodes:
            node.start()
        for node in cluster.zookeeper.nodes:
            node.wait_ready()
        # Back: every broker registered again, a controller exists, and failover works again.
        state = cluster.wait_for(lambda s: s.brokers == {1, 2, 3} and s.controller in (1, 2, 3), 90,
                                 "brokers registered again")
        leader, epoch = state.leader_of("zk", 0), state.epoch_of("zk", 0)
        cluster.broker(leader).kill()
        cluster.wait_for(lambda s: s.leader_of("zk", 0) not in (None, -1, leader) and s.epoch_of("zk", 0) > epoch,
                         60, "failover after ZooKeeper came back")
        assert _produce(cluster.bootstrap, "zk", [b"after"], acks="all", **{"message.timeout.ms": 30000}) == [None]
        assert consume_all(cluster.bootstrap, "zk", 1, 3)[0] == [b"one-member-down", b"zookeeper-down", b"after"]


def test_a_leader_whose_session_expired_stops_leading_and_nothing_acked_is_lost(tmp_path):
    # SIGSTOP the leader past the ZooKeeper session timeout while a producer streams: the controller
    # moves leadership; when the old leader wakes up it must not acknowledge anything on its own (its
    # session is gone), re-register, truncate if needed and follow.
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "expire", 1, 3, {"min.insync.replicas": "2"})
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 120_000,
                                             "topic.metadata.refresh.interval.ms": 1000})
        acked: list[int] = []
        sent = 0

        def send(count: int) -> None:
            nonlocal sent
            for _ in range(count):
                producer.produce("expire", b"%06d" % sent, partition=0,
                                 on_delivery=lambda err, msg: err is None and acked.append(int(msg.value())))
                sent += 1
                producer.poll(0)

        send(500)
        producer.flush(30)
        state = cluster.state()
        leader, epoch = state.leader_of("expire", 0), state.epoch_of("expire", 0)
        cluster.broker(leader).pause()
        try:
            send(500)  # in flight to a frozen leader
            cluster.wait_for(lambda s: s.leader_of("expire", 0) not in (-1, leader) and s.epoch_of("expire", 0) > epoch,
                             60, "a new leader while the old one is frozen")
        finally:
            cluster.broker(leader).resume()
        send(500)
        assert producer.flush(120) == 0
        cluster.wait_for(lambda s: leader in s.brokers and leader in s.isr_of("expire", 0), 60,
                         "the old leader registered again and caught up")
        assert "ZooKeeper session expired" in cluster.broker(leader).log_tail(400)
        values = [int(v) for v in consume_all(cluster.bootstrap, "expire", 1, len(acked))[0]]
        assert values == sorted(values) and len(values) == len(set(values))
        assert set(acked) <= set(values) and len(acked) == 1500
        wait_replicas_identical(cluster, "expire", 0)


def test_a_replica_whose_disk_is_full_leaves_the_isr_instead_of_acknowledging(tmp_path):
    # Broker 3 may write no file past 256 KiB (RLIMIT_FSIZE: writes fail with EFBIG, like a full disk).
    with embedded_cluster(3, tmp_path, properties={"replica.lag.time.max.ms": "2000"},
                          file_size_limits={3: 256 * 1024}) as cluster:
        # A manual assignment (CreateTopics with replica assignments): broker 1 leads, the full disk follows.
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topic = NewTopic("full", 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})
        admin.create_topics([topic])["full"].result(60)
        cluster.wait_for(lambda s: s.leader_of("full", 0) == 1 and len(s.isr_of("full", 0)) == 3, 30, "in sync")
        values = [b"%05d" % i + b"x" * 1000 for i in range(1000)]  # ~1 MB: more than broker 3 can hold
        outcomes = _produce(cluster.bootstrap, "full", values, acks="all", **{"message.timeout.ms": 60000})
        assert outcomes == [None] * len(values)
        state = cluster.wait_for(lambda s: 3 not in s.isr_of("full", 0), 30, "the full replica left the ISR")
        assert len(state.isr_of("full", 0)) == 2
        # What broker 3 holds is a prefix of the leader's log, never more than it could write.
        full = log_bytes(cluster.broker(3).data_dir, "full", 0)
        leader = log_bytes(cluster.broker(state.leader_of("full", 0)).data_dir, "full", 0)
        assert len(full) < len(leader) and leader.startswith(full)
        assert cluster.broker(3).process.poll() is None, "a full disk must not crash the broker"
        assert consume_all(cluster.bootstrap, "full", 1, len(values))[0] == values


def test_auto_leader_rebalance_gives_leadership_back_to_the_preferred_replica(tmp_path):
    with embedded_cluster(3, tmp_path, properties={"leader.imbalance.check.interval.seconds": "1"}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("prefer", 1, replica_assignment=[[2, 3, 1]])])["prefer"].result(60)
        cluster.wait_for(lambda s: s.leader_of("prefer", 0) == 2 and len(s.isr_of("prefer", 0)) == 3, 30, "led by 2")
        cluster.broker(2).terminate()
        cluster.wait_for(lambda s: s.leader_of("prefer", 0) in (3, 1), 30, "leadership moved away")
        cluster.broker(2).start()
        # No operator action: the controller's periodic check elects the preferred replica again.
        cluster.wait_for(lambda s: s.leader_of("prefer", 0) == 2, 60, "the preferred replica leads again")
