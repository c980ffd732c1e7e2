"""ShareFetch (key 78), v1-2: records acquired for a share group's member (KIP-932), with its share
session and piggy-backed acknowledgements (share/fetch.py carries it out).

v1 is the first stable version (MaxRecords, BatchSize); v2 (Kafka 4.2) adds ShareAcquireMode (KIP-1206:
0 batch-optimised, 1 record limit) and IsRenewAck with the RENEW acknowledgement (KIP-1222: a request
that only renews locks fetches nothing). READ on the group is needed for the request, READ on a topic for
its partitions. Records go out as the log's file regions, as Fetch sends them; AcquiredRecords say which
of their offsets the member holds, and until when (AcquisitionLockTimeoutMs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._share_common import asks, by_topic, check_ids, leader, member_key
from eoslog.protocol import RecordsList
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import ShareFetchResponse
from eoslog.security.acl import AclOperation, ResourceType
from eoslog.share.fetch import FetchLimits, share_fetch
from eoslog.share.partition_state import AcquireMode

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ShareFetchRequest

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2

TopicResponse = ShareFetchResponse.ShareFetchableTopicResponse
PartitionData = ShareFetchResponse.PartitionData
LeaderIdAndEpoch = ShareFetchResponse.LeaderIdAndEpoch
AcquiredRecords = ShareFetchResponse.AcquiredRecords


def handle(context: RequestContext, request: ShareFetchRequest):
    check_ids(request)
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    renew_only = context.api_version >= 2 and request.is_renew_ack
    mode = AcquireMode.BATCH_OPTIMIZED
    if context.api_version >= 2:
        try:
            mode = AcquireMode(request.share_acquire_mode)
        except ValueError:
            return _error(ErrorCode.INVALID_REQUEST, f"unknown ShareAcquireMode {request.share_acquire_mode}")
    limits = FetchLimits(max_wait_ms=request.max_wait_ms, max_bytes=request.max_bytes,
                         max_records=request.max_records, batch_size=request.batch_size, mode=mode)
    forgotten = [(t.topic_id, p) for t in (request.forgotten_topics_data or ()) for p in t.partitions]
    return _respond(context, share_fetch(
        context.services.share_partitions(), request.group_id, request.member_id, request.share_session_epoch,
        asks(context, request.topics, renew_only), forgotten, limits, renew_only=renew_only,
        connection_id=member_key(context)))


async def _respond(context, work):
    answer = await work
    if answer.error is not ErrorCode.NONE:
        return _error(answer.error, answer.error_message)
    return ShareFetchResponse(
        throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=answer.lock_duration_ms,
        responses=[TopicResponse(topic_id=topic_id, partitions=[_partition(context, p) for p in partitions])
                   for topic_id, partitions in by_topic(answer.partitions).items()],
        node_endpoints=[])


def _partition(context, p) -> PartitionData:
    leader_id, leader_epoch = leader(context, p.topic_id, p.partition)
    return PartitionData(
        partition_index=p.partition, error_code=int(p.error), error_message=p.error_message,
        acknowledge_error_code=int(p.acknowledge_error or ErrorCode.NONE),
        acknowledge_error_message=p.acknowledge_message,
        current_leader=LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch),
        records=RecordsList(p.records) if p.records else b"",
        acquired_records=[AcquiredRecords(first_offset=r.first_offset, last_offset=r.last_offset,
                                          delivery_count=r.delivery_count) for r in p.acquired])


def _error(code: ErrorCode, message: str | None = None) -> ShareFetchResponse:
    return ShareFetchResponse(throttle_time_ms=0, error_code=int(code), error_message=message,
                              acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])


def error_response(context: RequestContext, request: ShareFetchRequest, error_code: ErrorCode):
    return _error(error_code)
