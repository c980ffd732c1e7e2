"""ConsumerGroupDescribe (key 69), v0-1: a consumer group (KIP-848) with its epochs, assignor and members,
each with its current and target assignment. A classic group, or no group, answers GROUP_ID_NOT_FOUND
(DescribeGroups describes classic groups), as Kafka 4.x does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import ConsumerGroupDescribeResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ConsumerGroupDescribeRequest

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1

DescribedGroup = ConsumerGroupDescribeResponse.DescribedGroup
Member = ConsumerGroupDescribeResponse.Member
Assignment = ConsumerGroupDescribeResponse.Assignment
TopicPartitions = ConsumerGroupDescribeResponse.TopicPartitions
UNKNOWN_OPERATIONS = -(2**31)


def _assignment(partitions, ids) -> Assignment:
    return Assignment(topic_partitions=[
        TopicPartitions(topic_id=ids[topic], topic_name=topic, partitions=sorted(ps))
        for topic, ps in sorted(partitions.items()) if topic in ids])


def handle(context: RequestContext, request: ConsumerGroupDescribeRequest):
    coordinator = group_coordinator(context).core
    ids = {info.name: info.topic_id for info in context.services.registry.topics.topics.values()}
    groups = []
    for group_id in request.group_ids:
        if not context.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            groups.append(_refused(group_id, int(ErrorCode.GROUP_AUTHORIZATION_FAILED)))
            continue
        d = coordinator.consumer_group_describe(group_id)
        if code(d.error) != 0:
            groups.append(_refused(group_id, code(d.error), d.error_message))
            continue
        # Kafka 4.x (KAFKA-18813): a group holding a topic the caller may not describe is not described.
        topics = {t for m in d.members for t in (*m.assignment, *m.target_assignment)}
        if context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, topics) != topics:
            groups.append(_refused(group_id, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                   "the group holds topics the client may not describe"))
            continue
        groups.append(DescribedGroup(
            error_code=0, error_message=None, group_id=group_id, group_state=d.state, group_epoch=d.group_epoch,
            assignment_epoch=d.assignment_epoch, assignor_name=d.assignor_name,
            members=[Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                            subscribed_topic_names=list(m.subscribed_topic_names),
                            subscribed_topic_regex=m.subscribed_topic_regex,
                            assignment=_assignment(m.assignment, ids),
                            target_assignment=_assignment(m.target_assignment, ids),
                            member_type=m.member_type)
                     for m in d.members],
            authorized_operations=context.authorized_operations(ResourceType.GROUP, group_id)
            if request.include_authorized_operations else UNKNOWN_OPERATIONS))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _refused(group_id, error_code: int, message: str | None = None):
    return DescribedGroup(error_code=error_code, error_message=message, group_id=group_id, group_state="",
                          group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                          authorized_operations=UNKNOWN_OPERATIONS)


def error_response(context: RequestContext, request: ConsumerGroupDescribeRequest, error_code: ErrorCode):
    return ConsumerGroupDescribeResponse(throttle_time_ms=0,
                                         groups=[_refused(g, int(error_code)) for g in request.group_ids])
