"""ListCheckBacks (eoslog's private key 32275 = 0x7E13), v0: the check-back transactions this broker
coordinates -- state, check count, next check, abort reason -- for `eoslog transactions list` and consoles
(docs/transactions.md, "Check-back transactions"). Like ListTransactions it filters rather than refuses:
transactional ids the principal may not Describe are left out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.messages import ListCheckBacksResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import ListCheckBacksRequest

API_KEY = 0x7E13
MIN_VERSION = 0
MAX_VERSION = 0

Row = ListCheckBacksResponse.CheckBackTransaction


def handle(context: RequestContext, request: ListCheckBacksRequest):
    groups = set(request.check_back_groups)
    found = [m for m in context.services.coordinators.transactions.all_metadata()
             if m.check_back_group is not None and (not groups or m.check_back_group in groups)]
    visible = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                       {m.transactional_id for m in found})
    return ListCheckBacksResponse(throttle_time_ms=0, error_code=0, transactions=[
        Row(transactional_id=m.transactional_id, check_back_group=m.check_back_group, state=m.state.kafka_name,
            producer_id=m.producer_id, producer_epoch=m.producer_epoch, check_count=m.check_count,
            next_check_timestamp_ms=m.next_check_ms, abort_reason=m.abort_reason)
        for m in sorted(found, key=lambda m: m.transactional_id) if m.transactional_id in visible])


def error_response(context: RequestContext, request: ListCheckBacksRequest, code: ErrorCode):
    return ListCheckBacksResponse(throttle_time_ms=0, error_code=int(code), transactions=[])
