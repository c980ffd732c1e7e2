"""The share coordinator as the broker registers it (server/broker.py): Kafka's share.coordinator.* properties,
the ``shares`` shortcut, and ``__share_group_state`` created as the share coordinator needs it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from eoslog.coordinator.share.config import ShareCoordinatorConfig
from eoslog.coordinator.share.log_format import StateBatch
from eoslog.protocol.errors import ErrorCode
from eoslog.security.properties import ConfigError
from eoslog.server.broker_configs import describe_broker_configs
from eoslog.server.config import BrokerConfig

KAFKA_DEFAULTS = {
    "share.coordinator.state.topic.num.partitions": "50",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "share.coordinator.state.topic.segment.bytes": "104857600",
    "share.coordinator.snapshot.update.records.per.snapshot": "500",
    "share.coordinator.state.topic.prune.interval.ms": "300000",
    "share.coordinator.cold.partition.snapshot.interval.ms": "300000",
}


def test_the_properties_have_kafkas_names_and_defaults_and_are_described():
    described = {e.name: e.value for e in describe_broker_configs(BrokerConfig()) if e.name.startswith("share.")}
    assert described == KAFKA_DEFAULTS
    config = BrokerConfig()
    config.apply_properties({"share.coordinator.snapshot.update.records.per.snapshot": "0",
                             "share.coordinator.state.topic.num.partitions": "3"})
    assert (config.share_coordinator_snapshot_update_records_per_snapshot,
            config.share_coordinator_state_topic_num_partitions) == (0, 3)


@pytest.mark.parametrize("name, value", [
    ("share.coordinator.snapshot.update.records.per.snapshot", "501"),  # Kafka's range is 0-500
    ("share.coordinator.snapshot.update.records.per.snapshot", "-1"),
    ("share.coordinator.state.topic.num.partitions", "0"),
    ("share.coordinator.state.topic.prune.interval.ms", "0"),
])
def test_values_outside_kafkas_ranges_are_refused(name, value):
    with pytest.raises(ConfigError):
        BrokerConfig().set_property(name, value)


def test_the_core_config_refuses_what_kafka_refuses():
    with pytest.raises(ValueError):
        ShareCoordinatorConfig(snapshot_update_records_per_snapshot=501)


def test_a_broker_serves_share_state_over_its_own_internal_topic(tmp_path: Path):
    from eoslog.server.broker import Broker

    async def scenario():
        config = BrokerConfig(data_dir=tmp_path, listen_host="127.0.0.1", listen_port=0)
        config.apply_properties({"share.coordinator.state.topic.num.partitions": "3",
                                 "share.coordinator.snapshot.update.records.per.snapshot": "1"})
        broker = Broker(config)
        await broker.start()
        try:
            topic = broker.registry.create_topic("t", 2)
            shares = broker.coordinators.shares
            assert (await shares.initialize_state("g", topic.topic_id, 1, state_epoch=1, start_offset=0)).error \
                is ErrorCode.NONE
            # a topic partition the broker does not have is Kafka's UNKNOWN_TOPIC_OR_PARTITION
            missing = await shares.initialize_state("g", uuid.uuid4(), 0, state_epoch=1, start_offset=0)
            assert missing.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert (await shares.initialize_state("g", topic.topic_id, 2, state_epoch=1, start_offset=0)).error \
                is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            for i in range(3):
                written = await shares.write_state("g", topic.topic_id, 1, state_epoch=1, leader_epoch=0,
                                                   start_offset=-1, state_batches=[StateBatch(i, i, 2, 1)])
                assert written.error is ErrorCode.NONE
            summary = await shares.read_state_summary("g", topic.topic_id, 1)
            assert (summary.state.state_epoch, summary.state.snapshot_epoch) == (1, 1)
            info = broker.registry.topics.get("__share_group_state")
            assert info.partitions == 3 and info.configs["cleanup.policy"] == "delete"
            assert not broker.registry.log_config_for(info).compacts
        finally:
            await broker.stop()

    asyncio.run(scenario())
