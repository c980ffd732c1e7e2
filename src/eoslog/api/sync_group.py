"""SyncGroup (key 14), v0-5: the leader hands out the assignment; everyone gets theirs once it is
durable in ``__consumer_offsets``. v3+ static members, v5 protocol type/name checked and echoed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator, resolve
from eoslog.protocol.messages import SyncGroupResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import SyncGroupRequest

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


def handle(context: RequestContext, request: SyncGroupRequest):
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    version = context.api_version
    answer = group_coordinator(context).call(
        "sync_group", request.group_id, request.member_id, request.generation_id,
        [(a.member_id, bytes(a.assignment)) for a in request.assignments],
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None)
    return _respond(answer)


async def _respond(answer):
    resp = await resolve(answer)
    return SyncGroupResponse(throttle_time_ms=0, error_code=code(resp.error), protocol_type=resp.protocol_type,
                             protocol_name=resp.protocol_name, assignment=resp.assignment)


def error_response(context: RequestContext, request: SyncGroupRequest, error_code: ErrorCode):
    return SyncGroupResponse(throttle_time_ms=0, error_code=int(error_code), protocol_type=None,
                             protocol_name=None, assignment=b"")
