"""The GROUP config resource (resource type 32, KIP-848 / KIP-932) of DescribeConfigs and
IncrementalAlterConfigs: a group's own configs over the broker's defaults (coordinator/group/
dynamic_configs.py names and checks them; cluster/group_configs.py keeps them durably).

As Kafka's: DESCRIBE_CONFIGS / ALTER_CONFIGS on the group; a group need not exist to be configured; an
empty group id is INVALID_REQUEST; an unknown name is INVALID_CONFIG naming the closest known one; SET and
DELETE only (no group config is a list)."""

from __future__ import annotations

from typing import Any

from eoslog.api._group_common import group_coordinator
from eoslog.coordinator.group.dynamic_configs import GROUP_CONFIGS, broker_defaults, check_names, validate
from eoslog.protocol.errors import InvalidConfigError, InvalidRequestError
from eoslog.security.acl import AclOperation, ResourceType

GROUP = 32
SET, DELETE = 0, 1
DYNAMIC_GROUP_CONFIG, DEFAULT_CONFIG = 8, 5  # DescribeConfigs config sources (Kafka's ConfigSource)


def _settings(context: Any):
    shard = group_coordinator(context)
    return shard.core.config, shard.share_limits


def _group_id(resource: Any) -> str:
    if not resource.resource_name:
        raise InvalidRequestError("a group config resource needs a group id")
    return resource.resource_name


def describe_group(context: Any, resource: Any) -> list[tuple[str, str, int, int]]:
    """(name, value, source, config type) of every group config, or of the keys asked for."""
    group_id = _group_id(resource)
    context.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.GROUP, group_id)
    config, limits = _settings(context)
    own = context.services.group_configs.get(group_id)
    defaults = broker_defaults(config, limits)
    wanted = resource.configuration_keys
    names = sorted(GROUP_CONFIGS) if wanted is None else [n for n in wanted if n in GROUP_CONFIGS]
    return [(name, own[name], DYNAMIC_GROUP_CONFIG, GROUP_CONFIGS[name]) if name in own
            else (name, defaults[name], DEFAULT_CONFIG, GROUP_CONFIGS[name]) for name in names]


async def alter_group(context: Any, resource: Any, validate_only: bool) -> None:
    """IncrementalAlterConfigs of one group: checked whole, then written durably, then in force."""
    group_id = _group_id(resource)
    context.require(AclOperation.ALTER_CONFIGS, ResourceType.GROUP, group_id)
    check_names([op.name for op in resource.configs])
    for op in resource.configs:
        if op.config_operation == SET and op.value is None:
            raise InvalidConfigError(f"SET {op.name} needs a value")
        if op.config_operation not in (SET, DELETE):
            raise InvalidConfigError(f"{op.name}: group configs take SET and DELETE only (none is a list)")
    config, limits = _settings(context)
    store = context.services.group_configs

    def change(current: dict[str, str]) -> dict[str, str]:  # to what is kept now (another broker may have written)
        configs = dict(current)
        for op in resource.configs:
            if op.config_operation == SET:
                configs[op.name] = op.value
            else:
                configs.pop(op.name, None)
        return validate(configs, config, limits)

    checked = change(store.get(group_id))  # refused before anything is written
    if not validate_only and checked != store.get(group_id):
        await store.alter(group_id, change)
