"""What the share coordinator's APIs (keys 83-87, KIP-932) share: brokers call them (the share-partition
manager's Persister on a cluster, issue 37 step 4), so each needs CLUSTER_ACTION on the cluster, as in
Kafka; every partition of the request is one call to the share coordinator (coordinator/share/shard.py),
run together, and answered in request order with its own error.

The response shapes differ only in the partition result, so each handler gives ``partition_result(data,
answer)``; a refusal of the whole request answers every partition with it (``refuse``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from eoslog.cluster.topics import SHARE_GROUP_STATE
from eoslog.coordinator.share.shard import ShareAnswer
from eoslog.protocol.errors import CoordinatorNotAvailableError, ErrorCode
from eoslog.security.acl import AclOperation, ResourceType


def shard(context: Any):
    context.require(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    coordinators = context.services.coordinators
    coordinators.ensure_topic(SHARE_GROUP_STATE)
    return coordinators.shares


async def per_partition(context: Any, request: Any, response_type: Any, operate: Callable[..., Any],
                        partition_result: Callable[[Any, ShareAnswer], Any]) -> Any:
    """``operate(shard, topic_id, partition data)`` for each partition (an awaitable ShareAnswer)."""
    result_type = _result_type(response_type)
    if not request.group_id:
        return refuse(request, response_type, partition_result, ErrorCode.INVALID_REQUEST, "GroupId must be given")
    try:
        coordinator = shard(context)
    except CoordinatorNotAvailableError as exc:
        return refuse(request, response_type, partition_result, ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc))
    calls = [(topic, data) for topic in request.topics for data in topic.partitions]
    answers = await asyncio.gather(*(operate(coordinator, topic.topic_id, data) for topic, data in calls))
    results, index = [], 0
    for topic in request.topics:
        partitions = []
        for data in topic.partitions:
            partitions.append(partition_result(data, answers[index]))
            index += 1
        results.append(result_type(topic_id=topic.topic_id, partitions=partitions))
    return response_type(results=results)


def refuse(request: Any, response_type: Any, partition_result: Callable[[Any, ShareAnswer], Any],
           code: ErrorCode, message: str | None = None) -> Any:
    answer = ShareAnswer(code, message)
    return response_type(results=[_result_type(response_type)(
        topic_id=topic.topic_id, partitions=[partition_result(data, answer) for data in topic.partitions])
        for topic in request.topics])


def _result_type(response_type: Any) -> Any:
    (name,) = [n for n in response_type.STRUCTS if n.endswith("Result") and n != "PartitionResult"]
    return getattr(response_type, name)
