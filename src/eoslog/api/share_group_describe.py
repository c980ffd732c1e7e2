"""ShareGroupDescribe (key 77), v1: share groups (KIP-932) with their epochs, assignor and members, each
with its assignment. A group of another type, or no group, answers GROUP_ID_NOT_FOUND. DESCRIBE on the
group is needed; a group holding a topic the caller may not DESCRIBE is not described (Kafka 4.x)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import ShareGroupDescribeResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ShareGroupDescribeRequest

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1

DescribedGroup = ShareGroupDescribeResponse.DescribedGroup
Member = ShareGroupDescribeResponse.Member
Assignment = ShareGroupDescribeResponse.Assignment
TopicPartitions = ShareGroupDescribeResponse.TopicPartitions
UNKNOWN_OPERATIONS = -(2**31)


def handle(context: RequestContext, request: ShareGroupDescribeRequest):
    coordinator = group_coordinator(context).core
    names = {info.topic_id: info.name for info in context.services.registry.topics.topics.values()}
    allowed = context.authorized_names(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_ids)
    groups = []
    described = {d.group_id: d for d in coordinator.share_group_describe([g for g in request.group_ids if g in allowed])}
    for group_id in request.group_ids:
        if group_id not in allowed:
            groups.append(_refused(group_id, int(ErrorCode.GROUP_AUTHORIZATION_FAILED)))
            continue
        d = described[group_id]
        if code(d.error) != 0:
            groups.append(_refused(group_id, code(d.error), d.error_message))
            continue
        topics = {names[t] for m in d.members for t in m.assignment if t in names}
        if context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, topics) != topics:
            groups.append(_refused(group_id, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                                   "the group holds topics the client may not describe"))
            continue
        groups.append(DescribedGroup(
            error_code=0, error_message=None, group_id=group_id, group_state=d.state, group_epoch=d.group_epoch,
            assignment_epoch=d.assignment_epoch, assignor_name=d.assignor_name,
            members=[Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                            client_id=m.client_id, client_host=m.client_host,
                            subscribed_topic_names=list(m.subscribed_topic_names),
                            assignment=Assignment(topic_partitions=[
                                TopicPartitions(topic_id=t, topic_name=names[t], partitions=sorted(ps))
                                for t, ps in sorted(m.assignment.items(), key=lambda item: names.get(item[0], ""))
                                if t in names]))
                     for m in d.members],
            authorized_operations=context.authorized_operations(ResourceType.GROUP, group_id)
            if request.include_authorized_operations else UNKNOWN_OPERATIONS))
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _refused(group_id, error_code: int, message: str | None = None):
    return DescribedGroup(error_code=error_code, error_message=message, group_id=group_id, group_state="",
                          group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                          authorized_operations=UNKNOWN_OPERATIONS)


def error_response(context: RequestContext, request: ShareGroupDescribeRequest, error_code: ErrorCode):
    return ShareGroupDescribeResponse(throttle_time_ms=0,
                                      groups=[_refused(g, int(error_code)) for g in request.group_ids])
