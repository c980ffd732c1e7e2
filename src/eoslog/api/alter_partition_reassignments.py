"""AlterPartitionReassignments (key 45), v0: move partitions to new replicas, or cancel a move (KIP-455).

The change is written to ZooKeeper (the topic znode's ``adding_replicas``/``removing_replicas``); the new
replicas catch up as followers, and the controller finishes the move once they are in sync
(cluster/controller.py). A single node has nowhere to move anything: a target that is this broker is
answered done, as Kafka answers it on a cluster of one (cluster/admin.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.messages import AlterPartitionReassignmentsResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.errors import ErrorCode
    from eoslog.protocol.messages import AlterPartitionReassignmentsRequest

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 0

TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


async def _alter(context, request):
    admin = context.registry.admin
    responses = []
    for topic in request.topics:
        targets = {p.partition_index: (list(p.replicas) if p.replicas is not None else None) for p in topic.partitions}
        try:
            await admin.reassign(topic.name, targets)
            code, message = 0, None
        except Exception as exc:  # noqa: BLE001 - per-topic outcome, mapped in one place
            code, message = int(error_code_for(exc)), str(exc)
        responses.append(TopicResponse(name=topic.name, partitions=[
            PartitionResponse(partition_index=p.partition_index, error_code=code, error_message=message)
            for p in topic.partitions]))
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, allow_replication_factor_change=True,
                                               error_code=0, error_message=None, responses=responses)


def handle(context: RequestContext, request: AlterPartitionReassignmentsRequest):
    context.require(AclOperation.ALTER, ResourceType.CLUSTER)
    return _alter(context, request)


def error_response(context: RequestContext, request: AlterPartitionReassignmentsRequest, code: ErrorCode):
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=True, error_code=int(code), error_message=None,
        responses=[TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index, error_code=int(code), error_message=None)
            for p in t.partitions]) for t in request.topics])
