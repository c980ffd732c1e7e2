"""A follower that restarts unseen by the controller leaves the ISR at once (KIP-903, issue 38).

The controller's rule (test_restart_the_controller_missed.py) trusts ISR members registered before the
partition state's last write. When the *leader* rewrites the state after a follower restarted (here:
the stopped controller, also a follower, falls out of the ISR), the restarted follower's registration
is older than the state, and without more it would stay in the ISR, as if it still held everything it
had acknowledged before its power loss. The follower's fetches carry its broker epoch (its
registration's czxid, Fetch v15 ReplicaState.ReplicaEpoch); the leader takes a member whose epoch
changed out of the ISR at once, and lets it back only once it has caught up under its new epoch.

The miss is forced as in the controller's test: the controller is stopped (SIGSTOP), the follower is
killed, its partition's log cut to nothing (a power loss with nothing synced), its old registration
removed, and it is started again. Its catch-up is slowed (one batch per fetch) so that a watcher
polling ZooKeeper sees the ISR without it."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import confluent_kafka
import pytest
from kazoo.client import KazooClient

from eoslog.cluster.zk import layout
from eoslog.testing.cluster import CHROOT, embedded_cluster

sys.path.insert(0, str(Path(__file__).parent))
from cluster_helpers import create_topic, log_bytes, wait_replicas_identical

pytestmark = pytest.mark.interop

RECORDS = 600
TOPIC = "restarted"


def test_a_follower_restarted_unseen_leaves_the_isr_and_rejoins_only_caught_up(tmp_path):
    # A long session: the controller stays stopped through the restart without its own session expiring.
    # A lag time long enough that the stopped controller leaves the ISR only after the restart.
    with embedded_cluster(3, tmp_path, session_timeout_ms=20_000,
                          properties={"log.eoslog.fsync.on.ack": "false",
                                      "replica.lag.time.max.ms": "6000"}) as cluster:
        create_topic(cluster, TOPIC, 3, 3, {"min.insync.replicas": "2"})
        state = cluster.state()
        controller = state.controller
        partition = next(p for p in range(3) if state.leader_of(TOPIC, p) != controller)
        leader = state.leader_of(TOPIC, partition)
        follower = next(b for b in (1, 2, 3) if b not in (controller, leader))
        epoch = state.epoch_of(TOPIC, partition)

        # Single-record batches: the restarted follower fetches them back one per request.
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                             "linger.ms": 0, "batch.num.messages": 1})
        errors: list = []
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"%04d" % i + b"x" * 600, partition=partition,
                             on_delivery=lambda err, msg: err and errors.append(err))
        assert producer.flush(120) == 0 and errors == []
        full = wait_replicas_identical(cluster, TOPIC, partition)

        watcher = _IsrWatcher(cluster, partition, follower)
        cluster.broker(controller).pause()
        try:
            victim = cluster.broker(follower)
            victim.kill()
            for segment in (victim.data_dir / f"{TOPIC}-{partition}").glob("*.log"):
                os.truncate(segment, 0)  # the power loss: nothing of the partition was synced
            zk = KazooClient(hosts=cluster.zookeeper.connect_string_with_chroot(CHROOT), timeout=10)
            zk.start(timeout=30)
            try:
                zk.delete(layout.broker_path(follower))  # what the old session's expiry does
                watcher.start()
                victim.properties["replica.fetch.max.bytes"] = "1024"  # one batch per fetch
                victim.start()
                registered = zk.exists(layout.broker_path(follower)).czxid
            finally:
                zk.stop()
                zk.close()
            # The leader rewrites the state after the restart: the stopped controller lags out.
            after = cluster.wait_for(lambda s: controller not in s.isr_of(TOPIC, partition)
                                     and follower in s.isr_of(TOPIC, partition), 60,
                                     "the stopped controller out of the ISR, the restarted follower back in")
            assert after.epoch_of(TOPIC, partition) == epoch  # no election: the controller saw nothing
            assert after.leader_of(TOPIC, partition) == leader
        finally:
            cluster.broker(controller).resume()
            watcher.stop()

        assert registered > 0
        left = [i for i, (isr, _) in enumerate(watcher.samples) if follower not in isr]
        assert left, (f"broker {follower} restarted with an empty log and never left the ISR: "
                      f"{sorted({isr for isr, _ in watcher.samples})}\n{cluster.logs()}")
        back = next(i for i in range(left[0], len(watcher.samples)) if follower in watcher.samples[i][0])
        # Back only once caught up: its log (read just after the ISR) as long as the leader's.
        assert watcher.samples[back][1] >= len(full), (
            f"broker {follower} rejoined with {watcher.samples[back][1]} of {len(full)} bytes")
        wait_replicas_identical(cluster, TOPIC, partition, timeout=60)


class _IsrWatcher:
    """Polls the partition's ISR in ZooKeeper, with the restarted follower's log size read just after."""

    def __init__(self, cluster, partition: int, follower: int) -> None:
        self.cluster, self.partition, self.follower = cluster, partition, follower
        self.samples: list[tuple[tuple[int, ...], int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        zk = KazooClient(hosts=self.cluster.zookeeper.connect_string_with_chroot(CHROOT), timeout=10)
        zk.start(timeout=30)
        path = layout.partition_state_path(TOPIC, self.partition)
        data_dir = self.cluster.broker(self.follower).data_dir
        try:
            while not self._stop.is_set():
                data, stat = zk.get(path)
                isr = layout.PartitionState.decode(path, data, stat.version).isr
                self.samples.append((isr, len(log_bytes(data_dir, TOPIC, self.partition))))
                time.sleep(0.01)
        finally:
            zk.stop()
            zk.close()
