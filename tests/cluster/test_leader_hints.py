"""KIP-951 on a real cluster: after leadership moves, the old leader refuses a Produce v10+ / Fetch v16+
with NOT_LEADER_OR_FOLLOWER and names the new leader, its epoch and its endpoint; older versions get
no hint; a stale epoch at the leader (FENCED_LEADER_EPOCH) names the leader itself. Responses are read
by our codec and by kafka-python's (an independent reading of the same specs)."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest
from cluster_helpers import create_topic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import codec, messages
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import build_simple
from eoslog.testing.cluster import embedded_cluster

pytestmark = pytest.mark.interop

NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
FENCED = int(ErrorCode.FENCED_LEADER_EPOCH)


def raw_call(bootstrap: str, api_key: int, version: int, request) -> bytes:
    """The response (correlation id, header, body) as the broker sent it."""
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(codec.encode_request(codec.RequestHeader(api_key, version, 1, "hints"), request))
        size = struct.unpack(">i", _read(sock, 4))[0]
        return _read(sock, size)


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """A 2-broker cluster whose partition hints-0 was led by ``old`` and now is led by ``new``."""
    with embedded_cluster(2, tmp_path_factory.mktemp("hints")) as cluster:
        create_topic(cluster, "hints", 1, 2)
        old = cluster.state().leader_of("hints", 0)
        cluster.broker(old).terminate()
        state = cluster.wait_for(lambda s: s.leader_of("hints", 0) not in (-1, old, None), 30, "leadership moved")
        new = state.leader_of("hints", 0)
        cluster.broker(old).start()
        state = cluster.wait_for(lambda s: old in s.isr_of("hints", 0), 60, "the old leader follows again")
        yield cluster, old, new, state.epoch_of("hints", 0)


def produce_request() -> messages.ProduceRequest:
    m = messages.ProduceRequest
    return m(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[m.TopicProduceData(
        name="hints", partition_data=[m.PartitionProduceData(index=0, records=build_simple([b"v"]))])])


def test_produce_v10_names_the_new_leader(moved):
    cluster, old, new, epoch = moved
    body = raw_call(cluster.broker(old).bootstrap, 0, 10, produce_request())
    ours = codec.decode_response(0, 10, body)
    partition = ours.responses[0].partition_responses[0]
    assert partition.error_code == NOT_LEADER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (new, epoch)
    endpoint = cluster.broker(new).bootstrap
    assert [(e.node_id, f"{e.host}:{e.port}") for e in ours.node_endpoints] == [(new, endpoint)]
    from kafka.protocol.producer import ProduceResponse as KpProduceResponse

    theirs = KpProduceResponse.decode(body[5:], version=10)  # after the correlation id and the header tags
    assert theirs.responses[0].partition_responses[0].current_leader.leader_id == new
    assert theirs.node_endpoints[0].node_id == new


def test_produce_v9_gets_no_hint(moved):
    cluster, old, _, _ = moved
    body = raw_call(cluster.broker(old).bootstrap, 0, 9, produce_request())
    partition = codec.decode_response(0, 9, body).responses[0].partition_responses[0]
    assert partition.error_code == NOT_LEADER
    assert body.endswith(b"\x00\x00\x00\x00\x00\x00")  # throttle time 0, then an empty tagged section


def fetch_request(topic_id: uuid.UUID, leader_epoch: int = -1) -> messages.FetchRequest:
    m = messages.FetchRequest
    return m(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[m.FetchTopic(
        topic="hints", topic_id=topic_id, partitions=[m.FetchPartition(
            partition=0, current_leader_epoch=leader_epoch, fetch_offset=0, partition_max_bytes=1 << 20)])])


def topic_id_of(cluster) -> uuid.UUID:
    wire = BrokerConnection.from_bootstrap(cluster.broker(1).bootstrap)
    try:
        m = messages.MetadataRequest
        response = wire.request(3, 13, m(topics=[m.MetadataRequestTopic(name="hints")],
                                         allow_auto_topic_creation=False))
    finally:
        wire.close()
    return response.topics[0].topic_id


def test_fetch_v16_names_the_new_leader_and_v15_does_not(moved):
    cluster, old, new, epoch = moved
    topic_id = topic_id_of(cluster)
    body = raw_call(cluster.broker(old).bootstrap, 1, 16, fetch_request(topic_id))
    response = codec.decode_response(1, 16, body)
    partition = response.responses[0].partitions[0]
    assert response.responses[0].topic_id == topic_id
    assert partition.error_code == NOT_LEADER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (new, epoch)
    assert [(e.node_id, f"{e.host}:{e.port}") for e in response.node_endpoints] == [(new, cluster.broker(new).bootstrap)]
    from kafka.protocol.consumer import FetchResponse as KpFetchResponse

    theirs = KpFetchResponse.decode(body[5:], version=16)
    assert theirs.responses[0].partitions[0].current_leader.leader_epoch == epoch
    older = codec.decode_response(1, 15, raw_call(cluster.broker(old).bootstrap, 1, 15, fetch_request(topic_id)))
    assert older.responses[0].partitions[0].error_code == NOT_LEADER
    assert older.responses[0].partitions[0].current_leader == messages.FetchResponse.LeaderIdAndEpoch()


def test_fetch_v16_with_a_stale_epoch_is_fenced_and_names_the_leader(moved):
    cluster, _, new, epoch = moved
    body = raw_call(cluster.broker(new).bootstrap, 1, 16, fetch_request(topic_id_of(cluster), leader_epoch=epoch - 1))
    response = codec.decode_response(1, 16, body)
    partition = response.responses[0].partitions[0]
    assert partition.error_code == FENCED
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (new, epoch)
    assert [e.node_id for e in response.node_endpoints] == [new]


def test_describe_topic_partitions_on_the_cluster(moved):
    """DescribeTopicPartitions answers from the cluster view, as Metadata does: leader, epoch, replicas, ISR."""
    cluster, old, new, epoch = moved
    d = messages.DescribeTopicPartitionsRequest
    wire = BrokerConnection.from_bootstrap(cluster.broker(old).bootstrap)
    try:
        response = wire.request(75, 0, d(topics=[d.TopicRequest(name="hints")]))
    finally:
        wire.close()
    (topic,) = response.topics
    assert (topic.name, topic.error_code, topic.topic_id) == ("hints", 0, topic_id_of(cluster))
    (partition,) = topic.partitions
    assert (partition.leader_id, partition.leader_epoch) == (new, epoch)
    assert sorted(partition.replica_nodes) == sorted(partition.isr_nodes) == sorted([old, new])
