"""``__consumer_offsets`` records exactly as Kafka writes them, and the loader that replays them.

docs/groups.md ("The __consumer_offsets records") has the byte tables; this module is the code for
them. All integers are big-endian; a string is an int16 length then UTF-8 bytes (length -1 = null
for the nullable ones); ``bytes`` is an int32 length then the bytes. Every key and value starts with
an int16 version:

    key version 0, 1   OffsetCommitKey     group, topic, partition int32
    key version 2      GroupMetadataKey    group
    key version 3-8    consumer group (KIP-848) records, see consumer_log_format.py
    key version 10-14  share group (KIP-932) records, see share_log_format.py
    value (offset)     OffsetCommitValue   v0-v3, written as v3 (v1 when an expire timestamp is set)
    value (group)      GroupMetadataValue  v0-v3, written as v3

A record with a null value is a tombstone: the offset or group it keys is deleted. The loader keeps
the last record per key (the log is the history; compaction only drops superseded ones early).

Transactional offset commits (TxnOffsetCommit) sit in transactional batches and only count once the
producer's COMMIT marker follows them; an ABORT marker drops them. ``load`` therefore takes each
record with its batch's producer id and transactional flag, and control markers as separate entries.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from eoslog.coordinator.group.errors import CorruptGroupRecordError
from eoslog.protocol.coordinator_partition import java_string_hash, partition_for  # noqa: F401 (re-exported)

OFFSET_COMMIT_KEY_VERSION = 1  # 0 and 1 share a layout; Kafka writes 1
GROUP_METADATA_KEY_VERSION = 2
# Consumer group (KIP-848) records: loaded as raw key/value per group here, decoded by consumer_log_format.
CONSUMER_GROUP_KEY_VERSIONS = frozenset(range(3, 9))
# Share group (KIP-932) records, likewise decoded by share_log_format (15: ShareGroupStatePartitionMetadata).
SHARE_GROUP_KEY_VERSIONS = frozenset(range(10, 16))
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1  # the only version carrying expire_timestamp
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


# ---------------------------------------------------------------------------------------------------
# Record types


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1  # v3+; -1 = unknown
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # v1 only; -1 = none


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class UnknownKey:
    """A key version this broker does not own (Kafka 4's consumer/share group records use 3+)."""

    version: int


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None  # v3+
    client_id: str
    client_host: str
    rebalance_timeout: int  # v1+ (v0 readers take the session timeout)
    session_timeout: int
    subscription: bytes  # the member's metadata for the group's chosen protocol
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1  # v2+
    members: tuple[MemberRecord, ...] = ()


# ---------------------------------------------------------------------------------------------------
# Primitive writer / reader


class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(_INT16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_INT32.pack(v))

    def int64(self, v: int) -> None:
        self.parts.append(_INT64.pack(v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.parts.append(_INT16.pack(-1))
            return
        raw = v.encode("utf-8")
        if len(raw) > 0x7FFF:
            raise ValueError(f"string of {len(raw)} bytes does not fit an int16 length")
        self.parts.append(_INT16.pack(len(raw)))
        self.parts.append(raw)

    def bytes_(self, v: bytes) -> None:
        self.parts.append(_INT32.pack(len(v)))
        self.parts.append(bytes(v))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes | memoryview, what: str) -> None:
        self.buf = bytes(buf)
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise CorruptGroupRecordError(
                f"{self.what}: needs {n} bytes at position {self.pos}, has {len(self.buf) - self.pos}")
        chunk = self.buf[self.pos:end]
        self.pos = end
        return chunk

    def int16(self) -> int:
        return _INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _INT64.unpack(self._take(8))[0]

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptGroupRecordError(f"{self.what}: string is not UTF-8 ({e})") from None

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise CorruptGroupRecordError(f"{self.what}: null where a string is required")
        return s

    def bytes_(self) -> bytes:
        n = self.int32()
        if n == -1:  # not nullable in the schema; Kafka would fail, we read it as empty
            return b""
        return self._take(n)

    def done(self) -> None:
        # Trailing bytes mean a newer layout we would silently misread; refuse instead.
        if self.pos != len(self.buf):
            raise CorruptGroupRecordError(f"{self.what}: {len(self.buf) - self.pos} trailing bytes")


# ---------------------------------------------------------------------------------------------------
# Keys


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = _Writer()
    w.int16(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.int32(key.partition)
    return w.getvalue()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = _Writer()
    w.int16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.getvalue()


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return encode_offset_commit_key(key)
    return encode_group_metadata_key(key)


def decode_key(buf: bytes | memoryview) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    r = _Reader(buf, "__consumer_offsets key")
    version = r.int16()
    if version in (0, 1):
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(r.string(), r.string(), r.int32())
    elif version == 2:
        key = GroupMetadataKey(r.string())
    else:
        return UnknownKey(version)
    r.done()
    return key


# ---------------------------------------------------------------------------------------------------
# Values


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    if version is None:
        version = (OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY if value.expire_timestamp != -1
                   else OFFSET_COMMIT_VALUE_VERSION)
    if version not in (0, 1, 2, 3):
        raise ValueError(f"OffsetCommitValue version {version} is not written by eoslog")
    w = _Writer()
    w.int16(version)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    return w.getvalue()


def decode_offset_commit_value(buf: bytes | memoryview) -> OffsetCommitValue:
    r = _Reader(buf, "OffsetCommitValue")
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise CorruptGroupRecordError(f"OffsetCommitValue version {version} is not supported")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.done()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def encode_group_metadata_value(value: GroupMetadataValue,
                                version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if version not in (0, 1, 2, 3):
        raise ValueError(f"GroupMetadataValue version {version} is not written by eoslog")
    w = _Writer()
    w.int16(version)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.getvalue()


def decode_group_metadata_value(buf: bytes | memoryview) -> GroupMetadataValue:
    r = _Reader(buf, "GroupMetadataValue")
    version = r.int16()
    if version not in (0, 1, 2, 3):
        raise CorruptGroupRecordError(f"GroupMetadataValue version {version} is not supported")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.int64() if version >= 2 else -1
    count = r.int32()
    if count < 0:
        raise CorruptGroupRecordError(f"GroupMetadataValue: negative member count {count}")
    members = []
    for _ in range(count):
        member_id = r.string()
        group_instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        members.append(MemberRecord(
            member_id, group_instance_id, client_id, client_host,
            session_timeout if rebalance_timeout is None else rebalance_timeout,
            session_timeout, r.bytes_(), r.bytes_()))
    r.done()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp,
                              tuple(members))


# ---------------------------------------------------------------------------------------------------
# Which partition of __consumer_offsets holds a group


# ---------------------------------------------------------------------------------------------------
# Loading a partition


class Marker(Enum):
    """Control record types, Kafka's ids."""

    ABORT = 0
    COMMIT = 1


class LogEntry(NamedTuple):
    """One record of ``__consumer_offsets`` as the loader needs it.

    For a control batch pass ``marker`` (and the batch's ``producer_id``); key and value are then
    ignored. ``offset`` is the record's log offset: when a transaction commits, its offsets only
    replace committed ones written *earlier* in the log.
    """

    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    is_transactional: bool = False
    marker: Marker | None = None


class LoggedOffset(NamedTuple):
    value: OffsetCommitValue
    log_offset: int


TopicPartitionKey = tuple[str, int]


@dataclass
class LoadedPartition:
    """The state one ``__consumer_offsets`` partition describes."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartitionKey, LoggedOffset]] = field(default_factory=dict)
    # producer_id -> group -> (topic, partition) -> offset: transactional commits without a marker yet
    pending_txn_offsets: dict[int, dict[str, dict[TopicPartitionKey, LoggedOffset]]] = field(
        default_factory=dict)
    # groups whose metadata was deleted (tombstone seen last), for callers that track removals
    deleted_groups: set[str] = field(default_factory=set)
    # consumer groups (KIP-848): group -> {key: value}, the last value per key, tombstones applied
    consumer_groups: dict[str, dict[bytes, bytes]] = field(default_factory=dict)
    # share groups (KIP-932), the same way
    share_groups: dict[str, dict[bytes, bytes]] = field(default_factory=dict)


def merge_txn_offsets(committed: dict[TopicPartitionKey, LoggedOffset],
                      pending: dict[TopicPartitionKey, LoggedOffset]) -> None:
    """Apply a committed transaction's offsets: each replaces the committed one unless that one was
    written later in the log (a plain commit after the TxnOffsetCommit but before the marker wins,
    as it does in Kafka)."""
    for tp, txn in pending.items():
        current = committed.get(tp)
        if current is None or current.log_offset < txn.log_offset:
            committed[tp] = txn


def load(entries: Iterable[LogEntry]) -> LoadedPartition:
    """Rebuild groups and offsets from a partition's records, oldest first."""
    out = LoadedPartition()
    for entry in entries:
        if entry.marker is not None:
            pending = out.pending_txn_offsets.pop(entry.producer_id, None)
            if pending and entry.marker is Marker.COMMIT:
                for group, offsets in pending.items():
                    merge_txn_offsets(out.offsets.setdefault(group, {}), offsets)
            continue
        if entry.key is None:
            raise CorruptGroupRecordError(f"record at offset {entry.offset} has no key")
        key = decode_key(entry.key)
        if isinstance(key, OffsetCommitKey):
            tp = (key.topic, key.partition)
            if entry.is_transactional and entry.producer_id >= 0:
                if entry.value is not None:
                    value = decode_offset_commit_value(entry.value)
                    (out.pending_txn_offsets.setdefault(entry.producer_id, {})
                     .setdefault(key.group, {})[tp]) = LoggedOffset(value, entry.offset)
            elif entry.value is None:
                group_offsets = out.offsets.get(key.group)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
                    if not group_offsets:
                        del out.offsets[key.group]
            else:
                value = decode_offset_commit_value(entry.value)
                out.offsets.setdefault(key.group, {})[tp] = LoggedOffset(value, entry.offset)
        elif isinstance(key, GroupMetadataKey):
            if entry.value is None:
                out.groups.pop(key.group, None)
                out.deleted_groups.add(key.group)
            else:
                out.groups[key.group] = decode_group_metadata_value(entry.value)
                out.deleted_groups.discard(key.group)
                # a group id names one group: the later wins
                out.consumer_groups.pop(key.group, None)
                out.share_groups.pop(key.group, None)
        elif key.version in CONSUMER_GROUP_KEY_VERSIONS:
            group_id = _modern_group_record(out.consumer_groups, entry)
            if entry.value is not None:
                out.groups.pop(group_id, None)
                out.share_groups.pop(group_id, None)
        elif key.version in SHARE_GROUP_KEY_VERSIONS:
            group_id = _modern_group_record(out.share_groups, entry)
            if entry.value is not None:
                out.groups.pop(group_id, None)
                out.consumer_groups.pop(group_id, None)
        # Other UnknownKeys (streams groups): skipped like Kafka skips unknown
        # record types it is told to ignore.
    return out


def _modern_group_record(groups: dict[str, dict[bytes, bytes]], entry: LogEntry) -> str:
    """Keeps the last value of a consumer or share group record (int16 type, then the group id first);
    returns the group id."""
    assert entry.key is not None
    r = _Reader(entry.key, "group record key")
    r.int16()
    group_id = r.string()
    records = groups.setdefault(group_id, {})
    if entry.value is None:
        records.pop(bytes(entry.key), None)
        if not records:
            del groups[group_id]
    else:
        records[bytes(entry.key)] = bytes(entry.value)
    return group_id
