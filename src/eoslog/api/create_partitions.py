"""CreatePartitions (key 37): grow a topic's partition count."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.messages import CreatePartitionsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import CreatePartitionsRequest

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def _grow(context, request):
    admin = context.registry.admin
    results = []
    for topic in request.topics:
        try:
            context.require(AclOperation.ALTER, ResourceType.TOPIC, topic.name)
            assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
            await admin.create_partitions(topic.name, topic.count, assignments, validate_only=request.validate_only,
                                          timeout_s=max(request.timeout_ms, 0) / 1000)
            results.append(Result(name=topic.name, error_code=0, error_message=None))
        except Exception as exc:  # noqa: BLE001 - per-topic outcome, mapped in one place
            results.append(Result(name=topic.name, error_code=int(error_code_for(exc)), error_message=str(exc)))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def handle(context: RequestContext, request: CreatePartitionsRequest):
    return _grow(context, request)
