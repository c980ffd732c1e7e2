"""Heartbeat (key 12), v0-4: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator
from eoslog.protocol.messages import HeartbeatResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import HeartbeatRequest

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(context: RequestContext, request: HeartbeatRequest):
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    resp = group_coordinator(context).call(
        "heartbeat", request.group_id, request.member_id, request.generation_id,
        group_instance_id=request.group_instance_id if context.api_version >= 3 else None)
    return HeartbeatResponse(throttle_time_ms=0, error_code=code(resp.error))


def error_response(context: RequestContext, request: HeartbeatRequest, error_code: ErrorCode):
    return HeartbeatResponse(throttle_time_ms=0, error_code=int(error_code))
