"""What librdkafka's ShareConsumer (confluent-kafka 2.16) really sends for a share group, captured as it
arrived at an embedded broker (eoslog.testing.request_recorder) and decoded again from its bytes: the
heartbeats that join and leave, the share session's epochs across ShareFetch and ShareAcknowledge, and
the acknowledgement batches that carry ACCEPT, RELEASE and REJECT."""

from __future__ import annotations

import time

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.protocol import codec
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.request_recorder import RequestRecorder

HEARTBEAT, FETCH, ACKNOWLEDGE = 76, 78, 79
CLIENT = "share-capture"


def test_a_share_consumers_requests(tmp_path):
    with EmbeddedBroker(tmp_path, properties={"group.share.min.heartbeat.interval.ms": "200",
                                              "group.share.heartbeat.interval.ms": "200"}) as broker, \
            RequestRecorder() as recorder:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("captured", 1, 1)])["captured"].result(30)
        resource = ConfigResource(ResourceType.GROUP, "cg", incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        producer = Producer({"bootstrap.servers": bootstrap})
        for value in (b"a", b"b", b"c"):
            producer.produce("captured", value=value, partition=0)
        assert producer.flush(30) == 0
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "cg", "client.id": CLIENT,
                                  "share.acknowledgement.mode": "explicit"})
        consumer.subscribe(["captured"])
        types = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.RELEASE, 2: AcknowledgeType.REJECT}
        got, deadline = [], time.monotonic() + 30
        while len(got) < 3:
            assert time.monotonic() < deadline, got
            for message in consumer.poll(0.5) or ():
                assert message.error() is None
                got.append(message.offset())
                consumer.acknowledge(message, types[message.offset()])
        assert all(error is None for error in consumer.commit_sync(30).values())
        consumer.close()
        frames = [r for r in recorder.requests if r.client_id == CLIENT and r.api_key in (HEARTBEAT, FETCH, ACKNOWLEDGE)]
    sent = [(r.api_key, r.api_version, codec.decode_request(r.frame)[1]) for r in frames]  # again, from the bytes

    heartbeats = [request for key, _, request in sent if key == HEARTBEAT]
    assert heartbeats[0].member_epoch == 0 and heartbeats[0].subscribed_topic_names == ["captured"]
    assert heartbeats[0].member_id  # v1: the client names itself
    assert heartbeats[-1].member_epoch == -1  # close leaves the group
    session = [(key, version, request) for key, version, request in sent if key in (FETCH, ACKNOWLEDGE)]
    assert {version for _, version, _ in session} <= {1, 2}
    epochs = [request.share_session_epoch for _, _, request in session]
    assert epochs[0] == 0 and epochs[-1] == -1
    assert epochs[:-1] == list(range(len(epochs) - 1))  # each request the next epoch of the one session
    acknowledged = {}
    for _, _, request in session:
        for topic in request.topics:
            for partition in topic.partitions:
                for batch in partition.acknowledgement_batches or ():
                    kinds = batch.acknowledge_types
                    for offset in range(batch.first_offset, batch.last_offset + 1):
                        acknowledged[offset] = kinds[0] if len(kinds) == 1 else kinds[offset - batch.first_offset]
    assert acknowledged == {0: 1, 1: 2, 2: 3}  # ACCEPT, RELEASE, REJECT as the application chose
