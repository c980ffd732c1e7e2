"""Kafka's ZooKeeper layout: what we write reads back, what Kafka wrote reads, garbage is refused."""

from __future__ import annotations

import json
import uuid

import pytest

from eoslog.cluster.zk import layout
from eoslog.cluster.zk.layout import (
    BrokerRegistration,
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
    ours = BrokerRegistration(3, "127.0.0.1", 9093, "r1", "/data/3", 1)
    assert BrokerRegistration.decode(3, ours.encode()) == ours
    kafka = json.dumps({"version": 5, "host": None, "port": -1, "endpoints": ["SSL://h:9094"], "rack": None}).encode()
    assert (BrokerRegistration.decode(1, kafka).host, BrokerRegistration.decode(1, kafka).port) == ("h", 9094)


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
