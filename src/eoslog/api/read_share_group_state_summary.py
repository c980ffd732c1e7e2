"""ReadShareGroupStateSummary (key 87), v0-1: what is durable of a share partition's state (start offset,
epochs), for the group coordinator's share-group offsets (KIP-932); v1 adds DeliveryCompleteCount
(KIP-1226). It writes nothing: the leader epoch asked with is not checked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._share_state import per_partition, refuse
from eoslog.protocol.messages import ReadShareGroupStateSummaryResponse

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import ReadShareGroupStateSummaryRequest

API_KEY = 87
MIN_VERSION = 0
MAX_VERSION = 1

Result = ReadShareGroupStateSummaryResponse.PartitionResult


def _result(data, answer) -> Result:
    state = answer.state
    return Result(partition=data.partition, error_code=int(answer.error), error_message=answer.message,
                  state_epoch=state.state_epoch if state else 0, leader_epoch=state.leader_epoch if state else 0,
                  start_offset=state.start_offset if state else -1,
                  delivery_complete_count=state.delivery_complete_count if state else -1)


def handle(context: RequestContext, request: ReadShareGroupStateSummaryRequest):
    return per_partition(context, request, ReadShareGroupStateSummaryResponse, lambda shard, topic_id, data:
                         shard.read_state_summary(request.group_id, topic_id, data.partition), _result)


def error_response(context: RequestContext, request: ReadShareGroupStateSummaryRequest, error_code: ErrorCode):
    return refuse(request, ReadShareGroupStateSummaryResponse, _result, error_code)
