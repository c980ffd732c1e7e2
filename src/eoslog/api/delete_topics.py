"""DeleteTopics (key 20): by name (v1-5) or by name or topic id (v6)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.messages import DeleteTopicsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DeleteTopicsRequest

ZERO_UUID = uuid.UUID(int=0)
API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6

Result = DeleteTopicsResponse.DeletableTopicResult


async def _delete(context, request):
    admin = context.registry.admin
    if context.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        try:
            if name is not None:  # refused before its existence is told
                context.require(AclOperation.DELETE, ResourceType.TOPIC, name)
            name = admin.resolve(name, topic_id)
            context.require(AclOperation.DELETE, ResourceType.TOPIC, name)
            info = await admin.delete_topic(name)
            results.append(Result(name=name, topic_id=info.topic_id, error_code=0, error_message=None))
        except Exception as exc:  # noqa: BLE001 - per-topic outcome, mapped in one place
            results.append(Result(name=name, topic_id=topic_id or ZERO_UUID, error_code=int(error_code_for(exc)),
                                  error_message=str(exc)))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def handle(context: RequestContext, request: DeleteTopicsRequest):
    return _delete(context, request)
