"""ConsumerGroupHeartbeat (key 68), v0-1: the consumer group protocol (KIP-848, docs/groups.md).

One call joins (member epoch 0), keeps the session alive and reconciles the assignment (the current
epoch), or leaves (-1; -2 for a static member leaving for a while). Partitions travel as topic ids;
the core works with names, so ids the broker does not know are dropped here (a deleted topic). v0 lets
the coordinator pick the member id; from v1 the client picks it (KIP-1082) and v1 adds
SubscribedTopicRegex. With an authorizer, topics the principal may not DESCRIBE are refused when named
and left out of what its regex matches (Kafka 4.x, KAFKA-18813)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import client_host, code, group_coordinator, resolve
from eoslog.coordinator.group.consumer_group import ConsumerHeartbeat
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import ConsumerGroupHeartbeatResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ConsumerGroupHeartbeatRequest

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1

Assignment = ConsumerGroupHeartbeatResponse.Assignment
TopicPartitions = ConsumerGroupHeartbeatResponse.TopicPartitions


def _invalid(request) -> str | None:
    """Kafka's request checks, whose answer is INVALID_REQUEST."""
    if not request.group_id:
        return "GroupId can't be empty."
    if request.member_epoch < -2:
        return f"MemberEpoch {request.member_epoch} is invalid."
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if request.subscribed_topic_names is None and getattr(request, "subscribed_topic_regex", None) is None:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    elif not request.member_id:
        return "MemberId can't be empty."
    return None


def handle(context: RequestContext, request: ConsumerGroupHeartbeatRequest):
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    version = context.api_version
    problem = _invalid(request)
    if problem is None and version >= 1 and not request.member_id:
        problem = "MemberId can't be empty."  # KIP-1082: the client names itself
    if problem is not None:
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST),
                                              error_message=problem, member_id=request.member_id or None,
                                              member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    may_describe = None
    if context.services.authorizer.keeps_acls:
        denied = _denied_topics(context, request.subscribed_topic_names or ())
        if denied:
            # Kafka 4.x (KAFKA-18813): a subscription naming a topic the principal may not describe is
            # refused as a whole; a regex is filtered instead (the core asks ``may_describe``).
            return ConsumerGroupHeartbeatResponse(
                throttle_time_ms=0, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                error_message=f"Topics {', '.join(denied)} are not authorized.", member_id=request.member_id or None,
                member_epoch=-1, heartbeat_interval_ms=0, assignment=None)

        def may_describe(topic: str) -> bool:
            return context.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
    infos = [info for info in context.services.registry.topics.topics.values() if not info.is_internal]
    names = {info.topic_id: info.name for info in infos}
    owned = None
    if request.topic_partitions is not None:
        owned = {names[tp.topic_id]: frozenset(tp.partitions) for tp in request.topic_partitions
                 if tp.topic_id in names}
    heartbeat = ConsumerHeartbeat(
        member_id=request.member_id, member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        subscribed_topic_regex=request.subscribed_topic_regex if version >= 1 else None,
        server_assignor=request.server_assignor, owned=owned, client_id=context.client_id or "",
        client_host=client_host(context), may_describe=may_describe,
        principal=None if may_describe is None else context.connection.principal)
    answer = group_coordinator(context).call("consumer_group_heartbeat", request.group_id, heartbeat,
                                   topics={info.name: info.partitions for info in infos})
    ids = {info.name: info.topic_id for info in infos}
    return _respond(answer, ids)


def _denied_topics(context, topics) -> list[str]:
    return sorted(set(topics) - context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, topics))


async def _respond(answer, ids):
    resp = await resolve(answer)
    assignment = None
    if resp.assignment is not None:
        assignment = Assignment(topic_partitions=[
            TopicPartitions(topic_id=ids[topic], partitions=sorted(partitions))
            for topic, partitions in sorted(resp.assignment.items()) if topic in ids])
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=code(resp.error), error_message=resp.error_message,
        member_id=resp.member_id, member_epoch=resp.member_epoch, heartbeat_interval_ms=resp.heartbeat_interval_ms,
        assignment=assignment)


def error_response(context: RequestContext, request: ConsumerGroupHeartbeatRequest, error_code: ErrorCode):
    return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=int(error_code), error_message=None,
                                          member_id=request.member_id or None, member_epoch=-1,
                                          heartbeat_interval_ms=0, assignment=None)
