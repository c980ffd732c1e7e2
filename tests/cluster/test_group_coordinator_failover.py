"""Consumer groups on a cluster: the group coordinator is the leader of the group's
``__consumer_offsets`` partition, other brokers answer NOT_COORDINATOR, and committed offsets survive the
coordinator's broker being SIGKILLed (the new leader loads the replicated partition)."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from cluster_helpers import create_topic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import embedded_cluster

pytestmark = pytest.mark.interop
GROUP = "failover-group"


def _consume(bootstrap: str, count: int, commit: bool) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                         "session.timeout.ms": 6000})
    consumer.subscribe(["orders"])
    values: list[bytes] = []
    try:
        while len(values) < count:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            values.append(message.value())
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def _offset_fetch_error(bootstrap: str) -> ErrorCode:
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        response = wire.request(9, 5, messages.OffsetFetchRequest(group_id=GROUP, topics=None, require_stable=False))
    finally:
        wire.close()
    return ErrorCode(response.error_code)


def _serves_within(bootstrap: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        code = _offset_fetch_error(bootstrap)
        if code == ErrorCode.NONE:
            return True
        assert code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), code
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_committed_offsets_survive_the_group_coordinators_broker(tmp_path):
    with embedded_cluster(3, tmp_path) as cluster:
        create_topic(cluster, "orders", 1, 3, {"min.insync.replicas": "2"})
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(100):
            producer.produce("orders", b"%03d" % i, partition=0)
        assert producer.flush(30) == 0
        assert _consume(cluster.bootstrap, 60, commit=True) == [b"%03d" % i for i in range(60)]
        index = partition_for(GROUP, 4)  # offsets.topic.num.partitions of the embedded cluster
        coordinator = cluster.state().leader_of("__consumer_offsets", index)
        others = [b for b in cluster.brokers if b != coordinator]
        assert _offset_fetch_error(cluster.broker(others[0]).bootstrap) == ErrorCode.NOT_COORDINATOR
        assert _offset_fetch_error(cluster.broker(coordinator).bootstrap) == ErrorCode.NONE
        epoch = cluster.state().epoch_of("__consumer_offsets", index)
        cluster.broker(coordinator).kill()
        moved = cluster.wait_for(lambda s: s.leader_of("__consumer_offsets", index) in others
                                 and s.epoch_of("__consumer_offsets", index) > epoch, 60, "the coordinator moved")
        new_coordinator = moved.leader_of("__consumer_offsets", index)
        # ZooKeeper names it before it has read that (its view follows a watch): until then it answers
        # as a client would be told to retry, and within seconds it serves the group.
        assert _serves_within(cluster.broker(new_coordinator).bootstrap, 10)
        # A new member of the group resumes exactly after the committed offset.
        remaining = _consume(",".join(cluster.broker(b).bootstrap for b in others), 40, commit=True)
        assert remaining == [b"%03d" % i for i in range(60, 100)]
        # The old coordinator comes back as a follower and gives the group up.
        cluster.broker(coordinator).start()
        cluster.wait_for(lambda s: coordinator in s.isr_of("__consumer_offsets", index), 60, "it caught up")
        assert _offset_fetch_error(cluster.broker(coordinator).bootstrap) == ErrorCode.NOT_COORDINATOR
