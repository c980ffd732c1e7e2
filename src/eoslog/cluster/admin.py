"""Topic administration as the admin APIs ask for it (Kafka's AdminManager): CreateTopics, DeleteTopics,
CreatePartitions and IncrementalAlterConfigs, and the partition moves the controller carries out
(ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments), the same on a single node and
in a cluster.

Validation happens here once; what differs by mode is only where the change is written: the local
topic registry (topics.json) and logs, or ZooKeeper, whose change every broker then applies, and whose
answer waits (up to the request's timeout) until this broker's view shows the partitions led.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from eoslog.cluster.election import ReplicaAssignmentError, check_manual_assignments
from eoslog.cluster.topic_configs import check_names
from eoslog.cluster.topics import INTERNAL_TOPICS, TopicInfo, validate_topic_name
from eoslog.protocol.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    error_for_code,
)

if TYPE_CHECKING:
    from eoslog.cluster.registry import PartitionRegistry

NO_TOPIC_ID = uuid.UUID(int=0)
InvalidReplicaAssignmentError = error_for_code(ErrorCode.INVALID_REPLICA_ASSIGNMENT)
NotControllerError = error_for_code(ErrorCode.NOT_CONTROLLER)
NoReassignmentInProgressError = error_for_code(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)


class TopicAdmin:
    def __init__(self, registry: PartitionRegistry) -> None:
        self.registry = registry

    @property
    def _clustered(self) -> bool:
        return self.registry.cluster is not None

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]] | None, configs: dict[str, str], *,
                           validate_only: bool, timeout_s: float) -> tuple[TopicInfo, int]:
        """The topic made (or, validate_only, what would be made) and its replication factor."""
        registry, config = self.registry, self.registry.config
        check_names(configs)
        registry.check_topic_configs(configs)
        if assignments and (num_partitions != -1 or replication_factor != -1):
            raise InvalidRequestError("give either a replica assignment or partitions and replication factor")
        if not self._clustered:
            if replication_factor not in (-1, 1):
                raise InvalidReplicationFactorError(
                    f"replication factor {replication_factor} is larger than the 1 broker available")
            if assignments:  # Kafka takes one that names registered brokers: here, this one only
                num_partitions = len(self._single_node_assignments(assignments))
            if validate_only:
                return registry.create_topic(name, num_partitions, configs, validate_only=True), 1
            return await registry.create_topic_async(name, num_partitions, configs), 1
        count = config.num_partitions if num_partitions == -1 else num_partitions
        factor = config.default_replication_factor if replication_factor == -1 else replication_factor
        if not assignments and count < 1:
            raise InvalidPartitionsError(f"a topic needs at least one partition, got {count}")
        replicas = registry.topics.plan_assignment(count, factor, assignments)
        factor = len(replicas[min(replicas)])
        if validate_only:
            validate_topic_name(name)
            return TopicInfo(name, NO_TOPIC_ID, len(replicas), configs), factor
        return await registry.topics.create(name, replicas, configs, timeout_s=timeout_s), factor

    def _single_node_assignments(self, assignments: dict[int, list[int]], first_partition: int = 0
                                 ) -> dict[int, tuple[int, ...]]:
        try:
            return check_manual_assignments(assignments, [self.registry.config.node_id], first_partition,
                                            1 if first_partition else None)
        except ReplicaAssignmentError as exc:
            raise InvalidReplicaAssignmentError(str(exc)) from None

    def resolve(self, name: str | None, topic_id: uuid.UUID | None) -> str:
        """A topic named by name or (DeleteTopics v6) by id; internal topics may not be touched."""
        if name is None:
            info = self.registry.topics.by_id.get(topic_id)
            if info is None:
                raise UnknownTopicIdError(f"no topic has id {topic_id}")
            name = info.name
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"the internal topic {name} cannot be changed this way")
        return name

    async def delete_topic(self, name: str) -> TopicInfo:
        if self._clustered:
            return await self.registry.topics.delete(name)
        return await self.registry.delete_topic(name)

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None, *,
                                validate_only: bool, timeout_s: float) -> None:
        name = self.resolve(name, None)
        info = self.registry.topics.require(name)
        if count <= info.partitions:
            raise InvalidPartitionsError(
                f"topic {name} has {info.partitions} partitions; the new count {count} must be larger")
        if not self._clustered and assignments:
            if len(assignments) != count - info.partitions:
                raise InvalidReplicaAssignmentError(
                    f"Attempted to add {count - info.partitions} additional partition(s), but only "
                    f"{len(assignments)} assignment(s) were specified.")
            self._single_node_assignments(dict(enumerate(assignments, info.partitions)), info.partitions)
        if validate_only:
            return
        if not self._clustered:
            await self.registry.create_partitions(name, count)
            return
        manual = {info.partitions + i: list(a) for i, a in enumerate(assignments)} if assignments else None
        await self.registry.topics.add_partitions(name, count, timeout_s, manual)

    async def alter_configs(self, name: str, configs: dict[str, str]) -> None:
        check_names(configs)
        self.registry.check_topic_configs(configs)
        if self._clustered:
            await self.registry.topics.set_configs(name, configs)
        else:
            self.registry.alter_topic_configs(name, configs)

    # ---- partition moves ----------------------------------------------------------------------------

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool
                            ) -> dict[tuple[str, int], str | None]:
        """ElectLeaders: per partition None (done) or the name of Kafka's error. A single node leads every
        partition already: each one asked for is ELECTION_NOT_NEEDED."""
        if not self._clustered:
            return {tp: "ELECTION_NOT_NEEDED" for tp in partitions or ()}
        from eoslog.cluster.zk.errors import NotController

        try:
            return await self.registry.cluster.controller.elect_leaders(partitions, unclean=unclean)
        except NotController as exc:
            raise NotControllerError(str(exc)) from exc

    async def reassign(self, name: str, targets: dict[int, list[int] | None]) -> None:
        if not self._clustered:
            self._reassign_on_a_single_node(name, targets)
            return
        await self.registry.topics.reassign(name, targets)

    def _reassign_on_a_single_node(self, name: str, targets: dict[int, list[int] | None]) -> None:
        """As Kafka answers on a cluster of one: a target naming registered brokers can only be this
        broker, where every replica already is (done, nothing moves); a cancellation finds no move in
        progress; a bad target is refused with Kafka's words."""
        info = self.registry.topics.get(name)
        for index, replicas in targets.items():
            if info is None or not 0 <= index < info.partitions:
                raise UnknownTopicOrPartitionError(f"topic partition {name}-{index} does not exist")
            if replicas is None:
                raise NoReassignmentInProgressError(f"no reassignment of {name}-{index} is in progress")
            self._single_node_assignments({0: replicas})

    def reassignments(self) -> list[tuple[str, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """ListPartitionReassignments: (topic, partition, replicas, adding, removing) of every partition
        being moved, by topic and partition (none on a single node)."""
        if not self._clustered:
            return []
        out = []
        for name, assignment in sorted(self.registry.cluster.view.topics.items()):
            for index in sorted(set(assignment.adding) | set(assignment.removing)):
                out.append((name, index, tuple(assignment.replicas[index]), tuple(assignment.adding.get(index, ())),
                            tuple(assignment.removing.get(index, ()))))
        return out
