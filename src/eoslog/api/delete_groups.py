"""DeleteGroups (key 42), v0-2: removes Empty groups and their offsets (tombstones, then answered); a share
group's share-partition state is deleted at the share coordinator first (GroupShard.delete_groups)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator, resolve
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import DeleteGroupsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DeleteGroupsRequest

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2

Result = DeleteGroupsResponse.DeletableGroupResult


def handle(context: RequestContext, request: DeleteGroupsRequest):
    allowed = context.authorized_names(AclOperation.DELETE, ResourceType.GROUP, request.groups_names)
    refused = [Result(group_id=g, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
               for g in request.groups_names if g not in allowed]
    wanted = [g for g in request.groups_names if g in allowed]
    return _respond(group_coordinator(context).delete_groups(wanted) if wanted else None, refused)


async def _respond(answer, refused):
    groups = (await resolve(answer)).groups if answer is not None else ()
    return DeleteGroupsResponse(throttle_time_ms=0, results=refused + [
        Result(group_id=g.group_id, error_code=code(g.error)) for g in groups])


def error_response(context: RequestContext, request: DeleteGroupsRequest, error_code: ErrorCode):
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        Result(group_id=g, error_code=int(error_code)) for g in request.groups_names])
