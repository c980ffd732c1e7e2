"""TxnOffsetCommit (key 28), v0-3: offsets written inside a producer's transaction (KIP-98), visible
only after its COMMIT marker reaches ``__consumer_offsets``. v2+ carry the leader epoch, v3 the
member's generation for KIP-447 fencing. v4+ (KIP-890 error codes) are not advertised.

The group's ``__consumer_offsets`` partition must already be in the producer's ongoing transaction
(AddOffsetsToTxn): the transaction coordinator checks it, which also fences stale producer epochs
before anything is written."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from eoslog.api._group_common import commit_response, group_coordinator, respond_to_commit
from eoslog.api.offset_commit import split_known
from eoslog.cluster.topics import CONSUMER_OFFSETS
from eoslog.coordinator.runtime import Ownership
from eoslog.protocol.errors import CoordinatorLoadInProgressError
from eoslog.protocol.messages import TxnOffsetCommitResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import TxnOffsetCommitRequest

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 3



def handle(context: RequestContext, request: TxnOffsetCommitRequest):
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    coordinators = context.services.coordinators
    ownership = coordinators.transaction_ownership(request.transactional_id)
    if ownership is Ownership.NOT_COORDINATOR:
        return _verify_remotely_then_commit(context, request)
    if ownership is Ownership.LOAD_IN_PROGRESS:
        raise CoordinatorLoadInProgressError(f"the transaction coordinator of {request.transactional_id!r} "
                                             "is loading here")
    # Raises (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, ...) unless AddOffsetsToTxn put the group's
    # partition into this producer's ongoing transaction; error_response answers every partition.
    coordinators.transactions.verify_partition_in_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, CONSUMER_OFFSETS,
        group_coordinator(context).core.partition_for(request.group_id))
    return _commit(context, request)


async def _verify_remotely_then_commit(context, request):
    """Cluster mode, the transaction coordinated by another broker: the same check, asked over the wire."""
    await context.services.transaction_verification.verify_one_remotely(
        request.transactional_id, request.producer_id, request.producer_epoch, CONSUMER_OFFSETS,
        group_coordinator(context).core.partition_for(request.group_id))
    result = _commit(context, request)
    return await result if inspect.isawaitable(result) else result


def _commit(context, request):
    version = context.api_version
    coordinator = group_coordinator(context)
    readable = context.authorized_names(AclOperation.READ, ResourceType.TOPIC, {t.name for t in request.topics})
    commits, errors = split_known(context.services, request.topics,
                                  lambda p: p.committed_leader_epoch if version >= 2 else -1, readable)
    answer = None
    if commits:
        answer = coordinator.call(
            "txn_commit_offsets", request.group_id, request.producer_id, request.producer_epoch, commits,
            member_id=request.member_id if version >= 3 else "",
            generation_id=request.generation_id if version >= 3 else -1,
            group_instance_id=request.group_instance_id if version >= 3 else None)
    return respond_to_commit(TxnOffsetCommitResponse, request, answer, errors)


def error_response(context: RequestContext, request: TxnOffsetCommitRequest, error_code: ErrorCode):
    errors = {}
    return commit_response(TxnOffsetCommitResponse, request, errors, default=int(error_code))
