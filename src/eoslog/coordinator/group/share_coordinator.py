"""The share groups (KIP-932) a :class:`~.coordinator.GroupCoordinator` serves, without I/O.

``ShareGroups`` runs ShareGroupHeartbeat and ShareGroupDescribe and keeps the groups' session timers. A
group id names at most one group whatever its type: the coordinator refuses a share heartbeat for a
classic or consumer group's id (and the other way round) before it reaches this class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.share_assignor import NAME as ASSIGNOR_NAME
from eoslog.coordinator.group.share_assignor import ShareAssignment, TopicMetadata
from eoslog.coordinator.group.share_group import (
    JOIN_EPOCH,
    ShareGroup,
    ShareHeartbeat,
    ShareHeartbeatResponse,
)
from eoslog.coordinator.group.share_state import ShareGroupState


@dataclass(frozen=True)
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: ShareAssignment  # topic id -> partitions; the handler adds the names


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    error: Errors
    error_message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ASSIGNOR_NAME
    members: tuple[DescribedShareMember, ...] = ()


class ShareGroups:
    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(self, group_id: str, request: ShareHeartbeat, topics: Mapping[str, TopicMetadata],
                  now_ms: int) -> ShareHeartbeatResponse:
        group = self.groups.get(group_id)
        if group is None:
            if request.member_epoch != JOIN_EPOCH:
                # Kafka's getOrMaybeCreateShareGroup (and shareGroupLeave): only a join creates the group.
                return ShareHeartbeatResponse(Errors.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            group = ShareGroup(group_id, self.config)
            self.groups[group_id] = group
        elif group.state is ShareGroupState.DEAD:
            # Being deleted: the client looks the coordinator up again and retries, by then on a new group.
            return ShareHeartbeatResponse(Errors.COORDINATOR_NOT_AVAILABLE, f"Group {group_id} is being deleted.")
        return group.heartbeat(request, topics, now_ms)

    def tick(self, now_ms: int) -> list[str]:
        """Expires sessions; returns the ids of the groups that changed."""
        changed = []
        for group in self.groups.values():
            deadline = group.next_deadline()
            if deadline is not None and deadline <= now_ms and group.tick(now_ms):
                changed.append(group.group_id)
        return changed

    def next_deadline(self) -> int | None:
        return min((d for d in (g.next_deadline() for g in self.groups.values()) if d is not None), default=None)

    def describe(self, group_id: str) -> ShareGroupDescription:
        group = self.groups.get(group_id)
        if group is None or group.state is ShareGroupState.DEAD:
            return ShareGroupDescription(group_id, Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        members = tuple(
            DescribedShareMember(m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                                 m.subscribed_topic_names, dict(m.assigned))
            for m in sorted(group.members.values(), key=lambda m: m.member_id))
        return ShareGroupDescription(group_id, Errors.NONE, None, group.state.kafka_name, group.group_epoch,
                                     group.assignment_epoch, ASSIGNOR_NAME, members)
