"""ListConfigResources (key 74), v0-1 (KIP-1142, Kafka 4.1): the config resources a client may describe,
by type. v0 was KIP-714's ListClientMetricsResources and lists client-metrics subscriptions only.

Kafka's rules kept here: DescribeConfigs on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED; an empty type
list means every type Kafka supports (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP); a type outside
those fails the whole request with UNSUPPORTED_VERSION; rows come in Kafka's type order (groups, client
metrics, broker loggers, brokers, topics), whatever order the request names the types in.

What eoslog lists of each: every topic, internal ones too; the live brokers on the request's listener;
the groups with configs of their own (cluster/group_configs.py), as Kafka lists them. Two types are
accepted and always empty, because eoslog has no such resources (DescribeConfigs refuses both): client
metrics subscriptions (KIP-714 telemetry is not served) and broker loggers (docs/clients.md says why).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import ListConfigResourcesResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from collections.abc import Iterable

    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ListConfigResourcesRequest

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
KAFKA_ORDER = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)  # Kafka's listing order; also what it supports

Resource = ListConfigResourcesResponse.ConfigResource


def list_resources(version: int, requested: Iterable[int], names_of: dict[int, Iterable[str]]
                   ) -> tuple[ErrorCode, list[Resource]]:
    """The answer to a request for ``requested`` types at ``version``; ``names_of[type]`` are the
    resources eoslog has of each type (a type missing from it has none)."""
    requested = set(requested)
    if version == 0:
        wanted = {CLIENT_METRICS}
    elif not requested:
        wanted = set(KAFKA_ORDER)
    elif not requested <= set(KAFKA_ORDER):
        return ErrorCode.UNSUPPORTED_VERSION, []
    else:
        wanted = requested
    resources = [Resource(resource_name=name, resource_type=resource_type)
                 for resource_type in KAFKA_ORDER if resource_type in wanted
                 for name in names_of.get(resource_type, ())]
    return ErrorCode.NONE, resources


def handle(context: RequestContext, request: ListConfigResourcesRequest):
    context.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
    services = context.services
    group_configs = services.group_configs
    names_of = {
        GROUP: group_configs.groups() if group_configs is not None else [],
        BROKER: [str(b.node_id) for b in sorted(services.metadata.brokers(context.listener_name))],
        TOPIC: sorted(services.registry.topics.topics),
    }
    error, resources = list_resources(context.api_version, request.resource_types, names_of)
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=int(error), config_resources=resources)


def error_response(context: RequestContext, request: ListConfigResourcesRequest, code: ErrorCode):
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=int(code), config_resources=[])
