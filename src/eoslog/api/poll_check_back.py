"""PollCheckBack (eoslog's private key 32273 = 0x7E11), v0: a long poll for the due checks of a check-back
producer group (docs/transactions.md, "Check-back transactions"). Each check handed out is lent to the
polling member for eoslog.transaction.check.lease.ms. It reveals transactional ids, so it needs DESCRIBE on
the Group resource named after the check-back group, as describing a consumer group does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.messages import PollCheckBackResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import PollCheckBackRequest

API_KEY = 0x7E11
MIN_VERSION = 0
MAX_VERSION = 0

Check = PollCheckBackResponse.Check


async def _handle(context, request):
    due = await context.services.coordinators.check_backs.poll(
        request.check_back_group, request.member_id, request.max_wait_ms, request.max_checks)
    return PollCheckBackResponse(throttle_time_ms=0, error_code=0, checks=[
        Check(transactional_id=c.transactional_id, producer_id=c.producer_id, producer_epoch=c.producer_epoch,
              check_number=c.check_number) for c in due])


def handle(context: RequestContext, request: PollCheckBackRequest):
    context.require(AclOperation.DESCRIBE, ResourceType.GROUP, request.check_back_group)
    return _handle(context, request)


def error_response(context: RequestContext, request: PollCheckBackRequest, code: ErrorCode):
    return PollCheckBackResponse(throttle_time_ms=0, error_code=int(code), checks=[])
