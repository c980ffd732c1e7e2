"""The ``__consumer_offsets`` records of consumer groups (KIP-848); byte tables in docs/groups.md
("Consumer group records").

Keys are Kafka 4.x's (int16 key version, then int16-length strings), so a Kafka tool reading the
topic sees which record is which. Values are an eoslog subset: Kafka's field order in the classic
(non-compact) encoding of log_format.py, int16 value version 0, and topic *names* where Kafka writes
topic ids (eoslog resolves ids at the API edge; a name survives a coordinator move unchanged).

    key 3  ConsumerGroupMetadataKey                 group            -> group epoch
    key 4  ConsumerGroupPartitionMetadataKey        group            -> subscribed topics' partition counts
    key 5  ConsumerGroupMemberMetadataKey           group, member    -> subscription, client, timeouts
    key 6  ConsumerGroupTargetAssignmentMetadataKey group            -> target assignment epoch
    key 7  ConsumerGroupTargetAssignmentMemberKey   group, member    -> the member's target partitions
    key 8  ConsumerGroupCurrentMemberAssignmentKey  group, member    -> epochs, state, owned / revoking

The coordinator writes a group's records as a diff against what it wrote last (changed values, and
tombstones for members that left); replaying the last value per key rebuilds the group.
"""

from __future__ import annotations

from collections.abc import Mapping

from eoslog.coordinator.group.assignors import Assignment
from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.consumer_classic import ClassicMetadata
from eoslog.coordinator.group.consumer_group import ConsumerGroup
from eoslog.coordinator.group.consumer_member import ConsumerMember
from eoslog.coordinator.group.consumer_state import MemberState
from eoslog.coordinator.group.errors import CorruptGroupRecordError
from eoslog.coordinator.group.log_format import _Reader, _Writer

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
VALUE_VERSION = 0
CLASSIC_MEMBER_VALUE_VERSION = 1  # ConsumerGroupMemberMetadata of a classic-protocol member

Records = dict[bytes, bytes]  # key -> value of one group, as last written


def key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    w = _Writer()
    w.int16(version)
    w.string(group_id)
    if member_id is not None:
        w.string(member_id)
    return w.getvalue()


def decode_key(buf: bytes) -> tuple[int, str, str | None]:
    r = _Reader(buf, "consumer group key")
    version = r.int16()
    group_id = r.string()
    member_id = r.string() if version in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT) else None
    r.done()
    return version, group_id, member_id


def _assignment(w: _Writer, assignment: Assignment) -> None:
    w.int32(len(assignment))
    for topic in sorted(assignment):
        w.string(topic)
        w.int32(len(assignment[topic]))
        for p in sorted(assignment[topic]):
            w.int32(p)


def _read_assignment(r: _Reader) -> Assignment:
    out = {}
    for _ in range(r.int32()):
        topic = r.string()
        out[topic] = frozenset(r.int32() for _ in range(r.int32()))
    return out


def _value(fill) -> bytes:
    w = _Writer()
    w.int16(VALUE_VERSION)
    fill(w)
    return w.getvalue()


def group_records(group: ConsumerGroup) -> Records:
    """Every record describing ``group`` now (the coordinator diffs this against its last write)."""
    g = group.group_id
    out: Records = {
        key(GROUP_METADATA, g): _value(lambda w: w.int32(group.group_epoch)),
        key(PARTITION_METADATA, g): _value(lambda w: _counts(w, group.subscription_metadata)),
        key(TARGET_ASSIGNMENT_METADATA, g): _value(lambda w: w.int32(group.assignment_epoch)),
    }
    for m in group.members.values():
        out[key(MEMBER_METADATA, g, m.member_id)] = _member_value(m)
        out[key(TARGET_ASSIGNMENT_MEMBER, g, m.member_id)] = _value(
            lambda w, m=m: _assignment(w, group.target.get(m.member_id, {})))
        out[key(CURRENT_MEMBER_ASSIGNMENT, g, m.member_id)] = _value(lambda w, m=m: _current(w, m))
    return out


def _counts(w: _Writer, counts: Mapping[str, int]) -> None:
    w.int32(len(counts))
    for topic in sorted(counts):
        w.string(topic)
        w.int32(counts[topic])


def _member_value(m: ConsumerMember) -> bytes:
    """Version 0 for a consumer-protocol member; version 1 adds a classic member's session timeout and
    protocols (Kafka's ClassicMemberMetadata), so it stays a classic member after a restart."""
    w = _Writer()
    w.int16(VALUE_VERSION if m.classic is None else CLASSIC_MEMBER_VALUE_VERSION)
    _member(w, m)
    if m.classic is not None:
        w.int32(m.classic.session_timeout_ms)
        w.int32(len(m.classic.protocols))
        for name, metadata in m.classic.protocols:
            w.string(name)
            w.bytes_(metadata)
    return w.getvalue()


