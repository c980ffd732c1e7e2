"""AddSharePartitionsToTxn (eoslog's private key 32288 = 0x7E20), v0: share partitions join a transaction
before it acknowledges their records (ShareAcknowledgeTxn), as AddOffsetsToTxn adds a group before
TxnOffsetCommit (docs/share-groups.md, "Step 6"). WRITE on the transactional id, READ on the group."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.messages import AddSharePartitionsToTxnResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import AddSharePartitionsToTxnRequest

API_KEY = 0x7E20
MIN_VERSION = 0
MAX_VERSION = 0


async def _handle(context, request):
    code = await context.services.coordinators.share_transactions.add_share_partitions_to_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id,
        [(t.topic_id, index) for t in request.topics for index in t.partitions])
    return AddSharePartitionsToTxnResponse(throttle_time_ms=0, error_code=int(code))


def handle(context: RequestContext, request: AddSharePartitionsToTxnRequest):
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    return _handle(context, request)


def error_response(context: RequestContext, request: AddSharePartitionsToTxnRequest, code: ErrorCode):
    return AddSharePartitionsToTxnResponse(throttle_time_ms=0, error_code=int(code))
