"""A bit flipped in a follower's stored segment, in a real 3-broker cluster (issue 38).

300 records acknowledged (acks=all, min.insync.replicas=2), the replicas identical; one follower stopped,
one bit of one of its stored batches flipped, the follower started again. Its start-up scrub finds the
damaged batch, the follower cuts its log there and fetches the rest again from the leader: its bytes end
identical to the leader's. Then the other two brokers stop, the repaired replica leads alone, and a
confluent-kafka consumer reads every acknowledged record from it (docs/durability.md, "Corruption")."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import confluent_kafka
import pytest

from eoslog.faults.bitflip import flip_bit
from eoslog.testing.cluster import embedded_cluster

sys.path.insert(0, str(Path(__file__).parent.parent / "cluster"))
from cluster_helpers import consume_all, create_topic, log_bytes, wait_replicas_identical

pytestmark = pytest.mark.interop

RECORDS = 300


def test_a_flipped_bit_in_a_follower_is_repaired_from_the_leader(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "rot", 1, 3, {"min.insync.replicas": "2"})
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                             "linger.ms": 2, "batch.num.messages": 10})
        errors: list = []
        for i in range(RECORDS):
            producer.produce("rot", value=b"value-%04d" % i, partition=0,
                             on_delivery=lambda err, msg: err and errors.append(err))
            if i % 20 == 19:
                producer.flush(30)  # many small batches to aim at
        assert producer.flush(60) == 0 and errors == []
        good = wait_replicas_identical(cluster, "rot", 0)

        state = cluster.state()
        leader = state.leader_of("rot", 0)
        follower = next(r for r in state.replicas[("rot", 0)] if r != leader)
        cluster.broker(follower).terminate()
        flip = flip_bit(str(cluster.broker(follower).data_dir / "rot-0"), random.Random(38), below_offset=RECORDS)
        assert log_bytes(cluster.broker(follower).data_dir, "rot", 0) != good
        cluster.broker(follower).start()

        # Repaired from the leader: the same bytes again, and back in the ISR.
        assert wait_replicas_identical(cluster, "rot", 0, timeout=90) == good, flip
        cluster.wait_for(lambda s: len(s.isr_of("rot", 0)) == 3, 60, "the repaired follower back in the ISR")

        # The repaired replica alone serves every acknowledged record.
        for other in state.replicas[("rot", 0)]:
            if other != follower:
                cluster.broker(other).terminate()
        cluster.wait_for(lambda s: s.leader_of("rot", 0) == follower, 60, "the repaired replica leading")
        got = consume_all(cluster.bootstrap, "rot", 1, RECORDS, timeout=60, isolation="read_uncommitted")
        assert got[0] == [b"value-%04d" % i for i in range(RECORDS)]
