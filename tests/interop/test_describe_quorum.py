"""DescribeQuorum (55) is KRaft's. eoslog's cluster is coordinated by ZooKeeper, and answers as a
ZooKeeper-mode Kafka 3.9 broker does: the API is not in ApiVersions (its listeners are KRaft's broker and
controller, not the ZooKeeper broker), and a request for it anyway closes the connection (Kafka's socket
server refuses an API that is not enabled for its listener type before any handler sees it)."""

from __future__ import annotations

import socket

import pytest
from kafka import KafkaAdminClient
from kafka.errors import IncompatibleBrokerVersion

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import codec, messages
from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop

DESCRIBE_QUORUM = 55


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("quorum") / "data") as running:
        yield running


def test_describe_quorum_is_not_advertised_and_kafka_python_is_told_so(broker):
    with BrokerConnection.from_bootstrap(broker.bootstrap) as wire:
        versions = wire.request(18, 3, messages.ApiVersionsRequest(client_software_name="t",
                                                                   client_software_version="1"))
    assert DESCRIBE_QUORUM not in {k.api_key for k in versions.api_keys}
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(IncompatibleBrokerVersion):
            admin.describe_metadata_quorum()
    finally:
        admin.close()


def test_a_describe_quorum_request_anyway_closes_the_connection(broker):
    Topic = messages.DescribeQuorumRequest.TopicData
    request = messages.DescribeQuorumRequest(topics=[Topic(topic_name="__cluster_metadata", partitions=[
        Topic.PartitionData(partition_index=0)])])
    host, _, port = broker.bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(codec.encode_request(codec.RequestHeader(DESCRIBE_QUORUM, 2, 1, "quorum"), request))
        assert sock.recv(4) == b""  # closed, no response
    # the broker itself is unharmed: the next connection is served
    with BrokerConnection.from_bootstrap(broker.bootstrap) as wire:
        assert wire.request(3, 12, messages.MetadataRequest(topics=[])).brokers
