"""ListPartitionReassignments (key 46), v0: the reassignments in progress (KIP-455), from the cluster view."""

from __future__ import annotations

from eoslog.protocol.messages import ListPartitionReassignmentsResponse
from eoslog.security.acl import AclOperation, ResourceType

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0

Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
Partition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment


def handle(context, request):
    context.require(AclOperation.DESCRIBE, ResourceType.CLUSTER)
    cluster = context.broker.cluster
    topics = []
    if cluster is not None:
        wanted = None if request.topics is None else {t.name: set(t.partition_indexes) for t in request.topics}
        for name, assignment in sorted(cluster.view.topics.items()):
            moving = sorted(set(assignment.adding) | set(assignment.removing))
            if wanted is not None:
                moving = [p for p in moving if p in wanted.get(name, ())]
            if moving:
                topics.append(Topic(name=name, partitions=[Partition(
                    partition_index=p, replicas=list(assignment.replicas[p]),
                    adding_replicas=list(assignment.adding.get(p, ())),
                    removing_replicas=list(assignment.removing.get(p, ()))) for p in moving]))
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=topics)


def error_response(context, request, code):
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=int(code), error_message=None, topics=[])