def _member(w: _Writer, m: ConsumerMember) -> None:
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.int32(len(m.subscribed_topic_names))
    for name in m.subscribed_topic_names:
        w.string(name)
    w.string(m.subscribed_topic_regex)
    w.string(m.server_assignor)
    w.int32(m.rebalance_timeout_ms)


def _current(w: _Writer, m: ConsumerMember) -> None:
    w.int32(m.member_epoch)
    w.int32(m.previous_member_epoch)
    w.parts.append(bytes([m.state.value]))
    _assignment(w, m.assigned)
    _assignment(w, m.pending_revocation)


def _reader(buf: bytes, what: str, versions: tuple[int, ...] = (VALUE_VERSION,)) -> _Reader:
    return _versioned_reader(buf, what, versions)[0]


def _versioned_reader(buf: bytes, what: str, versions: tuple[int, ...]) -> tuple[_Reader, int]:
    r = _Reader(buf, what)
    version = r.int16()
    if version not in versions:
        raise CorruptGroupRecordError(f"{what} value version {version} is not supported")
    return r, version


def rebuild(group_id: str, records: Records, config: GroupConfig, now_ms: int) -> ConsumerGroup:
    """A group from its records (the last value per key, tombstones already applied). Sessions start
    afresh at ``now_ms``: a member that does not come back within its session is removed."""
    group = ConsumerGroup(group_id, config)
    members: dict[str, ConsumerMember] = {}
    for raw_key, raw_value in records.items():
        version, _, member_id = decode_key(raw_key)
        if member_id is not None:
            member = members.setdefault(member_id, ConsumerMember(member_id))
        if version == GROUP_METADATA:
            r = _reader(raw_value, "ConsumerGroupMetadata")
            group.group_epoch = r.int32()
        elif version == PARTITION_METADATA:
            r = _reader(raw_value, "ConsumerGroupPartitionMetadata")
            group.subscription_metadata = {r.string(): r.int32() for _ in range(r.int32())}
        elif version == TARGET_ASSIGNMENT_METADATA:
            r = _reader(raw_value, "ConsumerGroupTargetAssignmentMetadata")
            group.assignment_epoch = r.int32()
        elif version == MEMBER_METADATA:
            r, value_version = _versioned_reader(raw_value, "ConsumerGroupMemberMetadata",
                                                 (VALUE_VERSION, CLASSIC_MEMBER_VALUE_VERSION))
            member.instance_id, member.rack_id = r.nullable_string(), r.nullable_string()
            member.client_id, member.client_host = r.string(), r.string()
            member.subscribed_topic_names = tuple(r.string() for _ in range(r.int32()))
            member.subscribed_topic_regex, member.server_assignor = r.nullable_string(), r.nullable_string()
            member.rebalance_timeout_ms = r.int32()
            if value_version == CLASSIC_MEMBER_VALUE_VERSION:
                session_timeout_ms = r.int32()
                protocols = tuple((r.string(), r.bytes_()) for _ in range(r.int32()))
                member.classic = ClassicMetadata(session_timeout_ms, protocols)
        elif version == TARGET_ASSIGNMENT_MEMBER:
            r = _reader(raw_value, "ConsumerGroupTargetAssignmentMember")
            group.target[member_id] = _read_assignment(r)
        elif version == CURRENT_MEMBER_ASSIGNMENT:
            r = _reader(raw_value, "ConsumerGroupCurrentMemberAssignment")
            member.member_epoch, member.previous_member_epoch = r.int32(), r.int32()
            member.state = MemberState(r._take(1)[0])
            member.assigned, member.pending_revocation = _read_assignment(r), _read_assignment(r)
        else:
            raise CorruptGroupRecordError(f"key version {version} is not a consumer group record")
        r.done()
    for member in members.values():
        session = member.classic.session_timeout_ms if member.classic else config.consumer_session_timeout_ms
        member.session_deadline_ms = now_ms + session
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            member.revocation_deadline_ms = now_ms + member.rebalance_timeout_ms
        group.members[member.member_id] = member
        for t, ps in list(member.assigned.items()) + list(member.pending_revocation.items()):
            for p in ps:
                group.owners[(t, p)] = member.member_id
                member.partition_epochs[(t, p)] = member.member_epoch
    group.refresh_state()
    return group
