"""AddOffsetsToTxn (key 25), v0-3: the group's __consumer_offsets partition joins the transaction, so the
TxnOffsetCommit that follows is committed or aborted with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.messages import AddOffsetsToTxnResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import AddOffsetsToTxnRequest

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 3


async def _handle(context, request):
    code = await context.services.coordinators.transactions.add_offsets_to_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id,
        context.api_version)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=int(code))


def handle(context: RequestContext, request: AddOffsetsToTxnRequest):
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    return _handle(context, request)


def error_response(context: RequestContext, request: AddOffsetsToTxnRequest, code: ErrorCode):
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=int(code))
