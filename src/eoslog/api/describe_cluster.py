"""DescribeCluster (key 60): the registered brokers, the cluster id and the controller (a single node is
its own controller). On a cluster each broker is given by its endpoint of the listener the request came
in on; a broker without that listener is left out, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import DescribeClusterResponse
from eoslog.security.acl import ResourceType

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import DescribeClusterRequest

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1
BROKERS_ENDPOINT = 1
UNKNOWN_OPERATIONS = -(2**31)


def handle(context: RequestContext, request: DescribeClusterRequest):
    services = context.services
    if context.api_version >= 1 and request.endpoint_type not in (BROKERS_ENDPOINT,):
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.MISMATCHED_ENDPOINT_TYPE), error_message="only the brokers endpoint exists",
            endpoint_type=request.endpoint_type, cluster_id=services.cluster_id, controller_id=-1,
            brokers=[], cluster_authorized_operations=UNKNOWN_OPERATIONS)
    listener = context.listener_name  # each broker's endpoint of the client's listener
    brokers = [DescribeClusterResponse.DescribeClusterBroker(
        broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=False)
        for b in services.metadata.brokers(listener)]
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=BROKERS_ENDPOINT,
        cluster_id=services.cluster_id, controller_id=services.metadata.controller_id(),
        brokers=brokers,
        cluster_authorized_operations=context.authorized_operations(ResourceType.CLUSTER)
        if request.include_cluster_authorized_operations else UNKNOWN_OPERATIONS,
    )
