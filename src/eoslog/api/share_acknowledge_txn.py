"""ShareAcknowledgeTxn (eoslog's private key 32289 = 0x7E21), v0: a transactional producer acknowledges a
share group's records inside its transaction (docs/share-groups.md, "Step 6"). Sent to the share
partition's leader. Before anything is applied, the leader asks the transaction coordinator whether the
share partition's ``__share_group_state`` partition is in this producer's ongoing transaction at this
epoch (registered by AddSharePartitionsToTxn; KIP-890's verification, in-process or over the wire as
TxnOffsetCommit asks): a zombie, an unregistered share partition or an ended transaction is refused there.
WRITE on the transactional id, READ on the group and on each topic."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from eoslog.api._share_common import asks, leader
from eoslog.cluster.topics import SHARE_GROUP_STATE
from eoslog.coordinator.runtime import Ownership
from eoslog.coordinator.share.log_format import SharePartitionKey
from eoslog.coordinator.share_transactions.extension import share_state_partition
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import CoordinatorLoadInProgressError, ErrorCode, InvalidRequestError
from eoslog.protocol.messages import ShareAcknowledgeTxnResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ShareAcknowledgeTxnRequest

API_KEY = 0x7E21
MIN_VERSION = 0
MAX_VERSION = 0

TopicResponse = ShareAcknowledgeTxnResponse.TopicResponse
PartitionResponse = ShareAcknowledgeTxnResponse.PartitionResponse
LeaderIdAndEpoch = ShareAcknowledgeTxnResponse.LeaderIdAndEpoch
# The produce path's spelling of a fence (INVALID_PRODUCER_EPOCH) is answered in the transactional one.
_SPELLING = {ErrorCode.INVALID_PRODUCER_EPOCH: ErrorCode.PRODUCER_FENCED}


def handle(context: RequestContext, request: ShareAcknowledgeTxnRequest):
    if not request.group_id or not request.transactional_id:
        raise InvalidRequestError("GroupId and TransactionalId must be given")
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    context.require(AclOperation.READ, ResourceType.GROUP, request.group_id)
    return _handle(context, request)


async def _handle(context, request):
    manager = context.services.share_partitions()
    partitions = asks(context, request.topics, renew_only=False)
    results = await asyncio.gather(*(_acknowledge(context, request, manager, ask) for ask in partitions))
    by_topic: dict = {}
    for ask, (code, message) in zip(partitions, results):
        leader_id, leader_epoch = leader(context, ask.topic_id, ask.partition)
        by_topic.setdefault(ask.topic_id, []).append(PartitionResponse(
            partition_index=ask.partition, error_code=int(_SPELLING.get(code, code)), error_message=message,
            current_leader=LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)))
    return ShareAcknowledgeTxnResponse(throttle_time_ms=0, error_code=0, error_message=None, responses=[
        TopicResponse(topic_id=topic_id, partitions=answers) for topic_id, answers in by_topic.items()])


async def _acknowledge(context, request, manager, ask) -> tuple[ErrorCode, str | None]:
    if ask.error is not ErrorCode.NONE:
        return ask.error, None
    topic = manager.topic_name(ask.topic_id)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_ID, None
    key = SharePartitionKey(request.group_id, ask.topic_id, ask.partition)
    try:
        manager.partition(topic, ask.partition)  # NOT_LEADER_OR_FOLLOWER before asking anyone anything
        await _verify(context, request, key)
    except Exception as exc:  # noqa: BLE001 - the partition's error, mapped in one place
        return error_code_for(exc), str(exc) or None
    return await manager.acknowledge_in_transaction(
        key, topic, request.member_id, request.producer_id, request.producer_epoch, request.transaction_timeout_ms,
        ask.acknowledgements, _delivery_counts(request, ask))


def _delivery_counts(request, ask) -> tuple[int, ...]:
    """Per batch of ``ask``, the delivery count the client saw (-1: not said), in the batches' order."""
    counts = tuple(b.delivery_count for t in request.topics if t.topic_id == ask.topic_id
                   for p in t.partitions if p.partition_index == ask.partition
                   for b in (p.acknowledgement_batches or ()))
    return counts if len(counts) == len(ask.acknowledgements) else ()


async def _verify(context, request, key: SharePartitionKey) -> None:
    """Raises unless the share partition's state partition is in the producer's ongoing transaction."""
    coordinators = context.services.coordinators
    coordinators.ensure_topic(SHARE_GROUP_STATE)
    tp = share_state_partition(key, coordinators.partition_count(SHARE_GROUP_STATE))
    ownership = coordinators.transaction_ownership(request.transactional_id)
    if ownership is Ownership.NOT_COORDINATOR:
        await context.services.transaction_verification.verify_one_remotely(
            request.transactional_id, request.producer_id, request.producer_epoch, tp.topic, tp.partition)
        return
    if ownership is Ownership.LOAD_IN_PROGRESS:
        raise CoordinatorLoadInProgressError(f"the transaction coordinator of {request.transactional_id!r} "
                                             "is loading here")
    coordinators.transactions.verify_partition_in_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, tp.topic, tp.partition)


def error_response(context: RequestContext, request: ShareAcknowledgeTxnRequest, code: ErrorCode):
    return ShareAcknowledgeTxnResponse(throttle_time_ms=0, error_code=int(_SPELLING.get(code, code)),
                                       error_message=None, responses=[])
