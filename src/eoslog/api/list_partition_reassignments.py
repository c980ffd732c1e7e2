"""ListPartitionReassignments (key 46), v0: the reassignments in progress (KIP-455), from the cluster view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.messages import ListPartitionReassignmentsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import ListPartitionReassignmentsRequest

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0

Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
Partition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment


def handle(context: RequestContext, request: ListPartitionReassignmentsRequest):
    context.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    wanted = None if request.topics is None else {t.name: set(t.partition_indexes) for t in request.topics}
    by_topic: dict[str, list] = {}
    for name, index, replicas, adding, removing in context.registry.admin.reassignments():
        if wanted is not None and index not in wanted.get(name, ()):
            continue
        by_topic.setdefault(name, []).append(Partition(partition_index=index, replicas=list(replicas),
                                                       adding_replicas=list(adding), removing_replicas=list(removing)))
    topics = [Topic(name=name, partitions=partitions) for name, partitions in by_topic.items()]
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=topics)


def error_response(context: RequestContext, request: ListPartitionReassignmentsRequest, code: ErrorCode):
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=int(code), error_message=None, topics=[])
