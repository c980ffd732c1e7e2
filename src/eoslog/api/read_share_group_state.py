"""ReadShareGroupState (key 84), v0: a share partition's leader loads its state (KIP-932); a newer leader
epoch fences the older leader's writes. The answer carries eoslog's tagged field of pending transactional
acknowledgements, with the outcomes markers gave them (docs/share-groups.md, "Step 6")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._share_state import per_partition, refuse
from eoslog.coordinator.share.persister import pending_to_wire
from eoslog.protocol.messages import ReadShareGroupStateResponse

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import ReadShareGroupStateRequest

API_KEY = 84
MIN_VERSION = 0
MAX_VERSION = 0

Result = ReadShareGroupStateResponse.PartitionResult
Batch = ReadShareGroupStateResponse.StateBatch


def _result(data, answer) -> Result:
    state = answer.state
    return Result(partition=data.partition, error_code=int(answer.error), error_message=answer.message,
                  state_epoch=state.state_epoch if state else 0, start_offset=state.start_offset if state else -1,
                  state_batches=[Batch(first_offset=b.first_offset, last_offset=b.last_offset,
                                       delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                 for b in (state.state_batches if state else ())],
                  pending_transactions=pending_to_wire(ReadShareGroupStateResponse,
                                                       state.pending_transactions if state else ()))


def handle(context: RequestContext, request: ReadShareGroupStateRequest):
    return per_partition(context, request, ReadShareGroupStateResponse, lambda shard, topic_id, data:
                         shard.read_state(request.group_id, topic_id, data.partition, leader_epoch=data.leader_epoch),
                         _result)


def error_response(context: RequestContext, request: ReadShareGroupStateRequest, error_code: ErrorCode):
    return refuse(request, ReadShareGroupStateResponse, _result, error_code)
