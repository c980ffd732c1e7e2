"""ShareAcknowledge (key 79), v1-2: a share group member's acknowledgements without a fetch (KIP-932),
or the close of its share session (epoch -1, which gives back what it still holds). v2 adds IsRenewAck
and the RENEW type (KIP-1222) and AcquisitionLockTimeoutMs in the answer. READ on the group and on each
topic, as for ShareFetch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._share_common import asks, by_topic, check_ids, leader
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import ShareAcknowledgeResponse
from eoslog.security.acl import AclOperation, ResourceType
from eoslog.share.fetch import share_acknowledge

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ShareAcknowledgeRequest

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2

TopicResponse = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
PartitionData = ShareAcknowledgeResponse.PartitionData
LeaderIdAndEpoch = ShareAcknowledgeResponse.LeaderIdAndEpoch


def handle(context: RequestContext, request: ShareAcknowledgeRequest):
    check_ids(request)
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    renew_only = context.api_version >= 2 and request.is_renew_ack
    return _respond(context, share_acknowledge(context.services.share_partitions(), request.group_id, request.member_id,
                                               request.share_session_epoch, asks(context, request.topics, renew_only)))


async def _respond(context, work):
    answer = await work
    if answer.error is not ErrorCode.NONE:
        return _error(answer.error, answer.error_message)
    return ShareAcknowledgeResponse(
        throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=answer.lock_duration_ms,
        responses=[TopicResponse(topic_id=topic_id, partitions=[_partition(context, p) for p in partitions])
                   for topic_id, partitions in by_topic(answer.partitions).items()],
        node_endpoints=[])


def _partition(context, p) -> PartitionData:
    leader_id, leader_epoch = leader(context, p.topic_id, p.partition)
    error = p.acknowledge_error if p.acknowledge_error is not None else p.error
    return PartitionData(partition_index=p.partition, error_code=int(error),
                         error_message=p.acknowledge_message or p.error_message,
                         current_leader=LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch))


def _error(code: ErrorCode, message: str | None = None) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=int(code), error_message=message,
                                    acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])


def error_response(context: RequestContext, request: ShareAcknowledgeRequest, error_code: ErrorCode):
    return _error(error_code)
