"""ShareGroupHeartbeat (key 76), v1: a share group member joins (epoch 0), stays, takes its assignment,
or leaves (-1) (KIP-932; the group coordinator's share_apis.py). The client names itself (its member id, a
UUID, is required from the first heartbeat). Partitions travel as topic ids; only share partitions whose
state the share coordinator holds are assigned, so a member's first answer may have none: they come with
a later heartbeat, once initialized. READ on the group is required; a subscription naming a topic the
principal may not DESCRIBE is refused (TOPIC_AUTHORIZATION_FAILED), as Kafka 4.x does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import client_host, code, group_coordinator, resolve
from eoslog.coordinator.group.share_assignor import TopicMetadata
from eoslog.coordinator.group.share_group import ShareHeartbeat
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import ShareGroupHeartbeatResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ShareGroupHeartbeatRequest

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1

Assignment = ShareGroupHeartbeatResponse.Assignment
TopicPartitions = ShareGroupHeartbeatResponse.TopicPartitions


def handle(context: RequestContext, request: ShareGroupHeartbeatRequest):
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    names = request.subscribed_topic_names
    if names and context.services.authorizer.keeps_acls:
        denied = sorted(set(names) - context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names))
        if denied:
            return _error(request, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          f"Topics {', '.join(denied)} are not authorized.")
    infos = [info for info in context.services.registry.topics.topics.values() if not info.is_internal]
    heartbeat = ShareHeartbeat(
        member_id=request.member_id, member_epoch=request.member_epoch, rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names), client_id=context.client_id or "",
        client_host=client_host(context))
    answer = group_coordinator(context).call(
        "share_group_heartbeat", request.group_id, heartbeat,
        topics={info.name: TopicMetadata(info.topic_id, info.partitions) for info in infos})
    return _respond(answer)


async def _respond(answer):
    resp = await resolve(answer)
    assignment = None
    if resp.assignment is not None:
        assignment = Assignment(topic_partitions=[
            TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(resp.assignment.items()) if partitions])
    return ShareGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=code(resp.error), error_message=resp.error_message,
        member_id=resp.member_id, member_epoch=resp.member_epoch,
        heartbeat_interval_ms=resp.heartbeat_interval_ms, assignment=assignment)


def _error(request, error_code: ErrorCode, message: str | None = None) -> ShareGroupHeartbeatResponse:
    # Kafka's error answers carry the code and the message only.
    return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=int(error_code), error_message=message,
                                       member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)


def error_response(context: RequestContext, request: ShareGroupHeartbeatRequest, error_code: ErrorCode):
    return _error(request, error_code)
