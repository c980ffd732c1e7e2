"""BeginCheckBack (eoslog's private key 32272 = 0x7E10), v0: the next transaction of a transactional id is a
check-back transaction, resolved by the named producer group if its timeout passes instead of being aborted
(docs/transactions.md, "Check-back transactions"). Needs WRITE on the transactional id, as EndTxn."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.messages import BeginCheckBackResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import BeginCheckBackRequest

API_KEY = 0x7E10
MIN_VERSION = 0
MAX_VERSION = 0


async def _handle(context, request):
    code = await context.services.coordinators.check_backs.begin(
        request.transactional_id, request.producer_id, request.producer_epoch, request.check_back_group)
    return BeginCheckBackResponse(throttle_time_ms=0, error_code=int(code))


def handle(context: RequestContext, request: BeginCheckBackRequest):
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    return _handle(context, request)


def error_response(context: RequestContext, request: BeginCheckBackRequest, code: ErrorCode):
    return BeginCheckBackResponse(throttle_time_ms=0, error_code=int(code))
