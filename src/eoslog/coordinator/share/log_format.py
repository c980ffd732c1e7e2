"""The ``__share_group_state`` records: Kafka 4.x's ShareSnapshot (type 0) and ShareUpdate (type 1), key and
value bytes, encode and strict decode.

Byte tables and a worked example are in docs/share-groups.md ("The __share_group_state records"). In short
(big-endian; STRING = int16 length + UTF-8; uuid = 16 bytes; the values are flexible: an array is a uvarint
count + 1, and every struct ends with a tagged-field section, uvarint count then (uvarint tag, uvarint size,
bytes) per field):

    key      int16 record type (0 snapshot, 1 update) | STRING GroupId | uuid TopicId | int32 Partition
    snapshot int16 version (0) | int32 SnapshotEpoch | int32 StateEpoch | int32 LeaderEpoch | int64 StartOffset
             | int64 CreateTimestamp | int64 WriteTimestamp | StateBatches | tagged fields
    update   int16 version (0) | int32 SnapshotEpoch | int32 LeaderEpoch | int64 StartOffset | StateBatches
             | tagged fields
    StateBatches  uvarint count + 1, then per batch: int64 FirstOffset | int64 LastOffset (inclusive)
             | int8 DeliveryState | int16 DeliveryCount | tagged fields (none)

Tagged field 0 of both values is DeliveryCompleteCount (int32, KIP-1226, Kafka 4.2), written only when it
is not its default -1, as Kafka's generated code does; other tags are skipped, as Kafka's readers skip
tags they do not know. Tagged field 0x7E00 of both values is eoslog's own (issue 37 step 6): the share
partition's pending transactional acknowledgements, written only when there are some (a Kafka reader skips
it; a write without it means none):

    PendingTransactions  uvarint count + 1, then per transaction: int64 ProducerId | int16 ProducerEpoch
             | int8 Outcome (0 pending, 1 committed, 2 aborted) | Acks | tagged fields (none)
    Acks     uvarint count + 1, then per range: int64 FirstOffset | int64 LastOffset (inclusive)
             | int8 AcknowledgeType (Kafka's: 0 GAP, 1 ACCEPT, 2 RELEASE, 3 REJECT) | tagged fields (none) A record without a value (a tombstone, written with the snapshot key) deletes the
share partition's state.

Decoding is strict: a value that is truncated, has trailing bytes, an unknown version, a null or impossible
array or a DeliveryCompleteCount of the wrong size raises :class:`ShareStateFormatError`, so a damaged
record fails the load instead of becoming a wrong state. A key of a record type this version does not
know raises :class:`UnknownRecordTypeError` (the loader skips those, as Kafka's does).
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

SHARE_SNAPSHOT = 0  # the record type of a whole state (ShareSnapshotKey's apiKey)
SHARE_UPDATE = 1  # the record type of what changed since the snapshot (ShareUpdateKey's apiKey)
VALUE_VERSION = 0
TAG_DELIVERY_COMPLETE_COUNT = 0
NO_DELIVERY_COMPLETE_COUNT = -1  # unknown: the tagged field's default, never written
NO_START_OFFSET = -1  # "not set" in an initialize, "unchanged" in a write and an update
# eoslog's tag for the pending transactional acknowledgements: the first of eoslog's range (0x7E00, as its
# API keys), far above any tag Kafka gives these values.
TAG_PENDING_TRANSACTIONS = 0x7E00
OUTCOME_PENDING, OUTCOME_COMMITTED, OUTCOME_ABORTED = 0, 1, 2
_OUTCOMES = (OUTCOME_PENDING, OUTCOME_COMMITTED, OUTCOME_ABORTED)
_ACKNOWLEDGE_TYPES = (0, 1, 2, 3)  # GAP, ACCEPT, RELEASE, REJECT (RENEW, 4, is never pending)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_KEY_TAIL = struct.Struct(">QQi")  # TopicId (two halves), Partition
_SNAPSHOT_HEAD = struct.Struct(">hiiiqqq")  # version, snapshot/state/leader epoch, start offset, timestamps
_UPDATE_HEAD = struct.Struct(">hiiq")  # version, snapshot epoch, leader epoch, start offset
_BATCH = struct.Struct(">qqbh")  # first offset, last offset, delivery state, delivery count
_PENDING_HEAD = struct.Struct(">qhb")  # producer id, producer epoch, outcome
_PENDING_ACK = struct.Struct(">qqb")  # first offset, last offset, acknowledge type


class ShareStateFormatError(ValueError):
    """Bytes in ``__share_group_state`` that are not a record this version understands."""


class UnknownRecordTypeError(ShareStateFormatError):
    """A key whose record type is not 0 or 1 (a newer Kafka's record): skipped when loading."""


@dataclass(frozen=True, order=True)
class SharePartitionKey:
    """One share partition: the share group, the topic (by id) and the partition (Kafka's SharePartitionKey)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """What FindCoordinator (key type SHARE) and the ``__share_group_state`` partition hash use:
        ``group:topicId:partition``, the topic id as Kafka prints it (URL-safe base64, no padding)."""
        topic = base64.urlsafe_b64encode(self.topic_id.bytes).decode().rstrip("=")
        return f"{self.group_id}:{topic}:{self.partition}"


class StateBatch(NamedTuple):
    """A range of offsets in one state: ``first_offset`` to ``last_offset`` inclusive."""

    first_offset: int
    last_offset: int
    delivery_state: int  # 0 Available, 2 Acknowledged, 4 Archived (1 Acquired is never persisted by Kafka)
    delivery_count: int


class PendingAckRange(NamedTuple):
    """Offsets ``first_offset`` to ``last_offset`` (inclusive) acknowledged with one type in a transaction."""

    first_offset: int
    last_offset: int
    acknowledge_type: int  # Kafka's AcknowledgeType id


class PendingTransaction(NamedTuple):
    """What one producer's transaction holds on a share partition (share/transactional_acks.py's hold), and
    whether its marker came: the leader writes OUTCOME_PENDING; the share coordinator learns the outcome
    from the marker in ``__share_group_state`` and keeps it until the leader writes the set without it."""

    producer_id: int
    producer_epoch: int
    acks: tuple[PendingAckRange, ...]
    outcome: int = OUTCOME_PENDING


@dataclass(frozen=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT
    pending_transactions: tuple[PendingTransaction, ...] = ()


@dataclass(frozen=True)
class ShareUpdateValue:
    snapshot_epoch: int  # the snapshot this update applies to
    leader_epoch: int
    start_offset: int  # NO_START_OFFSET: unchanged
    state_batches: tuple[StateBatch, ...] = ()  # only the ranges that changed
    delivery_complete_count: int = NO_DELIVERY_COMPLETE_COUNT
    pending_transactions: tuple[PendingTransaction, ...] = ()  # the whole set (not what changed): none if ()


@dataclass(frozen=True)
class ShareRecord:
    """One ``__share_group_state`` record: a snapshot, an update, or a tombstone (``value`` None)."""

    record_type: int
    key: SharePartitionKey
    value: ShareSnapshotValue | ShareUpdateValue | None = field(default=None)

    @classmethod
    def tombstone(cls, key: SharePartitionKey) -> ShareRecord:
        return cls(SHARE_SNAPSHOT, key, None)  # Kafka writes tombstones with the snapshot key

    def encode(self) -> tuple[bytes, bytes | None]:
        """(key bytes, value bytes or None for a tombstone)."""
        return encode_key(self.record_type, self.key), None if self.value is None else encode_value(self.value)


def record_of(key: SharePartitionKey, value: ShareSnapshotValue | ShareUpdateValue) -> ShareRecord:
    return ShareRecord(SHARE_SNAPSHOT if isinstance(value, ShareSnapshotValue) else SHARE_UPDATE, key, value)


# ---- uvarints -------------------------------------------------------------------------------------------

def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# ---- encoding -------------------------------------------------------------------------------------------

def encode_key(record_type: int, key: SharePartitionKey) -> bytes:
    if record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        raise ValueError(f"unknown __share_group_state record type {record_type}")
    group = key.group_id.encode("utf-8")
    if len(group) > 0x7FFF:
        raise ValueError(f"group id of {len(group)} bytes does not fit a Kafka STRING")
    high, low = key.topic_id.int >> 64, key.topic_id.int & (2**64 - 1)
    return _INT16.pack(record_type) + _INT16.pack(len(group)) + group + _KEY_TAIL.pack(high, low, key.partition)


def _batches(batches: tuple[StateBatch, ...]) -> bytes:
    out = bytearray(_uvarint(len(batches) + 1))
    for batch in batches:
        out += _BATCH.pack(*batch)
        out.append(0)  # the batch's tagged fields: none
    return bytes(out)


def encode_pending_transactions(pending: tuple[PendingTransaction, ...]) -> bytes:
    """The PendingTransactions bytes (the body of tagged field 0x7E00)."""
    out = bytearray(_uvarint(len(pending) + 1))
    for txn in pending:
        out += _PENDING_HEAD.pack(txn.producer_id, txn.producer_epoch, txn.outcome)
        out += _uvarint(len(txn.acks) + 1)
        for ack in txn.acks:
            out += _PENDING_ACK.pack(*ack)
            out.append(0)  # the range's tagged fields: none
        out.append(0)  # the transaction's tagged fields: none
    return bytes(out)


def _tags(delivery_complete_count: int, pending: tuple[PendingTransaction, ...] = ()) -> bytes:
    fields = []
    if delivery_complete_count != NO_DELIVERY_COMPLETE_COUNT:
        fields.append((TAG_DELIVERY_COMPLETE_COUNT, _INT32.pack(delivery_complete_count)))
    if pending:
        fields.append((TAG_PENDING_TRANSACTIONS, encode_pending_transactions(pending)))
    out = bytearray(_uvarint(len(fields)))
    for tag, data in fields:  # in tag order, as Kafka writes them
        out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


def encode_value(value: ShareSnapshotValue | ShareUpdateValue) -> bytes:
    if isinstance(value, ShareSnapshotValue):
        head = _SNAPSHOT_HEAD.pack(VALUE_VERSION, value.snapshot_epoch, value.state_epoch, value.leader_epoch,
                                   value.start_offset, value.create_timestamp, value.write_timestamp)
    else:
        head = _UPDATE_HEAD.pack(VALUE_VERSION, value.snapshot_epoch, value.leader_epoch, value.start_offset)
    return head + _batches(value.state_batches) + _tags(value.delivery_complete_count, value.pending_transactions)


# ---- decoding -------------------------------------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes | memoryview, what: str) -> None:
        self.buf = bytes(buf)
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise ShareStateFormatError(
                f"{self.what}: needs {n} bytes at position {self.pos}, has {len(self.buf) - self.pos}")
        chunk = self.buf[self.pos:end]
        self.pos = end
        return chunk

    def unpack(self, st: struct.Struct) -> tuple:
        return st.unpack(self.take(st.size))

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            (byte,) = self.take(1)
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ShareStateFormatError(f"{self.what}: unsigned varint longer than 5 bytes at {self.pos}")

    def done(self) -> None:
        # Trailing bytes would mean a layout we misread: refuse rather than guess.
        if self.pos != len(self.buf):
            raise ShareStateFormatError(f"{self.what}: {len(self.buf) - self.pos} trailing bytes")


def record_type_of(key: bytes | memoryview) -> int:
    if len(key) < 2:
        raise ShareStateFormatError("__share_group_state key shorter than its record type")
    return _INT16.unpack_from(key)[0]


def decode_key(key: bytes | memoryview) -> tuple[int, SharePartitionKey]:
    """(record type, key); a record type other than 0 or 1 raises UnknownRecordTypeError."""
    r = _Reader(key, "__share_group_state key")
    (record_type,) = r.unpack(_INT16)
    if record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        raise UnknownRecordTypeError(f"unknown __share_group_state record type {record_type}")
    (length,) = r.unpack(_INT16)
    if length < 0:
        raise ShareStateFormatError("__share_group_state key: null group id")
    try:
        group_id = r.take(length).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ShareStateFormatError(f"__share_group_state key: group id is not UTF-8 ({e})") from None
    high, low, partition = r.unpack(_KEY_TAIL)
    r.done()
    return record_type, SharePartitionKey(group_id, uuid.UUID(int=(high << 64) | low), partition)


def _read_batches(r: _Reader) -> tuple[StateBatch, ...]:
    count = r.uvarint() - 1
    if count < 0:
        raise ShareStateFormatError(f"{r.what}: null StateBatches")
    if count * (_BATCH.size + 1) > len(r.buf) - r.pos:
        raise ShareStateFormatError(f"{r.what}: {count} state batches cannot fit in {len(r.buf) - r.pos} bytes")
    batches = []
    for _ in range(count):
        batches.append(StateBatch(*r.unpack(_BATCH)))
        _skip_tags(r, known=())
    return tuple(batches)


def _skip_tags(r: _Reader, known: tuple[int, ...]) -> dict[int, bytes]:
    """Reads a tagged-field section: the fields named in ``known`` (tag -> bytes), the others skipped."""
    found: dict[int, bytes] = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        data = r.take(r.uvarint())
        if tag in known:
            if tag in found:
                raise ShareStateFormatError(f"{r.what}: tagged field {tag} twice")
            found[tag] = data
    return found


def _value_tags(r: _Reader) -> tuple[int, tuple[PendingTransaction, ...]]:
    """(DeliveryCompleteCount, PendingTransactions) from a value's tagged fields."""
    tags = _skip_tags(r, known=(TAG_DELIVERY_COMPLETE_COUNT, TAG_PENDING_TRANSACTIONS))
    data = tags.get(TAG_DELIVERY_COMPLETE_COUNT)
    count = NO_DELIVERY_COMPLETE_COUNT
    if data is not None:
        if len(data) != _INT32.size:
            raise ShareStateFormatError(f"{r.what}: DeliveryCompleteCount of {len(data)} bytes, not 4")
        count = _INT32.unpack(data)[0]
    pending = tags.get(TAG_PENDING_TRANSACTIONS)
    return count, () if pending is None else decode_pending_transactions(pending, f"{r.what} PendingTransactions")


