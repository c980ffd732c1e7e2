"""DescribeConfigs (key 32) for topics, for this broker (server/broker_configs.py) and for groups
(api/_group_configs.py).

A broker resource named by another broker's id is refused as Kafka refuses it (INVALID_REQUEST): clients
send it to that broker. The cluster-wide default resource ("") lists the dynamic default configs set, as
in Kafka (server/dynamic_broker_configs.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_configs import GROUP, describe_group
from eoslog.cluster.topic_configs import TOPIC_CONFIGS, describe_topic_configs
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import InvalidRequestError
from eoslog.protocol.messages import DescribeConfigsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DescribeConfigsRequest

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4
TOPIC = 2
BROKER = 4
DEFAULT_CONFIG = 5

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult


def _broker_entries(services, resource, request) -> list:
    described = services.broker_configs.describe(resource.resource_name, resource.configuration_keys,
                                                 request.include_synonyms)
    Synonym = DescribeConfigsResponse.DescribeConfigsSynonym
    return [
        Entry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
              is_default=e.source == DEFAULT_CONFIG, is_sensitive=e.sensitive,
              synonyms=[Synonym(name=s.name, value=s.value, source=s.source) for s in e.synonyms],
              config_type=e.config_type,
              documentation=e.documentation if request.include_documentation else None)
        for e in described
    ]


def handle(context: RequestContext, request: DescribeConfigsRequest):
    services = context.services
    results = []
    for resource in request.resources:
        try:
            if resource.resource_type == TOPIC:
                context.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, resource.resource_name)
                info = services.registry.topics.require(resource.resource_name)
                wanted = set(resource.configuration_keys) if resource.configuration_keys is not None else None
                configs = [
                    Entry(name=name, value=value, read_only=False, config_source=source,
                          is_default=source != 1, is_sensitive=False, synonyms=[],
                          config_type=TOPIC_CONFIGS[name][1], documentation=None)
                    for name, value, source in describe_topic_configs(services.registry, info)
                    if wanted is None or name in wanted
                ]
            elif resource.resource_type == BROKER:
                context.require(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
                configs = _broker_entries(services, resource, request)
            elif resource.resource_type == GROUP:
                configs = [Entry(name=name, value=value, read_only=False, config_source=source,
                                 is_default=source == DEFAULT_CONFIG, is_sensitive=False, synonyms=[],
                                 config_type=config_type, documentation=None)
                           for name, value, source, config_type in describe_group(context, resource)]
            else:
                raise InvalidRequestError(f"resource type {resource.resource_type} is not supported")
            results.append(Result(error_code=0, error_message=None, resource_type=resource.resource_type,
                                  resource_name=resource.resource_name, configs=configs))
        except Exception as exc:  # noqa: BLE001
            results.append(Result(error_code=int(error_code_for(exc)), error_message=str(exc),
                                  resource_type=resource.resource_type, resource_name=resource.resource_name,
                                  configs=[]))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
