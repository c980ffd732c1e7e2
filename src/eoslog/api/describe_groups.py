"""DescribeGroups (key 15), v0-6: state, protocol and members (with metadata and assignment when
Stable). Before v6 an unknown group is described as Dead; v6 answers GROUP_ID_NOT_FOUND (KIP-1043)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator
from eoslog.coordinator.group.errors import Errors
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import DescribeGroupsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DescribeGroupsRequest

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6

DescribedGroup = DescribeGroupsResponse.DescribedGroup
Member = DescribeGroupsResponse.DescribedGroupMember
UNKNOWN_OPERATIONS = -(2**31)


def handle(context: RequestContext, request: DescribeGroupsRequest):
    coordinator = group_coordinator(context).core
    groups = []
    for group_id in request.groups:
        if not context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_refused(group_id, int(ErrorCode.GROUP_AUTHORIZATION_FAILED)))
            continue
        d = coordinator.describe(group_id)
        error, message = code(d.error), None
        if context.api_version >= 6 and d.error is Errors.NONE and d.state == "Dead":
            error, message = int(ErrorCode.GROUP_ID_NOT_FOUND), f"group {group_id} not found"
        groups.append(DescribedGroup(
            error_code=error, error_message=message, group_id=group_id, group_state=d.state,
            protocol_type=d.protocol_type, protocol_data=d.protocol_data,
            members=[Member(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                            client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in d.members],
            authorized_operations=context.authorized_operations(ResourceType.GROUP, group_id)
            if context.api_version >= 3 and request.include_authorized_operations else UNKNOWN_OPERATIONS))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)


def _refused(group_id, error_code: int):
    return DescribedGroup(error_code=error_code, error_message=None, group_id=group_id, group_state="",
                          protocol_type="", protocol_data="", members=[], authorized_operations=UNKNOWN_OPERATIONS)


def error_response(context: RequestContext, request: DescribeGroupsRequest, error_code: ErrorCode):
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[_refused(g, int(error_code)) for g in request.groups])
