"""CreateTopics (key 19): partitions, replication factor or manual replica assignment, configs; the rules
live in cluster/admin.py (a single node takes replication factor -1 or 1 only)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from eoslog.cluster.topic_configs import describe_topic_configs
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.messages import CreateTopicsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import CreateTopicsRequest

ZERO_UUID = uuid.UUID(int=0)
API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7

Result = CreateTopicsResponse.CreatableTopicResult
ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs


async def _create(context, request):
    registry = context.registry
    results = []
    # CREATE on the cluster covers every topic; otherwise CREATE on the topic itself (Kafka's rule).
    on_cluster = context.authorize(AclOperation.CREATE, ResourceType.CLUSTER)
    for topic in request.topics:
        try:
            if not on_cluster:
                context.require(AclOperation.CREATE, ResourceType.TOPIC, topic.name)
            configs = {c.name: c.value for c in topic.configs if c.value is not None}
            assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
            info, factor = await registry.admin.create_topic(
                topic.name, topic.num_partitions, topic.replication_factor, assignments, configs,
                validate_only=request.validate_only, timeout_s=max(request.timeout_ms, 0) / 1000)
        except Exception as exc:  # noqa: BLE001 - per-topic outcome, mapped in one place
            results.append(Result(name=topic.name, topic_id=ZERO_UUID, error_code=int(error_code_for(exc)),
                                  error_message=str(exc), num_partitions=-1, replication_factor=-1, configs=None))
            continue
        results.append(Result(
            name=info.name, topic_id=info.topic_id, error_code=0, error_message=None,
            num_partitions=info.partitions, replication_factor=factor,
            configs=[ConfigEntry(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
                     for name, value, source in describe_topic_configs(registry, info)],
        ))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def handle(context: RequestContext, request: CreateTopicsRequest):
    return _create(context, request)
