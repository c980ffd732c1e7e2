"""DeleteShareGroupState (key 86), v0: the group coordinator deletes a share group's share-partition state
before the group's own records (DeleteGroups, KIP-932)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._share_state import per_partition, refuse
from eoslog.protocol.messages import DeleteShareGroupStateResponse

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import DeleteShareGroupStateRequest

API_KEY = 86
MIN_VERSION = 0
MAX_VERSION = 0

Result = DeleteShareGroupStateResponse.PartitionResult


def _result(data, answer) -> Result:
    return Result(partition=data.partition, error_code=int(answer.error), error_message=answer.message)


def handle(context: RequestContext, request: DeleteShareGroupStateRequest):
    return per_partition(context, request, DeleteShareGroupStateResponse, lambda shard, topic_id, data:
                         shard.delete_state(request.group_id, topic_id, data.partition), _result)


def error_response(context: RequestContext, request: DeleteShareGroupStateRequest, error_code: ErrorCode):
    return refuse(request, DeleteShareGroupStateResponse, _result, error_code)
