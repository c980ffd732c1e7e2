"""DeleteRecords (key 21): advance a partition's log start offset (offset -1 means the high watermark)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.messages import DeleteRecordsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DeleteRecordsRequest

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


def handle(context: RequestContext, request: DeleteRecordsRequest):
    services = context.services
    topics = []
    for topic in request.topics:
        partitions = []
        topics.append(TopicResult(name=topic.name, partitions=partitions))
        for wanted in topic.partitions:
            try:
                context.require(AclOperation.DELETE, ResourceType.TOPIC, topic.name)
                low_watermark = services.replicas.leader_partition(topic.name, wanted.partition_index).delete_records_before(wanted.offset)
                partitions.append(PartitionResult(partition_index=wanted.partition_index,
                                                  low_watermark=low_watermark, error_code=0))
            except Exception as exc:  # noqa: BLE001
                partitions.append(PartitionResult(partition_index=wanted.partition_index, low_watermark=-1,
                                                  error_code=int(error_code_for(exc))))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
