"""AddPartitionsToTxn (key 24), v0-3: the partitions a transactional producer is about to write join its
transaction. v4+ (KIP-890's batched, broker-to-broker verify form) is not advertised: this single node
verifies in-process (Partition.transaction_verifier)."""

from __future__ import annotations

from eoslog.coordinator.transaction.metadata import TopicPartition
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import AddPartitionsToTxnResponse
from eoslog.security.acl import AclOperation, ResourceType

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 3

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


def _requested(request) -> list[TopicPartition]:
    return [TopicPartition(topic.name, index) for topic in request.v3_and_below_topics for index in topic.partitions]


def _response(codes: dict[TopicPartition, int]):
    by_topic: dict[str, list] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(PartitionResult(partition_index=tp.partition,
                                                                 partition_error_code=int(code)))
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0, error_code=0,
        results_by_topic_v3_and_below=[TopicResult(name=name, results_by_partition=results)
                                       for name, results in by_topic.items()])


async def _handle(context, request):
    coordinator = context.broker.transaction_coordinator
    codes = await coordinator.add_partitions_to_txn(
        request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch, _requested(request), context.api_version)
    return _response(codes)


def handle(context, request):
    context.require(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id)
    requested = _requested(request)
    writable = context.authorized_names(AclOperation.WRITE, ResourceType.TOPIC, {tp.topic for tp in requested})
    if len(writable) < len({tp.topic for tp in requested}):
        # Nothing is added when any topic is refused; the others were not attempted (Kafka's answer).
        return _response({tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp.topic not in writable
                          else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in requested})
    return _handle(context, request)


def error_response(context, request, code):
    return _response({tp: code for tp in _requested(request)})
