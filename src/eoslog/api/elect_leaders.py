"""ElectLeaders (key 43), v0-2: preferred (0) or unclean (1) leader election, answered by the controller.

As in Kafka, only the active controller takes the request (others answer NOT_CONTROLLER and the admin
client retries at the controller Metadata names). A single node has nothing to elect: every partition
asked for is ELECTION_NOT_NEEDED (cluster/admin.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import ElectLeadersResponse
from eoslog.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ElectLeadersRequest

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2

PREFERRED, UNCLEAN = 0, 1
ReplicaElectionResult = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = ElectLeadersResponse.PartitionResult


async def _elect(context, request):
    election_type = request.election_type if context.api_version >= 1 else PREFERRED
    wanted = None
    if request.topic_partitions is not None:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    # NOT_CONTROLLER (raised) answers the whole request: the admin client retries at the controller.
    results = await context.registry.admin.elect_leaders(wanted, unclean=election_type == UNCLEAN)
    by_topic: dict[str, list] = {}
    for (topic, index), error in sorted(results.items()):
        code = ErrorCode[error] if error else ErrorCode.NONE
        by_topic.setdefault(topic, []).append(PartitionResult(
            partition_id=index, error_code=int(code), error_message=None if not error else code.description))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=[
        ReplicaElectionResult(topic=t, partition_result=r) for t, r in by_topic.items()])


def handle(context: RequestContext, request: ElectLeadersRequest):
    context.require(AclOperation.ALTER, ResourceType.CLUSTER)
    return _elect(context, request)


def error_response(context: RequestContext, request: ElectLeadersRequest, code: ErrorCode):
    return ElectLeadersResponse(throttle_time_ms=0, error_code=int(code), replica_election_results=[
        ReplicaElectionResult(topic=t.topic, partition_result=[
            PartitionResult(partition_id=p, error_code=int(code), error_message=None) for p in t.partitions])
        for t in request.topic_partitions or []])
