"""CommitTransactionGroup (eoslog's private key 32256 = 0x7E00), v0: commit several ongoing transactions
as one decision of a named group, remembered under a sequence number (docs/spark.md, "Broker extension:
transaction groups"). The answer comes once every member's markers are written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.messages import CommitTransactionGroupResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import CommitTransactionGroupRequest

API_KEY = 0x7E00
MIN_VERSION = 0
MAX_VERSION = 0

MemberResult = CommitTransactionGroupResponse.MemberResult


async def _handle(context, request):
    members = [(m.transactional_id, m.producer_id, m.producer_epoch) for m in request.transactions]
    result = await context.services.coordinators.transaction_groups.commit(
        request.group_name, request.sequence, request.abort_prefix, members)
    return CommitTransactionGroupResponse(
        throttle_time_ms=0, error_code=int(result.error), already_committed=result.already_committed,
        last_committed_sequence=result.last_committed_sequence,
        transactions=[MemberResult(transactional_id=m.transactional_id, error_code=int(code))
                      for m, code in zip(request.transactions, result.member_errors)],
        aborted_by_prefix=result.aborted_by_prefix)


def handle(context: RequestContext, request: CommitTransactionGroupRequest):
    # The group is named like a transactional id and lives on its coordinator; each member's id is written
    # to; an abort prefix needs WRITE on the prefix itself (a PREFIXED ACL covering it grants that).
    for name in [request.group_name, *(m.transactional_id for m in request.transactions),
                 *([request.abort_prefix] if request.abort_prefix is not None else [])]:
        context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, name)
    return _handle(context, request)


def error_response(context: RequestContext, request: CommitTransactionGroupRequest, code: ErrorCode):
    return CommitTransactionGroupResponse(
        throttle_time_ms=0, error_code=int(code), already_committed=False, last_committed_sequence=-1,
        transactions=[MemberResult(transactional_id=m.transactional_id, error_code=int(code))
                      for m in request.transactions],
        aborted_by_prefix=0)
