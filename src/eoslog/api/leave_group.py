"""LeaveGroup (key 13), v0-5: members leave at once instead of waiting for their session timeout.
v0-2 name one member and report its outcome as the top-level error; v3+ batch members (KIP-345)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator, resolve
from eoslog.protocol.messages import LeaveGroupResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import LeaveGroupRequest

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5

MemberResponse = LeaveGroupResponse.MemberResponse


def handle(context: RequestContext, request: LeaveGroupRequest):
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    if context.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    return _respond(context, group_coordinator(context).call("leave_group", request.group_id, members))


async def _respond(context, answer):
    resp = await resolve(answer)
    if context.api_version < 3:
        error = resp.error if resp.members == () or code(resp.error) != 0 else resp.members[0].error
        return LeaveGroupResponse(throttle_time_ms=0, error_code=code(error))
    return LeaveGroupResponse(throttle_time_ms=0, error_code=code(resp.error), members=[
        MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code(m.error))
        for m in resp.members])


def error_response(context: RequestContext, request: LeaveGroupRequest, error_code: ErrorCode):
    return LeaveGroupResponse(throttle_time_ms=0, error_code=int(error_code), members=[])
