import pytest

from eoslog.log import InvalidConfigError, LogConfig, TimestampType


def test_defaults_are_kafkas():
    config = LogConfig()
    assert config.segment_bytes == 1 << 30
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes == -1
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10 * 1024 * 1024
    assert config.file_delete_delay_ms == 60_000
    assert config.fsync_on_ack is True
    assert config.message_timestamp_type is TimestampType.CREATE_TIME
    assert config.cleanup_policy == frozenset({"delete"})


def test_from_properties_maps_kafka_names():
    config = LogConfig.from_properties(
        {
            "segment.bytes": "1048576",
            "segment.ms": "60000",
            "retention.ms": "-1",
            "retention.bytes": "5000000",
            "index.interval.bytes": "100",
            "segment.index.bytes": "1200",
            "flush.messages": "10",
            "flush.ms": "1000",
            "message.timestamp.type": "LogAppendTime",
            "max.message.bytes": "2000000",
            "file.delete.delay.ms": "0",
            "cleanup.policy": "compact,delete",
            "eoslog.fsync.on.ack": "false",
            "min.insync.replicas": "2",  # someone else's: accepted, ignored
        }
    )
    assert config.segment_bytes == 1048576 and config.segment_ms == 60000
    assert config.retention_ms == -1 and config.retention_bytes == 5000000
    assert config.index_interval_bytes == 100 and config.segment_index_bytes == 1200
    assert config.max_index_entries == 150 and config.max_time_index_entries == 100
    assert config.flush_messages == 10 and config.flush_ms == 1000
    assert config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
    assert config.max_message_bytes == 2000000 and config.file_delete_delay_ms == 0
    assert config.cleanup_policy == frozenset({"compact", "delete"}) and config.deletes
    assert config.fsync_on_ack is False
    assert LogConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    "name, value",
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", "10"),
        ("retention.ms", "-2"),
        ("message.timestamp.type", "WallClock"),
        ("cleanup.policy", "shred"),
        ("cleanup.policy", "delete,shred"),
        ("flush.messages", "0"),
        ("eoslog.fsync.on.ack", "yes"),
        ("segment.bytes", str(1 << 31)),
        ("no.such.config", "1"),
    ],
)
def test_validation_errors_name_the_property(name, value):
    with pytest.raises(InvalidConfigError) as caught:
        LogConfig.from_properties({name: value})
    assert name in str(caught.value)
    assert caught.value.name == name


def test_an_empty_cleanup_policy_neither_deletes_nor_compacts():
    """As Kafka's ValidList allows (issue 41: confluent-kafka-python's suite SUBTRACTs the only policy)."""
    config = LogConfig.from_properties({"cleanup.policy": ""})
    assert config.cleanup_policy == frozenset() and not config.deletes and not config.compacts
    assert config.to_properties()["cleanup.policy"] == ""


def test_unknown_names_pass_when_not_strict():
    assert LogConfig.from_properties({"no.such.config": "1"}, strict=False) == LogConfig()


def test_direct_construction_is_validated_too():
    with pytest.raises(InvalidConfigError, match="index.interval.bytes"):
        LogConfig(index_interval_bytes=-1)
