"""What the group coordinator hands back to the I/O layer: responses, pending calls, writes.

The coordinator never blocks and never does I/O. A call is answered in one of two ways:

* ``Result.response`` is set: answer the request now.
* ``Result.pending`` is set: keep the request's future under ``pending.token``; a later event (another
  member's call, :meth:`GroupCoordinator.tick`, :meth:`GroupCoordinator.complete_write`) returns a
  :class:`Completion` carrying the same token and the response.

Any call or event may also return ``completed`` (answers to earlier pending calls) and ``writes``
(records the coordinator needs appended to ``__consumer_offsets``). The I/O layer appends each write
in order, then reports the outcome with ``complete_write(write.write_id, ...)``: the coordinator
changes its state only then (prepare -> log -> apply).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.log_format import GroupMetadataValue

Protocols = tuple[tuple[str, bytes], ...]  # (protocol name, member metadata), preferred first


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse:
    error: Errors
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True)
class SyncGroupResponse:
    error: Errors
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class HeartbeatResponse:
    error: Errors


@dataclass(frozen=True)
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: Errors


@dataclass(frozen=True)
class LeaveGroupResponse:
    error: Errors
    members: tuple[MemberLeaveResult, ...] = ()


@dataclass(frozen=True)
class PartitionResult:
    """One partition of an OffsetCommit / TxnOffsetCommit / OffsetDelete answer."""

    topic: str
    partition: int
    error: Errors


@dataclass(frozen=True)
class OffsetCommitResponse:
    """``error`` is the group-level error; when it is not NONE every partition carries it too."""

    error: Errors
    partitions: tuple[PartitionResult, ...] = ()


@dataclass(frozen=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int  # -1 when nothing is committed
    leader_epoch: int  # -1 when unknown
    metadata: str | None
    error: Errors


@dataclass(frozen=True)
class OffsetFetchResponse:
    error: Errors
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True)
class OffsetDeleteResponse:
    error: Errors
    partitions: tuple[PartitionResult, ...] = ()


@dataclass(frozen=True)
class DeletedGroup:
    group_id: str
    error: Errors


@dataclass(frozen=True)
class DeleteGroupsResponse:
    groups: tuple[DeletedGroup, ...]


@dataclass(frozen=True)
class Pending:
    """A call whose answer comes later, as a :class:`Completion` with the same ``token``."""

    token: int
    api: str  # "join_group", "sync_group", "offset_commit", ...
    group_id: str
    member_id: str = ""


@dataclass(frozen=True)
class Completion:
    token: int
    api: str
    group_id: str
    member_id: str
    response: Any


@dataclass(frozen=True)
class Write:
    """Records for ``__consumer_offsets``-``partition``, appended as one batch.

    ``records`` are (key, value) pairs with ``value=None`` for a tombstone. A transactional write
    (TxnOffsetCommit) goes into a transactional batch of ``producer_id``/``producer_epoch``.
    """

    write_id: int
    partition: int
    records: tuple[tuple[bytes, bytes | None], ...]
    producer_id: int = -1
    producer_epoch: int = -1
    is_transactional: bool = False


@dataclass
class Result:
    response: Any = None
    pending: Pending | None = None
    completed: list[Completion] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)

    def extend(self, other: Result) -> None:
        self.completed.extend(other.completed)
        self.writes.extend(other.writes)


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # for the chosen protocol; empty unless the group is Stable (as in Kafka)
    assignment: bytes  # empty unless the group is Stable


@dataclass(frozen=True)
class GroupDescription:
    """DescribeGroups for one group. An unknown group is described as Dead with no members."""

    group_id: str
    error: Errors
    state: str  # Kafka's state name: "Empty", "PreparingRebalance", ...
    protocol_type: str
    protocol_data: str  # the chosen protocol when Stable, else ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # "consumer" for a KIP-848 group (ListGroups v5 GroupType)


# Between ClassicGroup and GroupCoordinator


@dataclass(frozen=True)
class JoinGroupRequest:
    member_id: str  # "" for a member the coordinator does not know yet
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool = True  # JoinGroup v4+
    supports_skip_assignment: bool = False  # JoinGroup v9+ (KIP-814)


@dataclass
class StoreGroup:
    """A GroupMetadataValue to append; ``on_done(error, now_ms, effects)`` runs after the append
    (``error`` is None on success)."""

    group_id: str
    value: GroupMetadataValue
    on_done: Callable[[Errors | None, int, Effects], None]


@dataclass
class Effects:
    completed: list[Completion] = field(default_factory=list)
    stores: list[StoreGroup] = field(default_factory=list)
