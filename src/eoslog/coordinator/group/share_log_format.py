"""The ``__consumer_offsets`` records of share groups (KIP-932), byte for byte as Kafka 4.2 writes them;
byte tables and a worked example in docs/groups.md ("Share group records").

A key is the int16 record type (the spec's ``apiKey``) then the key fields at key version 0, which is
not flexible: int16-length strings. A value is the int16 value version (0) then the fields in Kafka's
flexible encoding: compact strings and arrays (uvarint length + 1; 0 = null), 16-byte uuids, and a
tagged-field section (uvarint count, then tag / size / bytes) closing the value and every struct in it.
Kafka's specs are group-coordinator/src/main/resources/common/message/ShareGroup*.json.

    type 10  ShareGroupMemberMetadata           group, member -> RackId ?string, ClientId, ClientHost,
                                                                SubscribedTopicNames [string]
    type 11  ShareGroupMetadata                 group         -> Epoch int32; MetadataHash int64 (tag 0)
    type 12  ShareGroupTargetAssignmentMetadata group         -> AssignmentEpoch int32
    type 13  ShareGroupTargetAssignmentMember   group, member -> TopicPartitions [(TopicId, [int32])]
    type 14  ShareGroupCurrentMemberAssignment  group, member -> MemberEpoch, PreviousMemberEpoch int32,
                                                                State int8, AssignedPartitions [(TopicId, [int32])]
    type 15  ShareGroupStatePartitionMetadata   group         -> InitializingTopics, InitializedTopics
                                                                [(TopicId, TopicName, [int32], CreateTimestamp int64)],
                                                                DeletingTopics [(TopicId, TopicName)]

MetadataHash came after the share group records were first released (KIP-1101), so it is a tagged
field, written only when it is not its default 0, as Kafka's generated code does; unknown tags (a newer
Kafka's) are skipped on reading. Type 15 says which share partitions have state at the share coordinator
(share_initialization.py); it is written only once the group has such partitions. Its CreateTimestamp is
in the newest copy of Kafka's spec read, not confirmed against the 4.2 release (docs/share-groups.md).

The coordinator writes a group's records as a diff against what it wrote last (changed values, and
tombstones for what is gone), as for consumer groups; replaying the last value per key rebuilds the group.
Kafka writes sets (topics, partitions) in hash order; eoslog writes them sorted.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable

from eoslog.coordinator.group.config import GroupConfig
from eoslog.coordinator.group.errors import CorruptGroupRecordError
from eoslog.coordinator.group.log_format import _Reader, _Writer
from eoslog.coordinator.group.share_assignor import ShareAssignment
from eoslog.coordinator.group.share_group import ShareGroup, ShareMember
from eoslog.coordinator.group.share_initialization import ShareStatePartitions, TopicPartitions
from eoslog.coordinator.group.share_state import ShareMemberState
from eoslog.protocol.wire import Malformed, read_uvarint, uvarint

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
RECORD_TYPES = frozenset(range(MEMBER_METADATA, STATE_PARTITION_METADATA + 1))
_MEMBER_TYPES = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
KEY_VERSION = 0
VALUE_VERSION = 0
METADATA_HASH_TAG = 0

Records = dict[bytes, bytes]  # key -> value of one group, as last written

_I8 = struct.Struct(">b")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# ---- keys --------------------------------------------------------------------------------------------

def key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    w = _Writer()
    w.int16(record_type)
    w.string(group_id)
    if member_id is not None:
        w.string(member_id)
    return w.getvalue()


def decode_key(buf: bytes | memoryview) -> tuple[int, str, str | None]:
    """(record type, group id, member id or None)."""
    r = _Reader(buf, "share group key")
    record_type = r.int16()
    if record_type not in RECORD_TYPES:
        raise CorruptGroupRecordError(f"record type {record_type} is not a share group record")
    group_id = r.string()
    member_id = r.string() if record_type in _MEMBER_TYPES else None
    r.done()
    return record_type, group_id, member_id


# ---- the flexible encoding ---------------------------------------------------------------------------

class _Out:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = [b"\x00\x00"]  # value version 0

    def int8(self, v: int) -> None:
        self.parts.append(_I8.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def int64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.parts.append(uvarint(0))
            return
        raw = v.encode()
        self.parts.append(uvarint(len(raw) + 1) + raw)

    def count(self, n: int) -> None:
        self.parts.append(uvarint(n + 1))

    def assignment(self, assignment: ShareAssignment) -> None:
        topics = sorted((t, ps) for t, ps in assignment.items() if ps)
        self.count(len(topics))
        for topic_id, partitions in topics:
            self.parts.append(topic_id.bytes)
            self.count(len(partitions))
            self.parts.extend(_I32.pack(p) for p in sorted(partitions))
            self.tags({})

    def tags(self, fields: dict[int, bytes]) -> None:
        self.parts.append(uvarint(len(fields)))
        for tag in sorted(fields):
            self.parts.append(uvarint(tag) + uvarint(len(fields[tag])) + fields[tag])

    def getvalue(self, tagged: dict[int, bytes] | None = None) -> bytes:
        self.tags(tagged or {})
        return b"".join(self.parts)


class _In:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes | memoryview, what: str) -> None:
        self.buf, self.pos, self.what = memoryview(bytes(buf)), 0, what
        version = self.fixed(2)
        if int.from_bytes(version, "big", signed=True) != VALUE_VERSION:
            raise CorruptGroupRecordError(f"{what} value version {int.from_bytes(version, 'big')} is not supported")

    def fixed(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise CorruptGroupRecordError(f"{self.what}: needs {n} bytes at position {self.pos}, "
                                          f"has {len(self.buf) - self.pos}")
        chunk = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return chunk

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos)
        except (IndexError, Malformed) as e:
            raise CorruptGroupRecordError(f"{self.what}: bad varint at position {self.pos} ({e})") from None
        return value

    def int8(self) -> int:
        return _I8.unpack(self.fixed(1))[0]

    def int32(self) -> int:
        return _I32.unpack(self.fixed(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self.fixed(8))[0]

    def nullable_string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        try:
            return self.fixed(n - 1).decode()
        except UnicodeDecodeError as e:
            raise CorruptGroupRecordError(f"{self.what}: string is not UTF-8 ({e})") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise CorruptGroupRecordError(f"{self.what}: null where a string is required")
        return s

    def count(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptGroupRecordError(f"{self.what}: null array where one is required")
        if n > len(self.buf) - self.pos:
            raise CorruptGroupRecordError(f"{self.what}: {n} elements cannot fit in {len(self.buf) - self.pos} bytes")
        return n

    def assignment(self) -> ShareAssignment:
        out = {}
        for _ in range(self.count()):
            topic_id = uuid.UUID(bytes=self.fixed(16))
            out[topic_id] = frozenset(self.int32() for _ in range(self.count()))
            self.tags()
        return {t: ps for t, ps in out.items() if ps}

    def tags(self) -> dict[int, bytes]:
        """The tagged fields of the current struct (the caller keeps those it knows, skips the others)."""
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.fixed(self.uvarint())
        return fields

    def done(self) -> dict[int, bytes]:
        fields = self.tags()
        if self.pos != len(self.buf):
            raise CorruptGroupRecordError(f"{self.what}: {len(self.buf) - self.pos} trailing bytes")
        return fields


# ---- values ------------------------------------------------------------------------------------------

def member_metadata_value(m: ShareMember) -> bytes:
    out = _Out()
    out.string(m.rack_id)
    out.string(m.client_id)
    out.string(m.client_host)
    out.count(len(m.subscribed_topic_names))
    for name in m.subscribed_topic_names:
        out.string(name)
    return out.getvalue()


def group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    out = _Out()
    out.int32(epoch)
    return out.getvalue({METADATA_HASH_TAG: _I64.pack(metadata_hash)} if metadata_hash else None)


def target_assignment_metadata_value(assignment_epoch: int) -> bytes:
    out = _Out()
    out.int32(assignment_epoch)
    return out.getvalue()


def target_assignment_member_value(assignment: ShareAssignment) -> bytes:
    out = _Out()
    out.assignment(assignment)
    return out.getvalue()


def current_member_assignment_value(m: ShareMember) -> bytes:
    out = _Out()
    out.int32(m.member_epoch)
    out.int32(m.previous_member_epoch)
    out.int8(m.state.value)
    out.assignment(m.assigned)
    return out.getvalue()


def state_partition_metadata_value(state: ShareStatePartitions) -> bytes:
    out = _Out()
    for table in (state.initializing, state.initialized):
        out.count(len(table))
        for topic_id, entry in sorted(table.items(), key=lambda item: item[1].name):
            out.parts.append(topic_id.bytes)
            out.string(entry.name)
            out.count(len(entry.partitions))
            out.parts.extend(_I32.pack(p) for p in sorted(entry.partitions))
            out.int64(entry.create_timestamp)
            out.tags({})
    out.count(len(state.deleting))
    for topic_id, name in sorted(state.deleting.items(), key=lambda item: item[1]):
        out.parts.append(topic_id.bytes)
        out.string(name)
        out.tags({})
    return out.getvalue()


def _read_state_partitions(raw_value: bytes) -> ShareStatePartitions:
    r = _In(raw_value, "ShareGroupStatePartitionMetadataValue")
    state = ShareStatePartitions()
    for table in (state.initializing, state.initialized):
        for _ in range(r.count()):
            topic_id = uuid.UUID(bytes=r.fixed(16))
            name = r.string()
            partitions = frozenset(r.int32() for _ in range(r.count()))
            table[topic_id] = TopicPartitions(name, partitions, r.int64())
            r.tags()
    for _ in range(r.count()):
        topic_id = uuid.UUID(bytes=r.fixed(16))
        state.deleting[topic_id] = r.string()
        r.tags()
    r.done()
    return state


def group_records(group: ShareGroup) -> Records:
    """Every record describing ``group`` now, in the order Kafka's heartbeat writes them (member
    subscriptions, group epoch, target members, target epoch, current assignments)."""
    g = group.group_id
    members = sorted(group.members.values(), key=lambda m: m.member_id)
    out: Records = {key(MEMBER_METADATA, g, m.member_id): member_metadata_value(m) for m in members}
    out[key(GROUP_METADATA, g)] = group_metadata_value(group.group_epoch, group.metadata_hash)
    for m in members:
        out[key(TARGET_ASSIGNMENT_MEMBER, g, m.member_id)] = target_assignment_member_value(
            group.target.get(m.member_id, {}))
    out[key(TARGET_ASSIGNMENT_METADATA, g)] = target_assignment_metadata_value(group.assignment_epoch)
    for m in members:
        out[key(CURRENT_MEMBER_ASSIGNMENT, g, m.member_id)] = current_member_assignment_value(m)
    if not group.state_partitions.is_empty():
        out[key(STATE_PARTITION_METADATA, g)] = state_partition_metadata_value(group.state_partitions)
    return out


def tombstone_order(keys: Iterable[bytes]) -> list[bytes]:
    """Kafka's order for a group's tombstones (ShareGroup.createGroupTombstoneRecords): current
    assignments, target members, target epoch, member subscriptions, the group, then which share partitions
    have state."""
    rank = {CURRENT_MEMBER_ASSIGNMENT: 0, TARGET_ASSIGNMENT_MEMBER: 1, TARGET_ASSIGNMENT_METADATA: 2,
            MEMBER_METADATA: 3, GROUP_METADATA: 4, STATE_PARTITION_METADATA: 5}
    return sorted(keys, key=lambda k: (rank[decode_key(k)[0]], k))


def rebuild(group_id: str, records: Records, config: GroupConfig, now_ms: int) -> ShareGroup:
    """A group from its records (the last value per key, tombstones already applied). Sessions start
    afresh at ``now_ms``: a member that does not come back within its session is removed."""
    group = ShareGroup(group_id, config)
    members: dict[str, ShareMember] = {}
    for raw_key, raw_value in records.items():
        record_type, _, member_id = decode_key(raw_key)
        if member_id is not None:
            member = members.setdefault(member_id, ShareMember(member_id))
        if record_type == MEMBER_METADATA:
            r = _In(raw_value, "ShareGroupMemberMetadataValue")
            member.rack_id, member.client_id, member.client_host = r.nullable_string(), r.string(), r.string()
            member.subscribed_topic_names = tuple(sorted(r.string() for _ in range(r.count())))
            r.done()
        elif record_type == GROUP_METADATA:
            r = _In(raw_value, "ShareGroupMetadataValue")
            group.group_epoch = r.int32()
            tagged = r.done()
            if METADATA_HASH_TAG in tagged:
                if len(tagged[METADATA_HASH_TAG]) != 8:
                    raise CorruptGroupRecordError("ShareGroupMetadataValue: MetadataHash is not 8 bytes")
                group.metadata_hash = _I64.unpack(tagged[METADATA_HASH_TAG])[0]
        elif record_type == STATE_PARTITION_METADATA:
            group.state_partitions = _read_state_partitions(raw_value)
        elif record_type == TARGET_ASSIGNMENT_METADATA:
            r = _In(raw_value, "ShareGroupTargetAssignmentMetadataValue")
            group.assignment_epoch = r.int32()
            r.done()
        elif record_type == TARGET_ASSIGNMENT_MEMBER:
            r = _In(raw_value, "ShareGroupTargetAssignmentMemberValue")
            group.target[member_id] = r.assignment()
            r.done()
        else:
            r = _In(raw_value, "ShareGroupCurrentMemberAssignmentValue")
            member.member_epoch, member.previous_member_epoch = r.int32(), r.int32()
            state = r.int8()
            try:
                member.state = ShareMemberState(state)
            except ValueError:
                raise CorruptGroupRecordError(f"share member state {state} is not one eoslog knows") from None
            member.assigned = r.assignment()
            r.done()
    for member in members.values():
        member.session_deadline_ms = now_ms + config.share_session_timeout_ms
        group.members[member.member_id] = member
    group.refresh_state()
    return group
