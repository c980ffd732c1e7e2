"""OffsetDelete (key 47), v0 (KIP-496): deletes committed offsets of topics the group does not consume."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator, resolve
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import OffsetDeleteResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import OffsetDeleteRequest

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = OffsetDeleteResponse.OffsetDeleteResponsePartition


def handle(context: RequestContext, request: OffsetDeleteRequest):
    context.require(AclOperation.DELETE, ResourceType.GROUP, request.group_id)
    readable = context.authorized_names(AclOperation.READ, ResourceType.TOPIC, {t.name for t in request.topics})
    wanted = [(t.name, p.partition_index) for t in request.topics if t.name in readable for p in t.partitions]
    refused = {(t.name, p.partition_index): int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
               for t in request.topics if t.name not in readable for p in t.partitions}
    return _respond(request, group_coordinator(context).call("delete_offsets", request.group_id, wanted), refused)


async def _respond(request, answer, refused):
    resp = await resolve(answer)
    if code(resp.error):
        return OffsetDeleteResponse(error_code=code(resp.error), throttle_time_ms=0, topics=[])
    errors = {(r.topic, r.partition): code(r.error) for r in resp.partitions} | refused
    return OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
        Topic(name=t.name, partitions=[Partition(partition_index=p.partition_index,
                                                 error_code=errors.get((t.name, p.partition_index), 0))
                                       for p in t.partitions])
        for t in request.topics])


def error_response(context: RequestContext, request: OffsetDeleteRequest, error_code: ErrorCode):
    return OffsetDeleteResponse(error_code=int(error_code), throttle_time_ms=0, topics=[])
