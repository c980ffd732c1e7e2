"""Topics of a ZooKeeper-coordinated cluster: the registry's read interface over the cluster view, and
the admin operations (create, grow, delete, configs) as ZooKeeper writes.

Reads look like :class:`eoslog.cluster.topics.TopicRegistry` (``topics``, ``get``, ``require``,
``by_id``) so the API handlers and coordinators read topics the same way on a single node and in a
cluster. Writes go to ZooKeeper in Kafka's layout; every broker (this one included) acts on them when
its next view shows them, and an operation returns once this broker's view shows the partitions led.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from kazoo.exceptions import NodeExistsError, NoNodeError

from eoslog.cluster.election import (
    ReplicaAssignmentError,
    assign_replicas,
    check_manual_assignment,
    check_manual_assignments,
)
from eoslog.cluster.topics import TopicInfo, validate_topic_name
from eoslog.cluster.zk.layout import NO_LEADER, ClusterView, TopicAssignment
from eoslog.protocol.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for_code,
)

if TYPE_CHECKING:
    from eoslog.cluster.service import ClusterService

InvalidReplicaAssignmentError = error_for_code(ErrorCode.INVALID_REPLICA_ASSIGNMENT)


class ClusterTopics:
    def __init__(self, service: ClusterService) -> None:
        self.service = service
        self._cache_view: ClusterView | None = None
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}

    # ---- the registry's read interface ------------------------------------------------------------------

    def _refresh(self) -> None:
        view = self.service.view
        if view is self._cache_view:
            return
        topics = {name: TopicInfo(name, a.topic_id, a.partition_count, dict(view.configs.get(name, {})))
                  for name, a in view.topics.items()}
        self._topics, self._by_id = topics, {t.topic_id: t for t in topics.values()}
        self._cache_view = view

    @property
    def topics(self) -> dict[str, TopicInfo]:
        self._refresh()
        return self._topics

    @property
    def by_id(self) -> dict[uuid.UUID, TopicInfo]:
        self._refresh()
        return self._by_id

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def require(self, name: str) -> TopicInfo:
        info = self.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return info

    def assignment(self, name: str) -> TopicAssignment | None:
        return self.service.view.topics.get(name)

    # ---- admin --------------------------------------------------------------------------------------------

    def plan_assignment(self, partitions: int, replication_factor: int,
                        manual: dict[int, list[int]] | None = None, first_partition: int = 0
                        ) -> dict[int, tuple[int, ...]]:
        view = self.service.view
        if manual:  # a growing topic's new partitions have as many replicas as its others, as in Kafka
            try:
                return check_manual_assignments(manual, view.brokers, first_partition,
                                                replication_factor if first_partition else None)
            except ReplicaAssignmentError as exc:
                raise InvalidReplicaAssignmentError(str(exc)) from None
        racks = {b: r.rack for b, r in view.brokers.items()}
        try:
            return assign_replicas(racks, partitions, replication_factor, first_partition=first_partition,
                                   start=hash_start(len(racks)))
        except ReplicaAssignmentError as exc:
            raise InvalidReplicationFactorError(str(exc)) from None

    async def create(self, name: str, replicas: dict[int, tuple[int, ...]], configs: dict[str, str],
                     timeout_s: float) -> TopicInfo:
        validate_topic_name(name)
        if name in self.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if not replicas:
            raise InvalidPartitionsError("a topic needs at least one partition")
        assignment = TopicAssignment(name, uuid.uuid4(), replicas)
        try:
            await asyncio.to_thread(self.service.zk.create_topic, assignment, configs)
        except NodeExistsError:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists") from None
        self.service.refresh()
        # Led, and this broker's own replicas open (their files are made off the loop): a client that
        # produces here right after the answer finds them.
        await self.service.wait_for(lambda v: _all_led(v, name) and self.service.replicas.serves(name), timeout_s)
        return TopicInfo(name, assignment.topic_id, len(replicas), dict(configs))

    async def add_partitions(self, name: str, count: int, timeout_s: float,
                             manual: dict[int, list[int]] | None = None) -> TopicInfo:
        assignment = self.assignment(name)
        if assignment is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        old = assignment.partition_count
        if count <= old:
            raise InvalidPartitionsError(f"topic {name} has {old} partitions; the new count {count} must be larger")
        factor = len(assignment.replicas[0])
        added = self.plan_assignment(count - old, factor, manual, first_partition=old)
        grown = TopicAssignment(name, assignment.topic_id, {**assignment.replicas, **added})
        await asyncio.to_thread(self.service.zk.set_assignment, grown)
        self.service.refresh()
        # The view read before the write has the old partitions, all led: wait for the grown one.
        await self.service.wait_for(lambda v: _all_led(v, name, count) and self.service.replicas.serves(name),
                                    timeout_s)
        return self.require(name)

    async def reassign(self, name: str, targets: dict[int, list[int] | None]) -> None:
        """AlterPartitionReassignments (KIP-455): each partition to its target replicas, or (None) its
        reassignment cancelled. The new replicas join as followers; the controller finishes the move
        once they are in the ISR."""
        assignment = self.assignment(name)
        if assignment is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        replicas, adding, removing = dict(assignment.replicas), dict(assignment.adding), dict(assignment.removing)
        view = self.service.view
        for index, target in targets.items():
            if index not in replicas:
                raise UnknownTopicOrPartitionError(f"{name}-{index} does not exist")
            original = assignment.original(index)
            adding.pop(index, None)
            removing.pop(index, None)
            if target is None:
                replicas[index] = original
                continue
            try:
                target = check_manual_assignment(target, view.brokers)
            except ReplicaAssignmentError as exc:
                raise InvalidReplicationFactorError(str(exc)) from None
            replicas[index] = (*target, *(r for r in original if r not in target))
            if set(target) != set(original):
                adding[index] = tuple(r for r in target if r not in original)
                removing[index] = tuple(r for r in original if r not in target)
            else:
                replicas[index] = target  # a new order only: the preferred leader changes
        changed = TopicAssignment(name, assignment.topic_id, replicas, adding, removing)
        await asyncio.to_thread(self.service.zk.set_assignment, changed)
        self.service.refresh()

    async def delete(self, name: str) -> TopicInfo:
        info = self.require(name)
        try:
            await asyncio.to_thread(self.service.zk.delete_topic, name)
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist") from None
        self.service.refresh()
        await self.service.wait_for(lambda v: name not in v.topics, 10)
        return info

    async def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.require(name)
        await asyncio.to_thread(self.service.zk.set_topic_config, name, configs)
        self.service.refresh()
        await self.service.wait_for(lambda v: v.configs.get(name) == configs, 10)


def hash_start(brokers: int) -> int:
    # Kafka starts at a random broker so leaders of many topics spread; we do the same.
    import random

    return random.randrange(max(brokers, 1))


def _all_led(view: ClusterView, name: str, partitions: int = 1) -> bool:
    """The topic has at least ``partitions`` partitions in ``view``, and every one has a leader."""
    assignment = view.topics.get(name)
    if assignment is None or assignment.partition_count < partitions:
        return False
    return all((s := view.states.get((name, p))) is not None and s.leader != NO_LEADER
               for p in assignment.replicas)
