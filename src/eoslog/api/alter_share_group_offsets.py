"""AlterShareGroupOffsets (key 91), v0 (KIP-932): new share-partition start offsets for a share group
without members (the group coordinator's part is coordinator/group/share_offset_apis.py, the share
coordinator's InitializeShareGroupState is run by GroupShard.alter_share_group_offsets).

As Kafka's KafkaApis: READ on the group (else GROUP_AUTHORIZATION_FAILED, top level); a topic the caller
may not READ answers TOPIC_AUTHORIZATION_FAILED on its partitions; a topic or partition the cluster does
not have UNKNOWN_TOPIC_OR_PARTITION. A group with members is NON_EMPTY_GROUP (top level); a negative start
offset is INVALID_REQUEST on its partition (eoslog: Kafka's tool never sends one, the share coordinator
would take -1 as "not placed")."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import AlterShareGroupOffsetsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import AlterShareGroupOffsetsRequest

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0

Topic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
Partition = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponsePartition
_ZERO = uuid.UUID(int=0)


def handle(context: RequestContext, request: AlterShareGroupOffsetsRequest):
    if not context.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error_response(context, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return _alter(context, request)


async def _alter(context: RequestContext, request: AlterShareGroupOffsetsRequest):
    topics = context.services.registry.topics.topics
    names = [t.topic_name for t in request.topics]
    allowed = context.authorized_names(AclOperation.READ, ResourceType.TOPIC, names)
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict = {}
    for topic in request.topics:
        info = topics.get(topic.topic_name)
        for p in topic.partitions:
            key = (topic.topic_name, p.partition_index)
            if topic.topic_name not in allowed:
                errors[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                errors[key] = ErrorCode.INVALID_REQUEST
            else:
                offsets.setdefault(info.topic_id, (info.name, {}))[1][p.partition_index] = p.start_offset
    change, answers = await group_coordinator(context).alter_share_group_offsets(request.group_id, offsets)
    if change.error.value != "NONE":
        return _top_level(ErrorCode(code(change.error)), change.message)
    for (topic_id, index), error in answers.items():
        errors[(context.services.registry.topics.by_id[topic_id].name, index)] = error
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, error_message=None, responses=[
        Topic(topic_name=t.topic_name,
              topic_id=topics[t.topic_name].topic_id if t.topic_name in topics and t.topic_name in allowed
              else _ZERO,
              partitions=[_partition(p.partition_index, errors.get((t.topic_name, p.partition_index), ErrorCode.NONE))
                          for p in t.partitions])
        for t in request.topics])


def _partition(index: int, error: ErrorCode) -> Partition:
    return Partition(partition_index=index, error_code=int(error),
                     error_message=None if error is ErrorCode.NONE else error.description)


def _top_level(error: ErrorCode, message: str | None = None):
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=int(error),
                                          error_message=message or error.description, responses=[])


def error_response(context: RequestContext, request: AlterShareGroupOffsetsRequest, error_code: ErrorCode):
    return _top_level(ErrorCode(error_code))

