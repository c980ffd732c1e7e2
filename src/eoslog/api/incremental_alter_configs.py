"""IncrementalAlterConfigs (key 44) for topic configs (SET, DELETE, APPEND, SUBTRACT) and dynamic broker
configs (SET, DELETE; server/dynamic_broker_configs.py) and group configs (api/_group_configs.py); other broker configs are refused with Kafka's
reason (server/broker_configs.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_configs import GROUP, alter_group
from eoslog.cluster.topic_configs import TOPIC_CONFIGS, check_names
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import InvalidConfigError, InvalidRequestError
from eoslog.protocol.messages import IncrementalAlterConfigsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import IncrementalAlterConfigsRequest

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1
TOPIC = 2
BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


def apply_operations(current: dict[str, str], operations) -> dict[str, str]:
    configs = dict(current)
    for op in operations:
        check_names({op.name: ""})
        if op.config_operation == SET:
            if op.value is None:
                raise InvalidConfigError(f"SET {op.name} needs a value")
            configs[op.name] = op.value
        elif op.config_operation == DELETE:
            configs.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if TOPIC_CONFIGS[op.name][1] != 7:
                raise InvalidConfigError(f"{op.name} is not a list; APPEND and SUBTRACT apply to lists only")
            items = [i for i in configs.get(op.name, TOPIC_CONFIGS[op.name][0]).split(",") if i]
            values = [v for v in (op.value or "").split(",") if v]
            if op.config_operation == APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [i for i in items if i not in values]
            configs[op.name] = ",".join(items)
        else:
            raise InvalidRequestError(f"unknown config operation {op.config_operation}")
    return configs


async def _alter_broker(context, resource, validate_only: bool) -> None:
    """Kafka's order: authorization, the broker id ("" is the cluster-wide default), the names (unknown,
    then static ones), then the values; only dynamic configs change (server/dynamic_broker_configs.py)."""
    broker_configs = context.services.broker_configs
    context.require(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
    own = broker_configs.is_own(resource.resource_name)
    broker_configs.check_alterable([op.name for op in resource.configs], cluster_default=not own)
    if not resource.configs:
        return
    for op in resource.configs:
        if op.config_operation == SET and op.value is None:
            raise InvalidConfigError(f"SET {op.name} needs a value")
        if op.config_operation in (APPEND, SUBTRACT):
            raise InvalidConfigError(f"{op.name} is not a list; APPEND and SUBTRACT apply to lists only")
        if op.config_operation not in (SET, DELETE):
            raise InvalidRequestError(f"unknown config operation {op.config_operation}")

    def change(configs: dict[str, str]) -> dict[str, str]:  # to what is kept now (another broker may have written)
        for op in resource.configs:
            if op.config_operation == SET:
                configs[op.name] = op.value
            else:
                configs.pop(op.name, None)
        return configs

    await broker_configs.alter(not own, change, validate_only)


async def alter_each(resources, result_type, alter_one) -> list:
    """Runs ``alter_one(resource)`` for each resource and answers each with its own outcome (shared with
    AlterConfigs): one resource's refusal never stops the others."""
    results = []
    for resource in resources:
        try:
            await alter_one(resource)
            results.append(result_type(error_code=0, error_message=None, resource_type=resource.resource_type,
                                       resource_name=resource.resource_name))
        except Exception as exc:  # noqa: BLE001 - per-resource outcome, mapped in one place
            results.append(result_type(error_code=int(error_code_for(exc)), error_message=str(exc),
                                       resource_type=resource.resource_type, resource_name=resource.resource_name))
    return results


async def _alter(context, request):
    registry = context.registry

    async def alter_one(resource) -> None:
        if resource.resource_type == BROKER:
            await _alter_broker(context, resource, request.validate_only)
        elif resource.resource_type == GROUP:
            await alter_group(context, resource, request.validate_only)
        elif resource.resource_type != TOPIC:
            raise InvalidRequestError(f"only topic configs can be altered (resource type {resource.resource_type})")
        else:
            context.require(AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, resource.resource_name)
            info = registry.topics.require(resource.resource_name)
            configs = apply_operations(info.configs, resource.configs)
            if not request.validate_only:
                await registry.admin.alter_configs(info.name, configs)

    results = await alter_each(request.resources, Result, alter_one)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=results)


def handle(context: RequestContext, request: IncrementalAlterConfigsRequest):
    return _alter(context, request)
