"""Classic-protocol members inside a consumer group (Kafka 4.0's online upgrade, KIP-848).

When the first consumer-protocol member joins a Stable classic group of the ``consumer`` protocol type,
the group becomes a consumer group in place (:func:`from_classic_group`): each classic member becomes a
:class:`ConsumerMember` with its subscription and assignment read from its ConsumerProtocol bytes, at
the classic generation as its member epoch. The classic members go on with JoinGroup / SyncGroup /
Heartbeat / LeaveGroup, answered here from the consumer group's reconciliation:

* Heartbeat: REBALANCE_IN_PROGRESS while the member is not at the target assignment, so it rejoins.
* JoinGroup: answered at once (no barrier). The partitions the client still owns are the ``owned
  partitions`` of its subscription (v1+); an eager client has revoked everything before joining. The
  member reconciles like a consumer-protocol member (revoked partitions released, new ones only once
  free) and gets its member epoch as the generation; the leader is nobody, so the client is a follower.
* SyncGroup: the member's current assignment, encoded as a ConsumerProtocolAssignment.
* Offset commits from a classic member use its member epoch as generation (ILLEGAL_GENERATION else).

Pure functions over a ConsumerGroup; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eoslog.coordinator.group.assignors import Assignment
from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.consumer_group import ConsumerGroup
from eoslog.coordinator.group.consumer_member import STATIC_LEAVE_EPOCH, ConsumerMember
from eoslog.coordinator.group.consumer_state import MemberState
from eoslog.coordinator.group.errors import Errors
from eoslog.coordinator.group.log_format import GroupMetadataValue, MemberRecord
from eoslog.coordinator.group.results import HeartbeatResponse, JoinGroupResponse, SyncGroupResponse
from eoslog.protocol import codec, messages

CONSUMER_PROTOCOL_TYPE = "consumer"
Protocols = tuple[tuple[str, bytes], ...]


@dataclass
class ClassicMetadata:
    """What a classic member's JoinGroup said beyond its subscription."""

    session_timeout_ms: int
    protocols: Protocols  # (assignor name, ConsumerProtocolSubscription), preferred first


def decode_subscription(metadata: bytes) -> tuple[tuple[str, ...], Assignment] | None:
    """(topics, owned partitions) of a ConsumerProtocolSubscription, or None if it does not parse."""
    if len(metadata) < 2:
        return None
    version = int.from_bytes(metadata[:2], "big", signed=True)
    try:
        sub = codec.decode_data("ConsumerProtocolSubscription", min(max(version, 0), 3), memoryview(metadata)[2:])
    except ValueError:
        return None
    owned = {tp.topic: frozenset(tp.partitions) for tp in (sub.owned_partitions or []) if tp.partitions}
    return tuple(sorted(sub.topics)), owned


def decode_assignment(data: bytes) -> Assignment:
    if len(data) < 2:
        return {}
    version = int.from_bytes(data[:2], "big", signed=True)
    try:
        assignment = codec.decode_data("ConsumerProtocolAssignment", min(max(version, 0), 3), memoryview(data)[2:])
    except ValueError:
        return {}
    return {tp.topic: frozenset(tp.partitions) for tp in assignment.assigned_partitions if tp.partitions}


def encode_assignment(assignment: Assignment) -> bytes:
    cls = messages.ConsumerProtocolAssignment
    value = cls(assigned_partitions=[cls.TopicPartition(topic=t, partitions=sorted(ps))
                                     for t, ps in sorted(assignment.items())], user_data=None)
    return (0).to_bytes(2, "big") + codec.encode_data(value, 0)


def convertible(classic) -> bool:
    """A classic group can become a consumer group in place: Stable, consumer protocol type, every
    member's subscription readable."""
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or classic.state.name != "STABLE" or classic.protocol_name is None:
        return False
    return all(decode_subscription(m.metadata(classic.protocol_name)) is not None for m in classic.members.values())


def from_classic_group(classic, config: GroupConfig, now_ms: int) -> ConsumerGroup:
    group = ConsumerGroup(classic.group_id, config)
    group.group_epoch = group.assignment_epoch = classic.generation_id
    for m in classic.members.values():
        topics, _ = decode_subscription(m.metadata(classic.protocol_name))
        member = ConsumerMember(
            m.member_id, instance_id=m.group_instance_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=topics, rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_epoch=classic.generation_id, previous_member_epoch=classic.generation_id)
        member.classic = ClassicMetadata(m.session_timeout_ms, tuple(m.supported_protocols))
        member.session_deadline_ms = now_ms + m.session_timeout_ms
        group.members[m.member_id] = member
        assigned = decode_assignment(m.assignment)
        group.target[m.member_id] = assigned
        group.set_assignment(member, MemberState.STABLE, classic.generation_id, classic.generation_id, assigned, {})
    group.refresh_state()
    return group


def to_classic_record(group: ConsumerGroup) -> GroupMetadataValue | None:
    """The classic group record of a consumer group whose members are all classic ones (Kafka 4.0's
    downgrade once the last consumer-protocol member left), or None when they share no protocol."""
    members = list(group.members.values())
    if not members or any(m.classic is None for m in members):
        return None
    common = set.intersection(*({name for name, _ in m.classic.protocols} for m in members))
    protocol = next((name for name, _ in members[0].classic.protocols if name in common), None)
    if protocol is None:
        return None
    records = tuple(MemberRecord(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                 m.classic.session_timeout_ms, dict(m.classic.protocols)[protocol],
                                 encode_assignment(m.assigned)) for m in members)
    # The members' generation: the newest member epoch, so their next heartbeat is REBALANCE_IN_PROGRESS
    # (a rejoin keeping their partitions until then), not ILLEGAL_GENERATION (partitions lost).
    generation = max(m.member_epoch for m in members)
    return GroupMetadataValue(CONSUMER_PROTOCOL_TYPE, generation, protocol, members[0].member_id, -1, records)