def decode_pending_transactions(data: bytes | memoryview, what: str = "PendingTransactions"
                                ) -> tuple[PendingTransaction, ...]:
    """Strict, as the values: a truncated, trailing, null or impossible array, an unknown outcome or
    acknowledge type, or a range ending before it starts raises ShareStateFormatError."""
    r = _Reader(data, what)
    count = r.uvarint() - 1
    if count < 0 or count * (_PENDING_HEAD.size + 2) > len(r.buf) - r.pos:
        raise ShareStateFormatError(f"{what}: a null or impossible count of transactions ({count})")
    out = []
    for _ in range(count):
        producer_id, producer_epoch, outcome = r.unpack(_PENDING_HEAD)
        if outcome not in _OUTCOMES:
            raise ShareStateFormatError(f"{what}: unknown outcome {outcome} of producer {producer_id}")
        acks_count = r.uvarint() - 1
        if acks_count < 0 or acks_count * (_PENDING_ACK.size + 1) > len(r.buf) - r.pos:
            raise ShareStateFormatError(f"{what}: a null or impossible count of ranges ({acks_count})")
        acks = []
        for _ in range(acks_count):
            ack = PendingAckRange(*r.unpack(_PENDING_ACK))
            if ack.acknowledge_type not in _ACKNOWLEDGE_TYPES or ack.last_offset < ack.first_offset:
                raise ShareStateFormatError(f"{what}: impossible pending range {tuple(ack)}")
            acks.append(ack)
            _skip_tags(r, known=())
        _skip_tags(r, known=())
        out.append(PendingTransaction(producer_id, producer_epoch, tuple(acks), outcome))
    r.done()
    return tuple(out)


