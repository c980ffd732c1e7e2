"""What this broker tells clients about the cluster: its brokers at the endpoints of a listener, the
controller, each topic's partitions (leader, epoch, replicas, ISR), the leader and coordinator of a
partition (Kafka's MetadataCache). Metadata, DescribeCluster, DescribeTopicPartitions, FindCoordinator
and the KIP-951 leader hints ask it the same questions in both modes.

Two answers, one interface:
- :class:`SoleBrokerMetadataCache`: a broker without ZooKeeper is a cluster of one. It is the only
  broker, the controller and every partition's leader (epoch 0, ISR of itself), at the advertised
  address of whichever listener the client came in on.
- :class:`ZkMetadataCache`: the cluster view read from ZooKeeper (cluster/service.py). A partition
  without a live leader says LEADER_NOT_AVAILABLE, so clients wait and ask again; a broker without the
  client's listener is left out, and a leader without it is LISTENER_NOT_FOUND (v6+), as in Kafka.

Contract: only the broker's event loop calls it; answers are built from the view of the moment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from eoslog.cluster.zk.layout import ClusterView
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.wire import FrozenArray

if TYPE_CHECKING:
    from eoslog.protocol.messages import MetadataResponse

NO_LEADER = -1
NOT_AVAILABLE = (int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1)


def _partition_info() -> type:
    """Metadata's partition class (PartitionInfo), built from the specs at the first Metadata answer (or
    by the broker's warm-up once its port is open), not when the broker makes its cache before listening."""
    built = globals().get("PartitionInfo")
    if built is None:
        from eoslog.protocol.messages import MetadataResponse

        built = globals()["PartitionInfo"] = MetadataResponse.MetadataResponsePartition
    return built


def __getattr__(name: str):
    if name == "PartitionInfo":
        return _partition_info()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class BrokerEndpoint(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


class MetadataCache(Protocol):
    view: ClusterView  # the leaders and brokers KIP-951 hints name (empty on a sole broker)

    def controller_id(self) -> int: ...

    def brokers(self, listener: str) -> list[BrokerEndpoint]:
        """The live brokers that serve ``listener``, by id, at their endpoint of it."""

    def topic_partitions(self, info: Any, listener: str, version: int) -> Sequence[MetadataResponse.MetadataResponsePartition]:
        """An existing topic's partitions as Metadata (``version``) answers them."""

    def coordinator(self, topic: str, index_of: Callable[[int], int], listener: str) -> tuple[int, int, str, int]:
        """FindCoordinator's (error, node, host, port) for a key of the internal topic; ``index_of(count)``
        is the key's partition when the topic has ``count`` partitions."""


class SoleBrokerMetadataCache:
    def __init__(self, node_id: int, advertised: Callable[[str], tuple[str, int]]) -> None:
        """``advertised(listener)``: this broker's advertised address for that listener."""
        self.node_id = node_id
        self._advertised = advertised
        self.view = ClusterView()

    def controller_id(self) -> int:
        return self.node_id

    def brokers(self, listener: str) -> list[BrokerEndpoint]:
        host, port = self._advertised(listener)
        return [BrokerEndpoint(self.node_id, host, port, None)]

    def topic_partitions(self, info: Any, listener: str, version: int) -> Sequence[MetadataResponse.MetadataResponsePartition]:
        return _sole_partitions(self.node_id, info.partitions)

    def coordinator(self, topic: str, index_of: Callable[[int], int], listener: str) -> tuple[int, int, str, int]:
        host, port = self._advertised(listener)
        return 0, self.node_id, host, port


@lru_cache(maxsize=64)
def _sole_partitions(node: int, count: int) -> FrozenArray:
    """On one node a topic's partitions are all alike, so (node, count) fixes the array: built and
    encoded once, not per request (50 clients asking about 1,000 partitions cost the broker ~4 ms each)."""
    partition_info = _partition_info()
    return FrozenArray(
        partition_info(error_code=0, partition_index=index, leader_id=node, leader_epoch=0,
                      replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
        for index in range(count)
    )


class ZkMetadataCache:
    def __init__(self, cluster: Any, request_internal_topic: Callable[[str], None]) -> None:
        """``cluster``: the cluster service, whose ``view`` is the latest read from ZooKeeper;
        ``request_internal_topic(name)``: an internal topic asked of the controller on first use."""
        self._cluster = cluster
        self._request_internal_topic = request_internal_topic

    @property
    def view(self) -> ClusterView:
        return self._cluster.view

    def controller_id(self) -> int:
        return self.view.controller_id

    def brokers(self, listener: str) -> list[BrokerEndpoint]:
        return [BrokerEndpoint(b.broker_id, e.host, e.port, b.rack)
                for b in sorted(self.view.brokers.values(), key=lambda b: b.broker_id)
                if (e := b.endpoint(listener)) is not None]

    def topic_partitions(self, info: Any, listener: str, version: int) -> Sequence[MetadataResponse.MetadataResponsePartition]:
        view = self.view
        assignment = view.topics.get(info.name)
        partitions = []
        partition_info = _partition_info()
        for index, replicas in sorted(assignment.replicas.items()) if assignment is not None else ():
            state = view.states.get((info.name, index))
            leader = state.leader if state is not None else NO_LEADER
            code = 0 if leader >= 0 and leader in view.brokers else int(ErrorCode.LEADER_NOT_AVAILABLE)
            if code == 0 and view.brokers[leader].endpoint(listener) is None:
                code = int(ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE)
            partitions.append(partition_info(
                error_code=code, partition_index=index, leader_id=leader if code == 0 else NO_LEADER,
                leader_epoch=state.leader_epoch if state is not None else -1, replica_nodes=list(replicas),
                isr_nodes=list(state.isr) if state is not None else [],
                offline_replicas=[r for r in replicas if r not in view.brokers]))
        return partitions

    def coordinator(self, topic: str, index_of: Callable[[int], int], listener: str) -> tuple[int, int, str, int]:
        """The leader of the key's internal partition, at its endpoint of the client's listener. The
        internal topic is created on first use, as in Kafka; until it has a leader (one serving that
        listener) the answer is COORDINATOR_NOT_AVAILABLE."""
        view = self.view
        assignment = view.topics.get(topic)
        if assignment is None:
            self._request_internal_topic(topic)
            return NOT_AVAILABLE
        state = view.states.get((topic, index_of(assignment.partition_count)))
        registration = view.brokers.get(state.leader) if state is not None else None
        endpoint = registration.endpoint(listener) if registration is not None else None
        if endpoint is None:
            return NOT_AVAILABLE
        return 0, registration.broker_id, endpoint.host, endpoint.port
