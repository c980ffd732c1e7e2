"""DeleteShareGroupOffsets (key 92), v0 (KIP-932): deletes a share group's share-partition state of whole
topics, in a share group without members (the group coordinator's part is
coordinator/group/share_offset_apis.py; the share coordinator's DeleteShareGroupState is run by
GroupShard.delete_share_group_offsets). The next member to subscribe starts those partitions again by
``share.auto.offset.reset``.

As Kafka's KafkaApis: DELETE on the group (else GROUP_AUTHORIZATION_FAILED, top level); a topic the caller
may not READ answers TOPIC_AUTHORIZATION_FAILED; an unknown group GROUP_ID_NOT_FOUND and a group with
members NON_EMPTY_GROUP (top level); a topic the cluster does not have, or of which the group holds no
state, UNKNOWN_TOPIC_OR_PARTITION on its row."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from eoslog.api._group_common import code, group_coordinator
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import DeleteShareGroupOffsetsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DeleteShareGroupOffsetsRequest

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0

Topic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
ZERO_UUID = uuid.UUID(int=0)


def handle(context: RequestContext, request: DeleteShareGroupOffsetsRequest):
    if not context.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return error_response(context, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return _delete(context, request)


async def _delete(context: RequestContext, request: DeleteShareGroupOffsetsRequest):
    topics = context.services.registry.topics.topics
    names = list(dict.fromkeys(t.topic_name for t in request.topics))
    allowed = context.authorized_names(AclOperation.READ, ResourceType.TOPIC, names)
    rows = [_row(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for name in names if name not in allowed]
    asked = {name: (topics[name].topic_id, topics[name].partitions) if name in topics else None
             for name in names if name in allowed}
    change, answers = await group_coordinator(context).delete_share_group_offsets(request.group_id, asked)
    if change.error.value != "NONE":
        return _top_level(ErrorCode(code(change.error)), change.message)
    by_id = {info.topic_id: name for name, info in topics.items()}
    deleted = [_row(by_id.get(t, ""), t, error) for t, error in answers.items()]
    refused = [_row(name, ZERO_UUID, error, message) for _, name, error, message in change.refused]
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                           responses=rows + deleted + refused)


def _row(name: str, topic_id: uuid.UUID, error: ErrorCode, message: str | None = None) -> Topic:
    return Topic(topic_name=name, topic_id=topic_id, error_code=int(error),
                 error_message=None if error is ErrorCode.NONE else message or error.description)


def _top_level(error: ErrorCode, message: str | None = None):
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=int(error),
                                           error_message=message or error.description, responses=[])


def error_response(context: RequestContext, request: DeleteShareGroupOffsetsRequest, error_code: ErrorCode):
    return _top_level(ErrorCode(error_code))
