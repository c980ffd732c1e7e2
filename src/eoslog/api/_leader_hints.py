"""KIP-951 leader discovery: a partition refused with NOT_LEADER_OR_FOLLOWER names its current leader.

Kafka 4.x's rules (KafkaApis), which we follow:
- Produce v10+: a partition answered NOT_LEADER_OR_FOLLOWER carries CurrentLeader (leader id, leader
  epoch); Fetch v16+ does the same for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH. Fetch v12-v15
  have the field but Kafka leaves it unset for them, and so do we.
- The leader and epoch are the ones this broker knows (its metadata cache: ZooKeeper's view); unknown
  is -1/-1, which is the field's default and so is not written at all.
- The response's NodeEndpoints lists each named leader once, at its endpoint of the listener the client
  came in on, and only when that leader is a live broker with such a listener.
A client then sends to the new leader at once instead of first asking for Metadata. A single node leads
every partition, never refuses one as NOT_LEADER_OR_FOLLOWER, and so never gives a hint.

``hints`` is the pure core (a cluster view and the refused partitions in, leaders and endpoints out);
``add_to_produce`` / ``add_to_fetch`` apply it to a response.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from eoslog.log.eager_future import mapped
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import FetchResponse, ProduceResponse

PRODUCE_MIN_VERSION = 10
FETCH_MIN_VERSION = 16
PRODUCE_CODES = frozenset({int(ErrorCode.NOT_LEADER_OR_FOLLOWER)})
FETCH_CODES = frozenset({int(ErrorCode.NOT_LEADER_OR_FOLLOWER), int(ErrorCode.FENCED_LEADER_EPOCH)})


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None


def hints(view, listener: str, partitions) -> tuple[dict[tuple[str, int], tuple[int, int]], list[NodeEndpoint]]:
    """For each (topic, partition): (leader id, leader epoch) as ``view`` has them, (-1, -1) if unknown;
    and the endpoints of those leaders that are live and serve ``listener``, by node id."""
    leaders: dict[tuple[str, int], tuple[int, int]] = {}
    endpoints: dict[int, NodeEndpoint] = {}
    for key in partitions:
        state = view.states.get(key)
        leader, epoch = (state.leader, state.leader_epoch) if state is not None else (-1, -1)
        leaders[key] = (leader, epoch)
        registration = view.brokers.get(leader) if leader >= 0 else None
        endpoint = registration.endpoint(listener) if registration is not None else None
        if endpoint is not None:
            endpoints[leader] = NodeEndpoint(leader, endpoint.host, endpoint.port, registration.rack)
    return leaders, [endpoints[node] for node in sorted(endpoints)]


def _apply(context, response, topics_of, codes, leader_cls, endpoint_cls):
    refused = [(key, p) for key, p in topics_of(response) if p.error_code in codes]
    if not refused:
        return response
    services = context.services
    leaders, endpoints = hints(services.metadata.view, context.listener_name,
                               [key for key, _ in refused])
    for key, p in refused:
        leader, epoch = leaders[key]
        # A new object: the default one may be shared between responses (api/fetch.py).
        p.current_leader = leader_cls(leader_id=leader, leader_epoch=epoch)
    response.node_endpoints = [endpoint_cls(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
                               for e in endpoints]
    return response


def _produce_partitions(response):
    for topic in response.responses:
        for p in topic.partition_responses:
            yield (topic.name, p.index), p


def _fetch_partitions(response):
    for topic in response.responses:
        for p in topic.partitions:
            yield (topic.topic, p.partition_index), p


def add_to_produce(context, result):
    """``result`` is what the Produce handler returned: a response, an awaitable of one, or None (acks=0)."""
    if context.api_version < PRODUCE_MIN_VERSION or result is None:
        return result

    def apply(response):
        if response is None:
            return None
        return _apply(context, response, _produce_partitions, PRODUCE_CODES,
                      ProduceResponse.LeaderIdAndEpoch, ProduceResponse.NodeEndpoint)

    if inspect.isawaitable(result):
        return mapped(result, apply)  # not a coroutine around it: see mapped
    return apply(result)


def add_to_fetch(context, response):
    """Fetch responses are built whole (api/fetch.py calls this on each one it answers)."""
    if context.api_version < FETCH_MIN_VERSION:
        return response
    return _apply(context, response, _fetch_partitions, FETCH_CODES,
                  FetchResponse.LeaderIdAndEpoch, FetchResponse.NodeEndpoint)
