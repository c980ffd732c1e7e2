"""AddPartitionsToTxn (key 24): the partitions a transactional producer is about to write join its
transaction.

v0-3 are the clients' form (one transaction). v4-5 are the brokers' (KIP-890): a partition leader asks
the coordinator about several transactions at once, each either VerifyOnly (part 1: is the partition in
the ongoing transaction?) or not (part 2, transaction version 2: add it, for a Produce v12+). v4+ needs
CLUSTER_ACTION, as in Kafka; v5 only allows the TRANSACTION_ABORTABLE error, never answered here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.coordinator.transaction.metadata import TopicPartition
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import AddPartitionsToTxnResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import AddPartitionsToTxnRequest

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5
BROKER_VERSIONS_SINCE = 4

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
TransactionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult


def _requested(request) -> list[TopicPartition]:
    return [TopicPartition(topic.name, index) for topic in request.v3_and_below_topics for index in topic.partitions]


def _topic_results(codes: dict[TopicPartition, int]) -> list:
    by_topic: dict[str, list] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(PartitionResult(partition_index=tp.partition,
                                                                 partition_error_code=int(code)))
    return [TopicResult(name=name, results_by_partition=results) for name, results in by_topic.items()]


def _response(codes: dict[TopicPartition, int]):
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0,
                                      results_by_topic_v3_and_below=_topic_results(codes))


def _transaction_partitions(transaction) -> list[TopicPartition]:
    return [TopicPartition(topic.name, index) for topic in transaction.topics for index in topic.partitions]


async def _handle(context, request):
    coordinator = context.services.coordinators.transactions
    codes = await coordinator.add_partitions_to_txn(
        request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch, _requested(request), context.api_version)
    return _response(codes)


async def _handle_brokers(context, request):
    coordinator = context.services.coordinators.transactions
    results = []
    for transaction in request.transactions:
        codes = await coordinator.add_partitions_for_broker(
            transaction.transactional_id, transaction.producer_id, transaction.producer_epoch,
            _transaction_partitions(transaction), transaction.verify_only, context.api_version)
        results.append(TransactionResult(transactional_id=transaction.transactional_id,
                                         topic_results=_topic_results(codes)))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results)


def handle(context: RequestContext, request: AddPartitionsToTxnRequest):
    if context.api_version >= BROKER_VERSIONS_SINCE:
        context.require(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)  # brokers' own traffic
        return _handle_brokers(context, request)
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id)
    requested = _requested(request)
    writable = context.authorized_names(AclOperation.WRITE, ResourceType.TOPIC, {tp.topic for tp in requested})
    if len(writable) < len({tp.topic for tp in requested}):
        # Nothing is added when any topic is refused; the others were not attempted (Kafka's answer).
        return _response({tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp.topic not in writable
                          else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in requested})
    return _handle(context, request)


def error_response(context: RequestContext, request: AddPartitionsToTxnRequest, code: ErrorCode):
    if context.api_version >= BROKER_VERSIONS_SINCE:
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=int(code), results_by_transaction=[])
    return _response({tp: code for tp in _requested(request)})
