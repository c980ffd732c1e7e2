"""OffsetForLeaderEpoch (key 23), v2-4: where a leader epoch ends in the leader's log (KIP-101/279).

Followers ask it before fetching, to find where their log diverges from the leader's; consumers ask it
(KIP-320) to detect a truncated log after a leader change. Only the leader answers; a stale or future
current_leader_epoch gets FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH so the asker refreshes metadata.
On a single node there is one epoch, 0, which ends at the log end offset."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import OffsetForLeaderEpochResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import OffsetForLeaderEpochRequest

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset
UNDEFINED = -1


def _answer(services, topic: str, wanted) -> EpochEndOffset:
    try:
        epoch, end = services.replicas.offset_for_leader_epoch(
            topic, wanted.partition, wanted.current_leader_epoch, wanted.leader_epoch)
    except Exception as exc:  # noqa: BLE001 - mapped in one place
        return EpochEndOffset(error_code=int(error_code_for(exc)), partition=wanted.partition,
                              leader_epoch=UNDEFINED, end_offset=UNDEFINED)
    return EpochEndOffset(error_code=0, partition=wanted.partition, leader_epoch=epoch, end_offset=end)


def handle(context: RequestContext, request: OffsetForLeaderEpochRequest):
    services = context.services
    if request.replica_id >= 0:
        # A follower truncating after a leader change: the cluster's own traffic, as a replica fetch.
        context.require(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
        described = {t.topic for t in request.topics}
    else:
        described = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, {t.topic for t in request.topics})
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
        TopicResult(topic=t.topic, partitions=[
            _answer(services, t.topic, p) if t.topic in described else
            EpochEndOffset(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), partition=p.partition,
                           leader_epoch=UNDEFINED, end_offset=UNDEFINED) for p in t.partitions])
        for t in request.topics])


def error_response(context: RequestContext, request: OffsetForLeaderEpochRequest, code: ErrorCode):
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
        TopicResult(topic=t.topic, partitions=[
            EpochEndOffset(error_code=int(code), partition=p.partition, leader_epoch=UNDEFINED, end_offset=UNDEFINED)
            for p in t.partitions])
        for t in request.topics])
