"""InitializeShareGroupState (key 83), v0: the group coordinator (of another broker, on a cluster) gives a
share partition its state epoch and start offset before assigning it (KIP-932)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._share_state import per_partition, refuse
from eoslog.protocol.messages import InitializeShareGroupStateResponse

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import InitializeShareGroupStateRequest

API_KEY = 83
MIN_VERSION = 0
MAX_VERSION = 0

Result = InitializeShareGroupStateResponse.PartitionResult


def _result(data, answer) -> Result:
    return Result(partition=data.partition, error_code=int(answer.error), error_message=answer.message)


def handle(context: RequestContext, request: InitializeShareGroupStateRequest):
    return per_partition(context, request, InitializeShareGroupStateResponse, lambda shard, topic_id, data:
                         shard.initialize_state(request.group_id, topic_id, data.partition,
                                                state_epoch=data.state_epoch, start_offset=data.start_offset),
                         _result)


def error_response(context: RequestContext, request: InitializeShareGroupStateRequest, error_code: ErrorCode):
    return refuse(request, InitializeShareGroupStateResponse, _result, error_code)
