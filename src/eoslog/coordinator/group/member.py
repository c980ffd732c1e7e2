"""One member of a classic group, and the protocol vote.

A member is what its last JoinGroup said (client, timeouts, the protocols it supports in order of
preference with the metadata for each) plus what the coordinator keeps for it: the assignment the
leader gave it, the deadline by which it must be heard from again, and the pending JoinGroup /
SyncGroup calls waiting for the group to move.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from eoslog.coordinator.group.results import Pending, Protocols


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: Protocols
    assignment: bytes = b""
    awaiting_join: Pending | None = None
    awaiting_sync: Pending | None = None
    # Joined during the current rebalance and not yet through a completed one: such a member is
    # dropped after new_member_join_timeout_ms instead of being kept alive by its pending JoinGroup.
    is_new: bool = False
    # The member is removed when this passes without a heartbeat, unless it is waiting in a barrier.
    heartbeat_deadline_ms: int = 0
    protocol_names: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.protocol_names = frozenset(name for name, _ in self.supported_protocols)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, same order, same metadata: a rejoin that needs no new assignment."""
        return tuple(protocols) == self.supported_protocols

    def set_protocols(self, protocols: Protocols) -> None:
        self.supported_protocols = tuple(protocols)
        self.protocol_names = frozenset(name for name, _ in protocols)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


def candidate_protocols(members: list[MemberMetadata]) -> set[str]:
    """Protocols every member supports."""
    if not members:
        return set()
    common = set(members[0].protocol_names)
    for member in members[1:]:
        common &= member.protocol_names
    return common


def select_protocol(members: list[MemberMetadata]) -> str:
    """Kafka's vote: each member votes for its most preferred common protocol; most votes wins.

    Ties go to the protocol that comes first in the earliest member's preference list, so the
    choice is deterministic (Kafka leaves it to hash-map order).
    """
    candidates = candidate_protocols(members)
    if not candidates:
        raise ValueError("no protocol is supported by every member")
    votes: dict[str, int] = {}
    for member in members:
        choice = member.vote(candidates)
        votes[choice] = votes.get(choice, 0) + 1
    best = max(votes.values())
    for name, _ in members[0].supported_protocols:
        if votes.get(name) == best:
            return name
    raise AssertionError("unreachable: the winner is among the first member's protocols")


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics in a ConsumerProtocolSubscription (any version: version int16, topics [string], ...).

    Only the leading topic list is read; the fields after it differ by version and are not needed.
    Returns None when the bytes do not parse, which callers treat as "may be subscribed to anything".
    """
    try:
        pos = 2  # version
        (count,) = _INT32.unpack_from(metadata, pos)
        pos += 4
        if count < 0:
            return None
        topics = set()
        for _ in range(count):
            (n,) = _INT16.unpack_from(metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.add(metadata[pos:pos + n].decode("utf-8"))
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
