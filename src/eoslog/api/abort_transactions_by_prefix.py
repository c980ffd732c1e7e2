"""AbortTransactionsByPrefix (eoslog's private key 32258 = 0x7E02), v0: abort, as the transaction timeout
does, every ongoing transaction whose transactional id starts with a prefix of at least 8 characters,
except those a group commit holds (docs/spark.md, "Broker extension: transaction groups")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.coordinator.transaction.decisions import TxnError
from eoslog.coordinator.transaction_groups.decisions import validate_abort_prefix
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import AbortTransactionsByPrefixResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import AbortTransactionsByPrefixRequest

API_KEY = 0x7E02
MIN_VERSION = 0
MAX_VERSION = 0


async def _handle(context, request):
    if validate_abort_prefix(request.prefix) is not TxnError.NONE:
        return AbortTransactionsByPrefixResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST),
                                                 aborted=[])
    aborted = await context.services.coordinators.transaction_groups.abort_by_prefix(request.prefix)
    return AbortTransactionsByPrefixResponse(throttle_time_ms=0, error_code=0, aborted=aborted)


def handle(context: RequestContext, request: AbortTransactionsByPrefixRequest):
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.prefix)  # as a transaction group's
    return _handle(context, request)


def error_response(context: RequestContext, request: AbortTransactionsByPrefixRequest, code: ErrorCode):
    return AbortTransactionsByPrefixResponse(throttle_time_ms=0, error_code=int(code), aborted=[])
