"""A leader that loses power and registers again before the controller sees it gone (issue 38).

The verifier's cluster power-loss run found it: with ``log.eoslog.fsync.on.ack=false`` a leader's
acknowledged tail lives only in page caches, and a power loss takes it. When the controller notices the
broker's absence it elects another ISR member and nothing acknowledged is lost. But the restarted broker
re-creates its ``/brokers/ids`` znode as soon as the old session's is gone, and a controller that reads
the broker list after that (busy, or elected after both) sees the same brokers as before: the state
znode still names the restarted broker leader, it led again on the log that survived, and the followers
truncated to it (docs/cluster.md, "A restart the controller did not see").

Here the miss is forced, not raced: the controller is stopped (SIGSTOP) while the leader is killed, its
partition's log cut to nothing (what LazyFS leaves of unsynced writes), its old registration removed
(its session's expiry, without waiting for it) and the broker started again; then the controller
continues. Every acknowledged record must still be read, and the replicas must agree again."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import confluent_kafka
import pytest
from kazoo.client import KazooClient

from eoslog.client.connection import BrokerConnection
from eoslog.cluster.zk import layout
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import CHROOT, embedded_cluster

sys.path.insert(0, str(Path(__file__).parent))
from cluster_helpers import consume_all, create_topic, wait_replicas_identical

pytestmark = pytest.mark.interop

RECORDS = 100


def test_a_leader_restarted_unseen_by_the_controller_does_not_lead_on_a_lost_tail(tmp_path):
    # A long session: the controller stays stopped for the restart without its own session expiring.
    with embedded_cluster(3, tmp_path, session_timeout_ms=20_000,
                          properties={"log.eoslog.fsync.on.ack": "false"}) as cluster:
        create_topic(cluster, "lost", 3, 3, {"min.insync.replicas": "2"})
        state = cluster.state()
        controller = state.controller
        # Round-robin assignment: each broker leads one partition; take one the controller does not lead.
        partition = next(p for p in range(3) if state.leader_of("lost", p) != controller)
        victim = state.leader_of("lost", partition)
        epoch = state.epoch_of("lost", partition)

        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                             "linger.ms": 2, "batch.num.messages": 10})
        errors: list = []
        for i in range(RECORDS):
            producer.produce("lost", value=b"value-%04d" % i, partition=partition,
                             on_delivery=lambda err, msg: err and errors.append(err))
        assert producer.flush(60) == 0 and errors == []
        wait_replicas_identical(cluster, "lost", partition)

        cluster.broker(controller).pause()
        try:
            cluster.broker(victim).kill()
            # The power loss: nothing of the partition was synced, so its segment comes back empty.
            for segment in (cluster.broker(victim).data_dir / f"lost-{partition}").glob("*.log"):
                os.truncate(segment, 0)
            zk = KazooClient(hosts=cluster.zookeeper.connect_string_with_chroot(CHROOT), timeout=10)
            zk.start(timeout=30)
            try:
                zk.delete(layout.broker_path(victim))  # what the old session's expiry does
            finally:
                zk.stop()
                zk.close()
            cluster.broker(victim).start()
            # The state the stopped controller left still names the restarted broker, in the old epoch,
            # yet it must not lead on it: asked what followers ask before truncating, it is no leader.
            stale = cluster.state()
            assert (stale.leader_of("lost", partition), stale.epoch_of("lost", partition)) == (victim, epoch)
            assert _end_of_epoch(cluster.broker(victim).bootstrap, partition, epoch) == \
                ErrorCode.NOT_LEADER_OR_FOLLOWER
        finally:
            cluster.broker(controller).resume()

        got = consume_all(cluster.bootstrap, "lost", 3, RECORDS, timeout=30, isolation="read_uncommitted")
        assert got[partition] == [b"value-%04d" % i for i in range(RECORDS)], (
            f"{len(got[partition])} of {RECORDS} acknowledged records read back\n{cluster.logs()}")
        after = cluster.wait_for(lambda s: s.epoch_of("lost", partition) > epoch, 30, "a new leader epoch")
        assert after.leader_of("lost", partition) != -1
        wait_replicas_identical(cluster, "lost", partition, timeout=60)


def _end_of_epoch(bootstrap: str, partition: int, epoch: int) -> ErrorCode:
    """OffsetForLeaderEpoch, as a follower sends it to learn where to truncate."""
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        response = wire.request(23, 3, messages.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            messages.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="lost", partitions=[
                messages.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=partition, current_leader_epoch=epoch, leader_epoch=epoch)])]))
    finally:
        wire.close()
    return ErrorCode(response.topics[0].partitions[0].error_code)
