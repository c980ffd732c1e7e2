"""JoinGroup (key 11), v0-9: the classic group protocol's join barrier (docs/groups.md).

v4+ gets MEMBER_ID_REQUIRED for a first join (KIP-394), v5+ static membership (KIP-345), v7+ the
protocol type in the answer, v9 ``skip_assignment`` for a static leader that rejoined (KIP-814)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import client_host, code, group_coordinator, resolve
from eoslog.protocol.messages import JoinGroupResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import JoinGroupRequest

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9

Member = JoinGroupResponse.JoinGroupResponseMember


def handle(context: RequestContext, request: JoinGroupRequest):
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    version = context.api_version
    answer = group_coordinator(context).call(
        "join_group", request.group_id, request.member_id,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else -1,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=context.client_id or "", client_host=client_host(context),
        require_known_member_id=version >= 4, supports_skip_assignment=version >= 9,
        topics=_topics(context) if request.group_id in group_coordinator(context).core.consumer.groups else None)
    return _respond(context, answer)


def _topics(context) -> dict[str, int]:
    """Non-internal topics and their partition counts: a classic member joining a consumer group (KIP-848)
    is assigned by the coordinator."""
    return {info.name: info.partitions for info in context.services.registry.topics.topics.values()
            if not info.is_internal}


async def _respond(context, answer):
    resp = await resolve(answer)
    version = context.api_version
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=code(resp.error), generation_id=resp.generation_id,
        protocol_type=resp.protocol_type,
        # Non-nullable before v7: "" stands for "no protocol chosen".
        protocol_name=resp.protocol_name if version >= 7 else (resp.protocol_name or ""),
        leader=resp.leader, skip_assignment=resp.skip_assignment, member_id=resp.member_id,
        members=[Member(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
                 for m in resp.members])


def error_response(context: RequestContext, request: JoinGroupRequest, error_code: ErrorCode):
    return JoinGroupResponse(throttle_time_ms=0, error_code=int(error_code), generation_id=-1,
                             protocol_type=None, protocol_name=None if context.api_version >= 7 else "",
                             leader="", member_id=request.member_id, members=[])


