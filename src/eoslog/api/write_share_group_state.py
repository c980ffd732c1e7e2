"""WriteShareGroupState (key 85), v0-1: a share partition's leader persists what changed (KIP-932); v1
adds DeliveryCompleteCount (KIP-1226). eoslog's tagged field carries the share partition's whole set of
pending transactional acknowledgements (docs/share-groups.md, "Step 6"): none when absent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.api._share_state import per_partition, refuse
from eoslog.coordinator.share.log_format import NO_DELIVERY_COMPLETE_COUNT, StateBatch
from eoslog.coordinator.share.persister import pending_from_wire
from eoslog.protocol.messages import WriteShareGroupStateResponse

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import WriteShareGroupStateRequest

API_KEY = 85
MIN_VERSION = 0
MAX_VERSION = 1

Result = WriteShareGroupStateResponse.PartitionResult


def _result(data, answer) -> Result:
    return Result(partition=data.partition, error_code=int(answer.error), error_message=answer.message)


def handle(context: RequestContext, request: WriteShareGroupStateRequest):
    version = context.api_version

    def write(shard, topic_id, data):
        return shard.write_state(
            request.group_id, topic_id, data.partition, state_epoch=data.state_epoch, leader_epoch=data.leader_epoch,
            start_offset=data.start_offset,
            state_batches=[StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                           for b in data.state_batches],
            delivery_complete_count=data.delivery_complete_count if version >= 1 else NO_DELIVERY_COMPLETE_COUNT,
            pending_transactions=pending_from_wire(data.pending_transactions))

    return per_partition(context, request, WriteShareGroupStateResponse, write, _result)


def error_response(context: RequestContext, request: WriteShareGroupStateRequest, error_code: ErrorCode):
    return refuse(request, WriteShareGroupStateResponse, _result, error_code)
