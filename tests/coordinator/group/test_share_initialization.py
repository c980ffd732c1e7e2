"""coordinator/group/share_initialization.py: which share partitions are initialized, initializing, planned
and retried (Kafka's ShareGroupStatePartitionMetadata rules), and coordinator/group/dynamic_configs.py:
the group configs' checks and share.auto.offset.reset's forms. Pure cores, no broker."""

from __future__ import annotations

import uuid

import pytest

from eoslog.coordinator.group import GroupConfig
from eoslog.coordinator.group.dynamic_configs import (
    AutoOffsetReset,
    ShareLimits,
    auto_offset_reset,
    group_config_for,
    validate,
)
from eoslog.coordinator.group.share_assignor import TopicMetadata
from eoslog.coordinator.group.share_initialization import (
    UNINITIALIZED_START_OFFSET,
    InitializeItem,
    ShareStatePartitions,
)
from eoslog.protocol.errors import InvalidConfigError

T = uuid.UUID(int=7)


def topics(partitions: int = 2) -> dict[str, TopicMetadata]:
    return {"t": TopicMetadata(T, partitions)}


def test_a_new_topic_is_planned_once_with_an_unknown_start_offset():
    state = ShareStatePartitions()
    assert state.plan(topics(), ["t"], now_ms=100, retry_interval_ms=30_000) \
        == (InitializeItem(T, "t", frozenset({0, 1}), UNINITIALIZED_START_OFFSET),)
    assert not state.is_initialized(T, 0)
    assert state.plan(topics(), ["t"], now_ms=200, retry_interval_ms=30_000) == ()  # still initializing
    assert state.with_state() == {T: frozenset({0, 1})}  # what a deletion must delete already


def test_answers_move_partitions_to_initialized_or_back_to_planning():
    state = ShareStatePartitions()
    state.plan(topics(), ["t"], now_ms=100, retry_interval_ms=30_000)
    assert state.completed({T: [0]}, {T: [1]}, {T: "t"}, now_ms=150)
    assert state.is_initialized(T, 0) and not state.is_initialized(T, 1)
    # the failed one is planned again by the next heartbeat, and a topic it already had starts at 0
    assert state.plan(topics(), ["t"], now_ms=200, retry_interval_ms=30_000) == (InitializeItem(T, "t", frozenset({1}), 0),)
    assert not state.completed({}, {}, {}, now_ms=250)  # nothing new initialized: no epoch bump


def test_a_lost_initialization_is_retried_after_the_interval_and_new_partitions_join():
    state = ShareStatePartitions()
    state.plan(topics(), ["t"], now_ms=100, retry_interval_ms=1000)
    assert state.plan(topics(), ["t"], now_ms=1099, retry_interval_ms=1000) == ()
    assert state.plan(topics(), ["t"], now_ms=1100, retry_interval_ms=1000)[0].partitions == frozenset({0, 1})
    state.completed({T: [0, 1]}, {}, {T: "t"}, now_ms=1200)
    assert state.plan(topics(3), ["t"], now_ms=1300, retry_interval_ms=1000) == (InitializeItem(T, "t", frozenset({2}), 0),)


def test_an_initialization_read_back_from_the_log_is_retried_at_once():
    from eoslog.coordinator.group.share_log_format import (
        _read_state_partitions,
        state_partition_metadata_value,
    )

    sent = ShareStatePartitions()
    sent.plan(topics(), ["t"], now_ms=100, retry_interval_ms=30_000)
    # The coordinator that sent it is gone with its request (a restart, a failover): its successor loads
    # the group's records and must not wait out the retry interval before the group's consumers get records.
    loaded = _read_state_partitions(state_partition_metadata_value(sent))
    assert loaded.initializing == sent.initializing
    assert loaded.plan(topics(), ["t"], now_ms=200, retry_interval_ms=30_000) \
        == (InitializeItem(T, "t", frozenset({0, 1}), UNINITIALIZED_START_OFFSET),)
    # Sent again from here: from now on it waits for its answer or the interval, as any other.
    assert loaded.plan(topics(), ["t"], now_ms=300, retry_interval_ms=30_000) == ()


def test_a_deleted_topic_is_forgotten_and_unsubscribed_topics_are_not_planned():
    state = ShareStatePartitions()
    state.plan(topics(), ["t"], now_ms=100, retry_interval_ms=30_000)
    state.completed({T: [0, 1]}, {}, {T: "t"}, now_ms=150)
    assert state.plan({}, ["t"], now_ms=200, retry_interval_ms=30_000) == ()
    assert state.is_empty()
    assert state.plan(topics(), [], now_ms=300, retry_interval_ms=30_000) == ()


@pytest.mark.parametrize(("value", "expected"), [
    ("latest", AutoOffsetReset("latest")), (" EARLIEST ", AutoOffsetReset("earliest")),
    ("by_duration:PT1.5S", AutoOffsetReset("by_duration", 1500)),
    ("by_duration:P1DT2H3M4S", AutoOffsetReset("by_duration", ((24 + 2) * 60 + 3) * 60_000 + 4000)),
])
def test_auto_offset_reset_forms(value, expected):
    assert auto_offset_reset(value) == expected


@pytest.mark.parametrize("value", ["by_duration:", "by_duration:-PT1S", "by_duration:1h", "yesterday", "none"])
def test_auto_offset_reset_refusals(value):
    with pytest.raises(InvalidConfigError, match="share.auto.offset.reset"):
        auto_offset_reset(value)


def test_group_configs_are_checked_against_the_broker_bounds():
    config, limits = GroupConfig(), ShareLimits()
    assert validate({"share.isolation.level": " Read_Committed", "share.record.lock.duration.ms": " 20000"},
                    config, limits) == {"share.isolation.level": "read_committed",
                                        "share.record.lock.duration.ms": "20000"}
    refusals = {
        "share.record.lock.duration.ms": ("14999", "group.share.min.record.lock.duration.ms"),
        "share.delivery.count.limit": ("11", "less than or equal"),
        "share.session.timeout.ms": ("70000", "group.share.max.session.timeout.ms"),
        "consumer.heartbeat.interval.ms": ("50000", "greater than consumer.heartbeat.interval.ms"),
        "share.isolation.level": ("serializable", "read_committed"),
        "share.auto.offset.reset": ("nowhere", "earliest"),
        "consumer.session.timeout.ms": ("0", "at least 1"),
    }
    for name, (value, reason) in refusals.items():
        with pytest.raises(InvalidConfigError, match=reason):
            validate({name: value}, config, limits)
    with pytest.raises(InvalidConfigError, match="did you mean 'share.isolation.level'"):
        validate({"share.isolation.levle": "read_committed"}, config, limits)


def test_a_groups_configs_override_the_coordinators_settings():
    base = GroupConfig()
    own = group_config_for(base, {"consumer.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "6000"})
    assert own.consumer_session_timeout_ms == 60_000 and own.share_heartbeat_interval_ms == 6000
    assert group_config_for(base, {"share.isolation.level": "read_committed"}) is base
