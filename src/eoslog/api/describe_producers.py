"""DescribeProducers (key 61, KIP-664), v0: the producers a partition remembers, with the first offset of
each one's open transaction (what `eoslog transactions find-hanging` looks at)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.messages import DescribeProducersResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import DescribeProducersRequest

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState


def describe_partition(partition) -> list[ProducerState]:
    return [ProducerState(producer_id=e.producer_id, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                          last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                          current_txn_start_offset=(-1 if e.current_txn_first_offset is None
                                                    else e.current_txn_first_offset))
            for e in partition.producer_state.entries()]


def handle(context: RequestContext, request: DescribeProducersRequest):
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            try:
                context.require(AclOperation.READ, ResourceType.TOPIC, topic.name)
                producers = describe_partition(context.services.replicas.leader_partition(topic.name, index))
            except Exception as exc:  # noqa: BLE001 - per-partition outcome, mapped in one place
                partitions.append(PartitionResponse(partition_index=index, error_code=int(error_code_for(exc)),
                                                    error_message=str(exc), active_producers=[]))
                continue
            partitions.append(PartitionResponse(partition_index=index, error_code=0, error_message=None,
                                                active_producers=producers))
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def error_response(context: RequestContext, request: DescribeProducersRequest, code: ErrorCode):
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[PartitionResponse(partition_index=i, error_code=int(code),
                                                                 error_message=None, active_producers=[])
                                               for i in t.partition_indexes])
        for t in request.topics])
