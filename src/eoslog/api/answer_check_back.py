"""AnswerCheckBack (eoslog's private key 32274 = 0x7E12), v0: resolve a check handed out by PollCheckBack —
commit, rollback, or unknown (ask again after the back-off) (docs/transactions.md, "Check-back
transactions"). Needs WRITE on the transactional id, as EndTxn: answering decides the transaction. Answered
once the markers are written when the answer decided it (at most 5 s, as EndTxn)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.messages import AnswerCheckBackResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import AnswerCheckBackRequest

API_KEY = 0x7E12
MIN_VERSION = 0
MAX_VERSION = 0


async def _handle(context, request):
    code = await context.services.coordinators.check_backs.answer(
        request.transactional_id, request.producer_id, request.producer_epoch, request.check_number,
        request.answer)
    return AnswerCheckBackResponse(throttle_time_ms=0, error_code=int(code))


def handle(context: RequestContext, request: AnswerCheckBackRequest):
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    return _handle(context, request)


def error_response(context: RequestContext, request: AnswerCheckBackRequest, code: ErrorCode):
    return AnswerCheckBackResponse(throttle_time_ms=0, error_code=int(code))
