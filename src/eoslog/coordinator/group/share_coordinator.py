"""The share groups (KIP-932) a :class:`~.coordinator.GroupCoordinator` serves, without I/O.

``ShareGroups`` runs ShareGroupHeartbeat and ShareGroupDescribe and keeps the groups' session timers. A
group id names at most one group whatever its type: the coordinator refuses a share heartbeat for a
classic or consumer group's id (and the other way round) before it reaches this class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.share_assignor import NAME as ASSIGNOR_NAME
from eoslog.coordinator.group.share_assignor import ShareAssignment, TopicMetadata
from eoslog.coordinator.group.share_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
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
    def __init__(self, config: GroupConfig, *, initialize_state: bool = False) -> None:
        """``initialize_state``: a share coordinator is wired, so only share partitions whose state it
        initialized are assigned (share_initialization.py); otherwise every partition is."""
        self.config = config
        self.config_for: Callable[[str], GroupConfig] = lambda group_id: self.config  # with its group configs
        self.initialize_state = initialize_state
        self.groups: dict[str, ShareGroup] = {}
        # (group id, member id) of the members that left or timed out since the shard last looked: their
        # acquired records go back (share/manager.py).
        self.departed: list[tuple[str, str]] = []

    def adopt(self, group: ShareGroup) -> ShareGroup:
        """A group created or rebuilt from its records, with its group configs, made to assign as this
        coordinator does."""
        group.config = self.config_for(group.group_id)
        if self.initialize_state:
            group.assignable = lambda topic_id, partition: group.state_partitions.is_initialized(topic_id, partition)
        return group

    def heartbeat(self, group_id: str, request: ShareHeartbeat, topics: Mapping[str, TopicMetadata],
                  now_ms: int) -> ShareHeartbeatResponse:
        group = self.groups.get(group_id)
        if group is None:
            if request.member_epoch != JOIN_EPOCH:
                # Kafka's getOrMaybeCreateShareGroup (and shareGroupLeave): only a join creates the group.
                return ShareHeartbeatResponse(Errors.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            group = self.adopt(ShareGroup(group_id, self.config))
            self.groups[group_id] = group
        elif group.state is ShareGroupState.DEAD:
            # Being deleted: the client looks the coordinator up again and retries, by then on a new group.
            return ShareHeartbeatResponse(Errors.COORDINATOR_NOT_AVAILABLE, f"Group {group_id} is being deleted.")
        response = group.heartbeat(request, topics, now_ms)
        if request.member_epoch == LEAVE_EPOCH and response.error is Errors.NONE:
            self.departed.append((group_id, request.member_id))
        return response

    def tick(self, now_ms: int) -> list[str]:
        """Expires sessions; returns the ids of the groups that changed."""
        changed = []
        for group in self.groups.values():
            deadline = group.next_deadline()
            if deadline is not None and deadline <= now_ms:
                gone = group.tick(now_ms)
                if gone:
                    changed.append(group.group_id)
                    self.departed.extend((group.group_id, member_id) for member_id in gone)
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
