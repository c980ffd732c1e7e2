"""EndTxn (key 26), v0-5: commit or abort. The answer comes once the Prepare record (the commit point) is
durable and, normally, once every marker and the Complete record are too. v4 only adds the error
TRANSACTION_ABORTABLE, which this coordinator never answers EndTxn with. v5 is transaction version 2
(KIP-890 part 2): the epoch is bumped and the answer carries the producer id and epoch to continue with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.messages import EndTxnResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import EndTxnRequest

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5


async def _handle(context, request):
    code, producer_id, producer_epoch = await context.services.coordinators.transactions.end_txn_and_identity(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
        context.api_version)
    return EndTxnResponse(throttle_time_ms=0, error_code=int(code), producer_id=producer_id,
                          producer_epoch=producer_epoch)


def handle(context: RequestContext, request: EndTxnRequest):
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    return _handle(context, request)


def error_response(context: RequestContext, request: EndTxnRequest, code: ErrorCode):
    return EndTxnResponse(throttle_time_ms=0, error_code=int(code), producer_id=-1, producer_epoch=-1)