def decode_value(record_type: int, value: bytes | memoryview) -> ShareSnapshotValue | ShareUpdateValue:
    if record_type == SHARE_SNAPSHOT:
        r = _Reader(value, "ShareSnapshotValue")
        version, snapshot_epoch, state_epoch, leader_epoch, start_offset, created, written = \
            r.unpack(_SNAPSHOT_HEAD)
        _check_version(r, version)
        batches = _read_batches(r)
        count, pending = _value_tags(r)
        r.done()
        return ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start_offset, created, written,
                                  batches, count, pending)
    if record_type == SHARE_UPDATE:
        r = _Reader(value, "ShareUpdateValue")
        version, snapshot_epoch, leader_epoch, start_offset = r.unpack(_UPDATE_HEAD)
        _check_version(r, version)
        batches = _read_batches(r)
        count, pending = _value_tags(r)
        r.done()
        return ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, batches, count, pending)
    raise UnknownRecordTypeError(f"unknown __share_group_state record type {record_type}")


def _check_version(r: _Reader, version: int) -> None:
    if version != VALUE_VERSION:
        raise ShareStateFormatError(f"{r.what}: unknown value version {version}")


def decode_record(key: bytes | memoryview, value: bytes | memoryview | None) -> ShareRecord:
    record_type, share_key = decode_key(key)
    return ShareRecord(record_type, share_key, None if value is None else decode_value(record_type, value))