def classic_join(group: ConsumerGroup, member_id: str, *, protocols: Protocols, session_timeout_ms: int,
                 rebalance_timeout_ms: int, group_instance_id: str | None, client_id: str, client_host: str,
                 topics: Mapping[str, int], now_ms: int, new_member_id: Callable[[], str],
                 require_known_member_id: bool = False) -> JoinGroupResponse:
    """A classic JoinGroup into a consumer group: reconciled and answered at once.

    As in Kafka 4.x, a dynamic member's first JoinGroup (v4+, no member id) gets MEMBER_ID_REQUIRED
    with an id to come back with (KIP-394), and a static member coming back with its instance id and
    no member id (a restart: classic clients send no LeaveGroup for a static member) takes over its
    old member's partitions and epoch without a rebalance, if that member is classic or has left for a
    while; one still heartbeating with the consumer protocol keeps it (UNRELEASED_INSTANCE_ID)."""
    if not protocols:
        return JoinGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
    protocol_name, metadata = protocols[0]
    parsed = decode_subscription(metadata)
    if parsed is None:
        return JoinGroupResponse(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
    subscribed, owned = parsed
    group.classic_pending = {m: deadline for m, deadline in group.classic_pending.items() if deadline > now_ms}
    if not member_id and group_instance_id is None and require_known_member_id:
        member_id = new_member_id()
        group.classic_pending[member_id] = now_ms + session_timeout_ms
        return JoinGroupResponse(Errors.MEMBER_ID_REQUIRED, member_id=member_id)
    holder, replaced = None, False
    if group_instance_id is not None:
        holder = next((m for m in group.members.values() if m.instance_id == group_instance_id), None)
        if holder is not None and member_id and holder.member_id != member_id:
            return JoinGroupResponse(Errors.FENCED_INSTANCE_ID, member_id=member_id)
    if holder is not None and not member_id:
        if holder.classic is None and holder.member_epoch != STATIC_LEAVE_EPOCH:
            return JoinGroupResponse(Errors.UNRELEASED_INSTANCE_ID, member_id=member_id)
        group.replace_static_member(holder, new_member_id())
        member_id, replaced = holder.member_id, True
    member = group.members.get(member_id) if member_id else None
    pending = member is None and group.classic_pending.pop(member_id, None) is not None
    if member_id and not (pending or replaced) and (member is None or member.classic is None):
        return JoinGroupResponse(Errors.UNKNOWN_MEMBER_ID, member_id=member_id)
    bump = False
    if member is None:
        member = ConsumerMember(member_id or new_member_id(), instance_id=group_instance_id)
        group.members[member.member_id] = member
        bump = True
    else:
        # The client says what it still owns; everything else it held is released now.
        kept = {t: ps & owned.get(t, frozenset()) for t, ps in member.assigned.items()}
        # Released partitions of its current target (an eager client, or a restarted static member)
        # come back through reconciliation: at the target epoch it is then waiting for them.
        target = {t: ps for t, ps in group.target.get(member.member_id, {}).items() if ps}
        state = MemberState.STABLE
        if member.member_epoch == group.assignment_epoch and {t: ps for t, ps in kept.items() if ps} != target:
            state = MemberState.UNRELEASED_PARTITIONS
        group.set_assignment(member, state, member.member_epoch, member.previous_member_epoch, kept, {})
    member.classic = ClassicMetadata(session_timeout_ms, tuple(protocols))
    member.client_id, member.client_host, member.rebalance_timeout_ms = client_id, client_host, rebalance_timeout_ms
    if subscribed != member.subscribed_topic_names:
        member.subscribed_topic_names = subscribed
        bump = True
    group.advance(topics, bump)
    group.reconcile_member(member, {t: ps for t, ps in member.assigned.items()}, now_ms)
    member.session_deadline_ms = now_ms + session_timeout_ms
    group.refresh_state()
    return JoinGroupResponse(Errors.NONE, generation_id=member.member_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE,
                             protocol_name=protocol_name, leader="", member_id=member.member_id)


def _classic_member(group: ConsumerGroup, member_id: str, generation_id: int) -> tuple[ConsumerMember | None, Errors]:
    member = group.members.get(member_id)
    if member is None or getattr(member, "classic", None) is None:
        return None, Errors.UNKNOWN_MEMBER_ID
    if generation_id != member.member_epoch:
        return member, Errors.ILLEGAL_GENERATION
    return member, Errors.NONE


def classic_sync(group: ConsumerGroup, member_id: str, generation_id: int, now_ms: int) -> SyncGroupResponse:
    member, error = _classic_member(group, member_id, generation_id)
    if error is not Errors.NONE:
        return SyncGroupResponse(error)
    member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
    return SyncGroupResponse(Errors.NONE, CONSUMER_PROTOCOL_TYPE, member.classic.protocols[0][0],
                             encode_assignment(member.assigned))


def classic_heartbeat(group: ConsumerGroup, member_id: str, generation_id: int, now_ms: int) -> HeartbeatResponse:
    member, error = _classic_member(group, member_id, generation_id)
    if error is not Errors.NONE:
        return HeartbeatResponse(error)
    member.session_deadline_ms = now_ms + member.classic.session_timeout_ms
    at_target = (member.member_epoch == group.assignment_epoch and member.state is MemberState.STABLE
                 and member.assigned == {t: ps for t, ps in group.target.get(member_id, {}).items() if ps})
    return HeartbeatResponse(Errors.NONE if at_target else Errors.REBALANCE_IN_PROGRESS)
