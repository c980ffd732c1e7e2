"""ListGroups (key 16), v0-5: every group this coordinator holds; v4+ filter by state, v5+ by type
("classic" or "consumer", KIP-848)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import group_coordinator
from eoslog.protocol.messages import ListGroupsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import ListGroupsRequest

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5

ListedGroup = ListGroupsResponse.ListedGroup


def handle(context: RequestContext, request: ListGroupsRequest):
    version = context.api_version
    listings = group_coordinator(context).core.list_groups(
        states=request.states_filter if version >= 4 else None,
        types=request.types_filter if version >= 5 else None)
    if not context.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        # Without DESCRIBE on the cluster, only the groups the principal may DESCRIBE (Kafka's rule).
        visible = context.authorized_names(AclOperation.DESCRIBE, ResourceType.GROUP, {g.group_id for g in listings})
        listings = [g for g in listings if g.group_id in visible]
    return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=[
        ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type)
        for g in listings])


def error_response(context: RequestContext, request: ListGroupsRequest, error_code: ErrorCode):
    return ListGroupsResponse(throttle_time_ms=0, error_code=int(error_code), groups=[])
