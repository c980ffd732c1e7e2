"""WriteTxnMarkers (key 27), v1: write COMMIT/ABORT markers on this broker's partitions.

A transaction coordinator writes its markers in-process where it leads the partition, and sends them
here where another broker leads it (coordinator/transaction/markers.py). Admin tools use it too, e.g. to
abort a hanging transaction (KIP-664: `eoslog transactions abort`) with the producer id, epoch and
coordinator epoch that DescribeProducers reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.coordinator.transaction.metadata import TopicPartition, TransactionResult
from eoslog.protocol.messages import WriteTxnMarkersResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import WriteTxnMarkersRequest

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 1

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


def _result(marker, codes) -> MarkerResult:
    return MarkerResult(producer_id=marker.producer_id, topics=[
        TopicResult(name=topic.name, partitions=[
            PartitionResult(partition_index=index, error_code=int(codes(TopicPartition(topic.name, index))))
            for index in topic.partition_indexes])
        for topic in marker.topics])


async def _handle(context, request):
    markers = context.services.coordinators.markers
    results = []
    for marker in request.markers:
        tps = [TopicPartition(t.name, i) for t in marker.topics for i in t.partition_indexes]
        result = TransactionResult.COMMIT if marker.transaction_result else TransactionResult.ABORT
        # Written here or refused: a leader that moved answers NOT_LEADER_OR_FOLLOWER and the sender
        # (another broker's coordinator, or an admin tool) asks the new leader.
        codes = await markers.write(marker.producer_id, marker.producer_epoch, result, tps, marker.coordinator_epoch,
                                    follow_leaders=False)
        results.append(_result(marker, codes.__getitem__))
    return WriteTxnMarkersResponse(markers=results)


def handle(context: RequestContext, request: WriteTxnMarkersRequest):
    context.require(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)  # brokers' own traffic
    return _handle(context, request)


def error_response(context: RequestContext, request: WriteTxnMarkersRequest, code: ErrorCode):
    return WriteTxnMarkersResponse(markers=[_result(m, lambda tp: code) for m in request.markers])
