"""DeleteGroups (key 42), v0-2: removes Empty groups and their offsets (tombstones, then answered)."""

from __future__ import annotations

from eoslog.api._group_common import code, resolve, service
from eoslog.protocol.messages import DeleteGroupsResponse

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2

Result = DeleteGroupsResponse.DeletableGroupResult


def handle(context, request):
    return _respond(service(context).call("delete_groups", list(request.groups_names)))


async def _respond(answer):
    resp = await resolve(answer)
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        Result(group_id=g.group_id, error_code=code(g.error)) for g in resp.groups])


def error_response(context, request, error_code):
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        Result(group_id=g, error_code=int(error_code)) for g in request.groups_names])
