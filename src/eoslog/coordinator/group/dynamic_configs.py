"""Group-level configs (KIP-848, KIP-932): Kafka's GROUP config resource (DescribeConfigs and
IncrementalAlterConfigs, resource type 32), names, defaults and checks, without I/O.

A group config overrides, for one group, the broker setting it is named after:

| group config                    | broker default                        | checked against                             |
|---------------------------------|---------------------------------------|---------------------------------------------|
| consumer.session.timeout.ms     | group.consumer.session.timeout.ms     | at least 1, above the heartbeat interval     |
| consumer.heartbeat.interval.ms  | group.consumer.heartbeat.interval.ms  | at least 1                                  |
| share.session.timeout.ms        | group.share.session.timeout.ms        | group.share.{min,max}.session.timeout.ms    |
| share.heartbeat.interval.ms     | group.share.heartbeat.interval.ms     | group.share.{min,max}.heartbeat.interval.ms |
| share.record.lock.duration.ms   | group.share.record.lock.duration.ms   | group.share.{min,max}.record.lock.duration.ms |
| share.delivery.count.limit      | group.share.delivery.count.limit      | 2 to 10 (Kafka's bounds)                    |
| share.auto.offset.reset         | latest                                | latest, earliest or by_duration:<ISO 8601>  |
| share.isolation.level           | read_uncommitted                      | read_committed or read_uncommitted          |

An unknown name is refused with the closest known one; a value out of range with the rule it breaks
(InvalidConfigError, INVALID_CONFIG on the wire). Where eoslog differs: eoslog has no Kafka Streams groups,
so the ``streams.*`` group configs are unknown names here; and it has no consumer-group heartbeat and
session bounds as broker settings, so the consumer ones are only checked against each other.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from typing import NamedTuple

from eoslog.coordinator.group.config import GroupConfig
from eoslog.protocol.errors import InvalidConfigError

INT, STRING = 3, 2  # DescribeConfigs config types

# name -> DescribeConfigs config type
GROUP_CONFIGS: dict[str, int] = {
    "consumer.session.timeout.ms": INT,
    "consumer.heartbeat.interval.ms": INT,
    "share.session.timeout.ms": INT,
    "share.heartbeat.interval.ms": INT,
    "share.record.lock.duration.ms": INT,
    "share.delivery.count.limit": INT,
    "share.auto.offset.reset": STRING,
    "share.isolation.level": STRING,
}
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
MIN_DELIVERY_COUNT_LIMIT, MAX_DELIVERY_COUNT_LIMIT = 2, 10


class ShareLimits(NamedTuple):
    """The broker's share-group settings that group configs default to or are bounded by
    (group.share.*); the session and heartbeat ones are in GroupConfig."""

    record_lock_duration_ms: int = 30_000
    min_record_lock_duration_ms: int = 15_000
    max_record_lock_duration_ms: int = 60_000
    delivery_count_limit: int = 5


def broker_defaults(config: GroupConfig, share: ShareLimits) -> dict[str, str]:
    """What every group config is when a group does not set it."""
    return {
        "consumer.session.timeout.ms": str(config.consumer_session_timeout_ms),
        "consumer.heartbeat.interval.ms": str(config.consumer_heartbeat_interval_ms),
        "share.session.timeout.ms": str(config.share_session_timeout_ms),
        "share.heartbeat.interval.ms": str(config.share_heartbeat_interval_ms),
        "share.record.lock.duration.ms": str(share.record_lock_duration_ms),
        "share.delivery.count.limit": str(share.delivery_count_limit),
        "share.auto.offset.reset": "latest",
        "share.isolation.level": READ_UNCOMMITTED,
    }


# The group configs the group coordinator reads, and the GroupConfig attribute each overrides.
COORDINATOR_FIELDS = {
    "consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
    "share.session.timeout.ms": "share_session_timeout_ms",
    "share.heartbeat.interval.ms": "share_heartbeat_interval_ms",
}


def group_config_for(base: GroupConfig, overrides: Mapping[str, str]) -> GroupConfig:
    """The group coordinator's settings for one group: ``base`` with the group's own configs over it
    (``base`` again if they no longer fit it, say after the broker's bounds changed)."""
    fields = {attribute: int(overrides[name]) for name, attribute in COORDINATOR_FIELDS.items() if name in overrides}
    if not fields:
        return base
    try:
        return dataclasses.replace(base, **fields)
    except ValueError:
        return base


def check_names(names) -> None:
    for name in names:
        if name not in GROUP_CONFIGS:
            close = difflib.get_close_matches(name, GROUP_CONFIGS, n=1, cutoff=0.6)
            raise InvalidConfigError(f"unknown group config {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""))


def validate(overrides: Mapping[str, str], config: GroupConfig, share: ShareLimits) -> dict[str, str]:
    """The group's configs after a change (only what it sets), checked as Kafka's GroupConfig.validate
    does; returns them normalized (integers without spaces, the lower-case spellings)."""
    check_names(overrides)
    out: dict[str, str] = {}
    for name, value in overrides.items():
        if GROUP_CONFIGS[name] == INT:
            out[name] = str(_int(name, value))
        elif name == "share.auto.offset.reset":
            auto_offset_reset(value)
            out[name] = value.strip().lower()
        else:
            lowered = value.strip().lower()
            if lowered not in (READ_COMMITTED, READ_UNCOMMITTED):
                raise InvalidConfigError(f"{name} must be {READ_COMMITTED} or {READ_UNCOMMITTED}, got {value!r}")
            out[name] = lowered
    effective = {**broker_defaults(config, share), **out}
    numbers = {name: int(v) for name, v in effective.items() if GROUP_CONFIGS[name] == INT}
    _between(numbers, "share.session.timeout.ms", config.share_min_session_timeout_ms,
             config.share_max_session_timeout_ms, "group.share.min.session.timeout.ms",
             "group.share.max.session.timeout.ms")
    _between(numbers, "share.heartbeat.interval.ms", config.share_min_heartbeat_interval_ms,
             config.share_max_heartbeat_interval_ms, "group.share.min.heartbeat.interval.ms",
             "group.share.max.heartbeat.interval.ms")
    _between(numbers, "share.record.lock.duration.ms", share.min_record_lock_duration_ms,
             share.max_record_lock_duration_ms, "group.share.min.record.lock.duration.ms",
             "group.share.max.record.lock.duration.ms")
    _between(numbers, "share.delivery.count.limit", MIN_DELIVERY_COUNT_LIMIT, MAX_DELIVERY_COUNT_LIMIT,
             str(MIN_DELIVERY_COUNT_LIMIT), str(MAX_DELIVERY_COUNT_LIMIT))
    for prefix in ("consumer", "share"):
        session, heartbeat = numbers[f"{prefix}.session.timeout.ms"], numbers[f"{prefix}.heartbeat.interval.ms"]
        if session <= heartbeat:
            raise InvalidConfigError(f"{prefix}.session.timeout.ms must be greater than {prefix}.heartbeat.interval.ms")
    return out


def _int(name: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise InvalidConfigError(f"{name} must be an integer, got {value!r}") from None
    if number < 1:
        raise InvalidConfigError(f"{name} must be at least 1, got {number}")
    return number


def _between(numbers: dict[str, int], name: str, low: int, high: int, low_name: str, high_name: str) -> None:
    if numbers[name] < low:
        raise InvalidConfigError(f"{name} must be greater than or equal to {low_name} ({low})")
    if numbers[name] > high:
        raise InvalidConfigError(f"{name} must be less than or equal to {high_name} ({high})")


# ---- share.auto.offset.reset ---------------------------------------------------------------------------

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


class AutoOffsetReset(NamedTuple):
    """share.auto.offset.reset: ``strategy`` is earliest, latest or by_duration (``duration_ms`` back)."""

    strategy: str
    duration_ms: int = 0


def auto_offset_reset(value: str) -> AutoOffsetReset:
    """Kafka's ShareGroupAutoOffsetResetStrategy: ``earliest``, ``latest``, or ``by_duration:PnDTnHnMn.nS``
    (Java's Duration format, not negative)."""
    text = value.strip().lower()
    if text in ("earliest", "latest"):
        return AutoOffsetReset(text)
    if text.startswith("by_duration:"):
        match = _DURATION.match(text.split(":", 1)[1].strip().upper())
        if match and any(match.groups()):
            days, hours, minutes, seconds = match.groups()
            ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
            return AutoOffsetReset("by_duration", ms + round(float(seconds or 0) * 1000))
        raise InvalidConfigError(f"share.auto.offset.reset {value!r}: the duration must be ISO 8601, "
                                 "as PnDTnHnMn.nS, and not negative")
    raise InvalidConfigError(f"share.auto.offset.reset must be earliest, latest or by_duration:<duration>, "
                             f"got {value!r}")
