"""Kafka's ZooKeeper layout: what we write reads back, what Kafka wrote reads, garbage is refused."""

from __future__ import annotations

import json
import uuid

import pytest

from eoslog.cluster.zk import layout
from eoslog.cluster.zk.layout import (
    BrokerRegistration,
    Endpoint,
    LayoutError,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
)


def test_partition_state_round_trip_and_kafka_json():
    state = PartitionState(2, 7, (2, 1, 3), 4, zk_version=9)
    data = state.encode()
    assert json.loads(data) == {"version": 1, "leader": 2, "leader_epoch": 7, "isr": [2, 1, 3], "controller_epoch": 4}
    assert PartitionState.decode("p", data, 9) == state
    kafka = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    assert PartitionState.decode("p", kafka, 0) == PartitionState(1, 0, (1, 2), 1, 0)


def test_topic_assignment_round_trip_with_kafka_topic_id():
    topic_id = uuid.uuid4()
    assignment = TopicAssignment("orders", topic_id, {0: (1, 2), 1: (2, 3)})
    decoded = TopicAssignment.decode("orders", assignment.encode())
    assert decoded == assignment
    kafka = b'{"version":2,"partitions":{"1":[2,1],"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}'
    assert TopicAssignment.decode("t", kafka).replicas == {0: (1, 2), 1: (2, 1)}


def test_broker_registration_reads_kafka_endpoints():
    ours = BrokerRegistration.plaintext(3, "127.0.0.1", 9093, "r1", "/data/3", 1)
    assert BrokerRegistration.decode(3, ours.encode()) == ours
    kafka = json.dumps({"version": 5, "host": None, "port": -1, "endpoints": ["SSL://h:9094"], "rack": None}).encode()
    assert BrokerRegistration.decode(1, kafka).endpoints == (Endpoint("SSL", "SSL", "h", 9094),)


def test_broker_registration_lists_every_listener_as_kafka_does():
    registration = BrokerRegistration(2, (Endpoint("INTERNAL", "SSL", "10.0.0.2", 9094),
                                          Endpoint("EXTERNAL", "PLAINTEXT", "broker2.example.com", 9092),
                                          Endpoint("V6", "SSL", "::1", 9095)), None, "/d", 7)
    written = json.loads(registration.encode())
    assert written["endpoints"] == ["INTERNAL://10.0.0.2:9094", "EXTERNAL://broker2.example.com:9092", "V6://[::1]:9095"]
    assert written["listener_security_protocol_map"] == {"INTERNAL": "SSL", "EXTERNAL": "PLAINTEXT", "V6": "SSL"}
    assert (written["host"], written["port"], written["version"]) == ("broker2.example.com", 9092, 5)
    assert BrokerRegistration.decode(2, registration.encode()) == registration
    assert registration.endpoint("EXTERNAL").port == 9092 and registration.endpoint("CLIENT") is None
    only_tls = json.loads(BrokerRegistration(2, (Endpoint("INTERNAL", "SSL", "h", 1),)).encode())
    assert (only_tls["host"], only_tls["port"]) == (None, -1)


def test_broker_registration_reads_what_we_and_older_kafkas_wrote():
    before = (b'{"endpoints":["PLAINTEXT://127.0.0.1:9092"],"eoslog_data_dir":"/d","host":"127.0.0.1","jmx_port":-1,'
              b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"port":9092,"rack":null,'
              b'"timestamp":"5","version":5}')
    assert BrokerRegistration.decode(1, before) == BrokerRegistration.plaintext(1, "127.0.0.1", 9092, None, "/d", 5)
    version_2 = b'{"version":2,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"]}'
    assert [e.protocol for e in BrokerRegistration.decode(1, version_2).endpoints] == ["PLAINTEXT", "SSL"]
    version_0 = b'{"version":0,"host":"h","port":9092}'
    assert BrokerRegistration.decode(1, version_0).endpoints == (Endpoint("PLAINTEXT", "PLAINTEXT", "h", 9092),)


@pytest.mark.parametrize("data", [b'{"version":5,"host":null,"port":-1,"endpoints":[]}',
                                  b'{"version":5,"endpoints":["nonsense"]}', b'{"version":5,"endpoints":[3]}'])
def test_garbage_registration_is_refused(data):
    with pytest.raises(LayoutError):
        BrokerRegistration.decode(1, data)


def test_producer_id_block_is_kafka_shaped():
    block = ProducerIdBlock(1, 1000, 1999)
    assert json.loads(block.encode()) == {"version": 1, "broker": 1, "block_start": "1000", "block_end": "1999"}
    assert ProducerIdBlock.decode(block.encode()) == block


@pytest.mark.parametrize("data", [b"", b"not json", b"[1]", b'{"leader":1}', b'{"leader":"x","leader_epoch":0,"isr":[],"controller_epoch":1}'])
def test_garbage_state_is_refused(data):
    with pytest.raises(LayoutError):
        PartitionState.decode("p", data, 0)


@pytest.mark.parametrize("data", [b'{"partitions":{"0":[]}}', b'{"partitions":{"1":[1]}}', b'{"partitions":{"0":"x"}}'])
def test_garbage_assignment_is_refused(data):
    with pytest.raises(LayoutError):
        TopicAssignment.decode("t", data)


def test_paths():
    assert layout.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert layout.decode_controller(layout.encode_controller(5)) == 5
    assert layout.decode_controller_epoch(layout.encode_controller_epoch(12)) == 12
