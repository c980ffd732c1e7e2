"""The consumer groups (KIP-848) a :class:`~.coordinator.GroupCoordinator` serves, without I/O.

``ConsumerGroups`` runs ConsumerGroupHeartbeat and ConsumerGroupDescribe, fences offset commits of
consumer-protocol members by member epoch, and keeps the groups' timers. Committed offsets live in the
coordinator's one ``OffsetStore`` whatever the group type, so a group id names at most one group: a
classic group and a consumer group never share an id (the coordinator checks both dictionaries).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eoslog.coordinator.group.assignors import Assignment
from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerHeartbeat,
    ConsumerHeartbeatResponse,
)
from eoslog.coordinator.group.consumer_member import STATIC_LEAVE_EPOCH
from eoslog.coordinator.group.consumer_state import ConsumerGroupState
from eoslog.coordinator.group.errors import Errors


@dataclass(frozen=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment
    member_type: int = 1  # ConsumerGroupDescribe v1: 0 a classic-protocol member, 1 a consumer-protocol one


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    error: Errors
    error_message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


def default_member_id() -> str:
    # KIP-1082's shape (a UUID in base64 would do as well); v0 clients get it from the coordinator.
    return str(uuid.uuid4())


class ConsumerGroups:
    def __init__(self, config: GroupConfig, new_member_id: Callable[[], str] = default_member_id) -> None:
        self.config = config
        self.config_for: Callable[[str], GroupConfig] = lambda group_id: self.config  # with its group configs
        self.groups: dict[str, ConsumerGroup] = {}
        self._new_member_id = new_member_id

    def heartbeat(self, group_id: str, request: ConsumerHeartbeat, topics: Mapping[str, int],
                  now_ms: int) -> ConsumerHeartbeatResponse:
        group = self.groups.get(group_id)
        if group is None:
            if request.member_epoch != 0:
                # Kafka's answer too: the client rejoins with epoch 0 (its partitions are lost).
                return ConsumerHeartbeatResponse(Errors.UNKNOWN_MEMBER_ID, f"consumer group {group_id} not found",
                                                 request.member_id or None)
            group = ConsumerGroup(group_id, self.config_for(group_id))
            self.groups[group_id] = group
        elif group.state is ConsumerGroupState.DEAD:
            # Being deleted: the client looks the coordinator up again and retries, by then on a new group.
            return ConsumerHeartbeatResponse(Errors.COORDINATOR_NOT_AVAILABLE, f"group {group_id} is being deleted",
                                             request.member_id or None)
        response = group.heartbeat(request, topics, now_ms, self._new_member_id)
        return response

    def tick(self, now_ms: int) -> list[str]:
        """Expires sessions and revocation timeouts; returns the ids of the groups that changed."""
        changed = []
        for group in self.groups.values():
            deadline = group.next_deadline()
            if deadline is not None and deadline <= now_ms and group.tick(now_ms):
                changed.append(group.group_id)
        return changed

    def next_deadline(self) -> int | None:
        return min((d for d in (g.next_deadline() for g in self.groups.values()) if d is not None), default=None)

    def describe(self, group_id: str) -> ConsumerGroupDescription:
        group = self.groups.get(group_id)
        if group is None or group.state is ConsumerGroupState.DEAD:
            return ConsumerGroupDescription(group_id, Errors.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
        members = tuple(
            DescribedConsumerMember(m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id,
                                    m.client_host, m.subscribed_topic_names, m.subscribed_topic_regex,
                                    dict(m.assigned), dict(group.target.get(m.member_id, {})),
                                    0 if m.classic is not None else 1)
            for m in group.members.values() if m.member_epoch != STATIC_LEAVE_EPOCH)
        return ConsumerGroupDescription(group_id, Errors.NONE, None, group.state.kafka_name, group.group_epoch,
                                        group.assignment_epoch, group.preferred_assignor(), members)
