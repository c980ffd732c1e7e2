"""ListTransactions (key 66, KIP-664), v0-2: transactional ids with their producer id and state, filtered by
state, producer id, duration (v1, KIP-994) and id pattern (v2; one that does not compile is
INVALID_REGULAR_EXPRESSION, as in Kafka 4.x)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from eoslog.coordinator.transaction.state import TransactionState, UnknownTransactionState
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import ListTransactionsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ListTransactionsRequest

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2

Entry = ListTransactionsResponse.TransactionState


def handle(context: RequestContext, request: ListTransactionsRequest):
    unknown = []
    states = []
    for name in request.state_filters:
        try:
            states.append(TransactionState.from_kafka_name(name).kafka_name)
        except UnknownTransactionState:
            unknown.append(name)
    duration = request.duration_filter if context.api_version >= 1 else -1
    pattern = request.transactional_id_pattern if context.api_version >= 2 else None
    if pattern:
        try:
            re.compile(pattern)
        except re.error:
            return error_response(context, request, ErrorCode.INVALID_REGULAR_EXPRESSION)
    if unknown and not states:
        found = []  # only unknown states asked for: nothing can match
    else:
        found = context.services.coordinators.transactions.list_transactions(
            states, request.producer_id_filters, duration, pattern or None)
    visible = context.authorized_names(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                       {t.transactional_id for t in found})
    found = [t for t in found if t.transactional_id in visible]
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
        transaction_states=[Entry(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                  transaction_state=t.state.kafka_name) for t in found])


def error_response(context: RequestContext, request: ListTransactionsRequest, code: ErrorCode):
    return ListTransactionsResponse(throttle_time_ms=0, error_code=int(code), unknown_state_filters=[],
                                    transaction_states=[])
