"""AlterConfigs (key 33), the older whole-set form of IncrementalAlterConfigs that confluent-kafka's and
kafka-python's ``alter_configs`` still send: a topic's configs become exactly the ones given (a config left
out returns to its default, as in Kafka); a broker resource is refused as IncrementalAlterConfigs refuses it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api.incremental_alter_configs import alter_each
from eoslog.cluster.topic_configs import check_names
from eoslog.protocol.errors import InvalidRequestError
from eoslog.protocol.messages import AlterConfigsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import AlterConfigsRequest

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2
TOPIC, BROKER = 2, 4

Result = AlterConfigsResponse.AlterConfigsResourceResponse


def _configs(resource) -> dict[str, str]:
    configs = {}
    for config in resource.configs:
        if config.value is None:  # Kafka's words: a whole-set alter has no "delete"; leave the name out
            raise InvalidRequestError(f"Null value not supported for : {config.name}")
        configs[config.name] = config.value
    return configs


async def _alter(context, request):
    registry = context.registry

    async def alter_one(resource) -> None:
        if resource.resource_type == BROKER:
            broker_configs = context.services.broker_configs
            context.require(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
            own = broker_configs.is_own(resource.resource_name)
            configs = _configs(resource)
            broker_configs.check_alterable(configs, cluster_default=not own)
            await broker_configs.alter(not own, lambda _current, wanted=configs: dict(wanted), request.validate_only)
        elif resource.resource_type != TOPIC:
            raise InvalidRequestError(f"only topic configs can be altered (resource type {resource.resource_type})")
        else:
            context.require(AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, resource.resource_name)
            info = registry.topics.require(resource.resource_name)
            configs = _configs(resource)
            check_names(configs)
            registry.check_topic_configs(configs)
            if not request.validate_only:
                await registry.admin.alter_configs(info.name, configs)

    results = await alter_each(request.resources, Result, alter_one)
    return AlterConfigsResponse(throttle_time_ms=0, responses=results)


def handle(context: RequestContext, request: AlterConfigsRequest):
    return _alter(context, request)
