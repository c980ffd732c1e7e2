"""The ``__transaction_state`` record: key and value bytes, partitioning, and loading at startup.

Byte layouts are documented once, in docs/transactions.md ("The __transaction_state record"); they are
Kafka's TransactionLogKey v0 and TransactionLogValue v0 / v1 so the topic reads the same as Kafka's. In
short (big-endian, Kafka's STRING = int16 length + UTF-8, ARRAY = int32 count or -1 for null):

    key    int16 key_version (0) | STRING transactional_id
    value  int16 value_version (0) | int64 producer_id | int16 producer_epoch | int32 transaction_timeout_ms
           | int8 transaction_status | ARRAY(STRING topic, ARRAY(int32 partition)) transaction_partitions
           | int64 transaction_last_update_timestamp_ms | int64 transaction_start_timestamp_ms

Value version 1 (written for transaction version 2 only, so a version-1 id's bytes are unchanged) is the
same fields in Kafka's flexible encoding (COMPACT_STRING / COMPACT_ARRAY = uvarint length + 1, 0 = null;
an empty tagged-field section after each partition entry) followed by the tagged fields 0
PreviousProducerId int64, 1 NextProducerId int64, 2 ClientTransactionVersion int16, each written only
when it is not its default (-1, -1, 0). eoslog's check-back transactions add tags 32256 CheckBackGroup
COMPACT_STRING, 32257 CheckCount int32, 32258 NextCheckTimestampMs int64, 32259 AbortReason COMPACT_STRING
(defaults null, -1, -1, null) and always use value version 1; Checking is written as status Ongoing with
CheckCount >= 0, so a Kafka-format reader skips our tags and sees the open transaction it is.

A record with no value (a tombstone) retires the transactional id (state Dead). Compaction keeps only the
newest record per key, so the loader applies records in log order and the newest one wins.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eoslog.coordinator.transaction.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_CHECK,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    TRANSACTION_VERSION_2,
    TopicPartition,
    TransactionMetadata,
    TxnTransitMetadata,
    WriteTxnMarkers,
    result_of,
)
from eoslog.coordinator.transaction.state import TransactionState, UnknownTransactionState
from eoslog.protocol.coordinator_partition import java_string_hash, partition_for  # noqa: F401 (re-exported)
from eoslog.protocol.wire import Malformed, read_uvarint, uvarint

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
KEY_VERSION = 0
VALUE_VERSION = 0
FLEXIBLE_VALUE_VERSION = 1  # KIP-890 part 2: carries the tagged fields below
TAG_PREVIOUS_PRODUCER_ID, TAG_NEXT_PRODUCER_ID, TAG_CLIENT_TRANSACTION_VERSION = 0, 1, 2
# eoslog's own range (docs/transactions.md, "Check-back transactions", Record format)
TAG_CHECK_BACK_GROUP, TAG_CHECK_COUNT, TAG_NEXT_CHECK_TIMESTAMP_MS, TAG_ABORT_REASON = 32256, 32257, 32258, 32259

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer_id, producer_epoch, timeout, status
_VALUE_TAIL = struct.Struct(">qq")  # last_update_timestamp_ms, start_timestamp_ms
_INT64 = struct.Struct(">q")


class TransactionLogFormatError(ValueError):
    """Bytes in __transaction_state that are not a record this version understands."""


# ---- partitioning ---------------------------------------------------------------------------------------

# ---- key --------------------------------------------------------------------------------------------

def _encode_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes does not fit a Kafka STRING")
    return _INT16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _INT16.pack(KEY_VERSION) + _encode_string(transactional_id)


class _Reader:
    def __init__(self, buf: bytes | memoryview) -> None:
        self.buf = memoryview(buf)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise TransactionLogFormatError(f"record truncated at byte {self.pos} (wanted {n} more)")
        view = self.buf[self.pos:self.pos + n]
        self.pos += n
        return view

    def unpack(self, st: struct.Struct) -> tuple:
        return st.unpack(self.take(st.size))

    def string(self) -> str:
        (length,) = self.unpack(_INT16)
        if length < 0:
            raise TransactionLogFormatError("null string where one is required")
        try:
            return bytes(self.take(length)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise TransactionLogFormatError(f"string is not UTF-8: {e}") from None

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise TransactionLogFormatError(f"{len(self.buf) - self.pos} trailing bytes after the record")


def key_version(key: bytes | memoryview) -> int:
    if len(key) < 2:
        raise TransactionLogFormatError("key shorter than its version field")
    return _INT16.unpack_from(key)[0]


def decode_key(key: bytes | memoryview) -> str:
    r = _Reader(key)
    (version,) = r.unpack(_INT16)
    if version != KEY_VERSION:
        raise TransactionLogFormatError(f"unknown transaction log key version {version}")
    transactional_id = r.string()
    r.done()
    return transactional_id


# ---- value ------------------------------------------------------------------------------------------

def encode_value(transit: TxnTransitMetadata) -> bytes | None:
    """The value to log for ``transit``; None (a tombstone) when the id is being retired."""
    if transit.state is TransactionState.DEAD:
        return None
    if transit.state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"{transit.transactional_id!r}: Empty with partitions {sorted(transit.topic_partitions)}")
    if transit.client_transaction_version >= TRANSACTION_VERSION_2 or _has_check_back(transit):
        return _encode_flexible_value(transit)
    out = bytearray(_VALUE_HEAD.pack(VALUE_VERSION, transit.producer_id, transit.producer_epoch,
                                     transit.txn_timeout_ms, transit.state.id))
    if transit.state is TransactionState.EMPTY:
        out += _INT32.pack(-1)  # Kafka writes no partition array for Empty
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in transit.topic_partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        out += _INT32.pack(len(by_topic))
        for topic in sorted(by_topic):  # sorted only so equal states give equal bytes
            out += _encode_string(topic)
            ids = sorted(by_topic[topic])
            out += _INT32.pack(len(ids))
            out += struct.pack(f">{len(ids)}i", *ids)
    out += _VALUE_TAIL.pack(transit.txn_last_update_timestamp, transit.txn_start_timestamp)
    return bytes(out)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return {topic: sorted(by_topic[topic]) for topic in sorted(by_topic)}  # sorted: equal states, equal bytes


def _compact_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def _has_check_back(transit: TxnTransitMetadata) -> bool:
    return (transit.check_back_group is not None or transit.check_count != NO_CHECK
            or transit.abort_reason is not None)


def _encode_flexible_value(transit: TxnTransitMetadata) -> bytes:
    """Value version 1 (the module docstring)."""
    # Checking goes to disk as Ongoing + CheckCount: what it is for anyone who does not know check-back.
    status = TransactionState.ONGOING.id if transit.state is TransactionState.CHECKING else transit.state.id
    out = bytearray(_VALUE_HEAD.pack(FLEXIBLE_VALUE_VERSION, transit.producer_id, transit.producer_epoch,
                                     transit.txn_timeout_ms, status))
    if transit.state is TransactionState.EMPTY:
        out += uvarint(0)  # null, as in version 0
    else:
        by_topic = _by_topic(transit.topic_partitions)
        out += uvarint(len(by_topic) + 1)
        for topic, ids in by_topic.items():
            out += _compact_string(topic)
            out += uvarint(len(ids) + 1)
            out += struct.pack(f">{len(ids)}i", *ids)
            out += uvarint(0)  # the partition entry's tagged fields: none
    out += _VALUE_TAIL.pack(transit.txn_last_update_timestamp, transit.txn_start_timestamp)
    tags = []
    if transit.previous_producer_id != NO_PRODUCER_ID:
        tags.append((TAG_PREVIOUS_PRODUCER_ID, _INT64.pack(transit.previous_producer_id)))
    if transit.next_producer_id != NO_PRODUCER_ID:
        tags.append((TAG_NEXT_PRODUCER_ID, _INT64.pack(transit.next_producer_id)))
    if transit.client_transaction_version != 0:
        tags.append((TAG_CLIENT_TRANSACTION_VERSION, _INT16.pack(transit.client_transaction_version)))
    if transit.check_back_group is not None:
        tags.append((TAG_CHECK_BACK_GROUP, _compact_string(transit.check_back_group)))
    if transit.check_count != NO_CHECK:
        tags.append((TAG_CHECK_COUNT, _INT32.pack(transit.check_count)))
    if transit.next_check_ms != NO_TIMESTAMP:
        tags.append((TAG_NEXT_CHECK_TIMESTAMP_MS, _INT64.pack(transit.next_check_ms)))
    if transit.abort_reason is not None:
        tags.append((TAG_ABORT_REASON, _compact_string(transit.abort_reason)))
    out += uvarint(len(tags))
    for tag, data in tags:
        out += uvarint(tag) + uvarint(len(data)) + data
    return bytes(out)


@dataclass(frozen=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    check_back_group: str | None = None
    check_count: int = NO_CHECK
    next_check_ms: int = NO_TIMESTAMP
    abort_reason: str | None = None


def decode_value(value: bytes | memoryview) -> TransactionLogValue:
    r = _Reader(value)
    version, producer_id, producer_epoch, timeout_ms, status = r.unpack(_VALUE_HEAD)
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise TransactionLogFormatError(f"unknown transaction log value version {version}")
    try:
        state = TransactionState.from_id(status)
    except UnknownTransactionState as e:
        raise TransactionLogFormatError(str(e)) from None
    if version == FLEXIBLE_VALUE_VERSION:
        return _decode_flexible_value(r, producer_id, producer_epoch, timeout_ms, state)
    partitions: set[TopicPartition] = set()
    (topic_count,) = r.unpack(_INT32)
    if topic_count < -1:
        raise TransactionLogFormatError(f"bad partition array length {topic_count}")
    for _ in range(max(topic_count, 0)):
        topic = r.string()
        (count,) = r.unpack(_INT32)
        if count < 0:
            raise TransactionLogFormatError(f"bad partition id array length {count} for topic {topic!r}")
        for partition in struct.unpack(f">{count}i", r.take(4 * count)):
            partitions.add(TopicPartition(topic, partition))
    last_update, start = r.unpack(_VALUE_TAIL)
    r.done()
    if state is TransactionState.EMPTY:
        partitions.clear()  # as Kafka: an Empty record's partitions mean nothing
    return TransactionLogValue(producer_id, producer_epoch, timeout_ms, state, frozenset(partitions),
                               last_update, start)


def _decode_flexible_value(r: _Reader, producer_id: int, producer_epoch: int, timeout_ms: int,
                           state: TransactionState) -> TransactionLogValue:
    partitions: set[TopicPartition] = set()
    topic_count = _uvarint(r) - 1
    for _ in range(max(topic_count, 0)):
        length = _uvarint(r) - 1
        if length < 0:
            raise TransactionLogFormatError("null topic name in a transaction's partitions")
        try:
            topic = bytes(r.take(length)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise TransactionLogFormatError(f"topic is not UTF-8: {e}") from None
        count = _uvarint(r) - 1
        if count < 0:
            raise TransactionLogFormatError(f"null partition id array for topic {topic!r}")
        for partition in struct.unpack(f">{count}i", r.take(4 * count)):
            partitions.add(TopicPartition(topic, partition))
        _skip_tags(r)
    last_update, start = r.unpack(_VALUE_TAIL)
    fields: dict[int, object] = {
        TAG_PREVIOUS_PRODUCER_ID: NO_PRODUCER_ID, TAG_NEXT_PRODUCER_ID: NO_PRODUCER_ID,
        TAG_CLIENT_TRANSACTION_VERSION: 0, TAG_CHECK_BACK_GROUP: None, TAG_CHECK_COUNT: NO_CHECK,
        TAG_NEXT_CHECK_TIMESTAMP_MS: NO_TIMESTAMP, TAG_ABORT_REASON: None}
    for _ in range(_uvarint(r)):
        tag, size = _uvarint(r), _uvarint(r)
        data = r.take(size)
        if tag in (TAG_CHECK_BACK_GROUP, TAG_ABORT_REASON):
            fields[tag] = _decode_compact_string(data, tag)
            continue
        st = _TAG_TYPES.get(tag)
        if st is not None:
            if size != st.size:
                raise TransactionLogFormatError(f"tagged field {tag} of {size} bytes")
            fields[tag] = st.unpack(data)[0]
        # unknown tags are skipped: room for Kafka's later fields
    r.done()
    if state is TransactionState.EMPTY:
        partitions.clear()
    check_count = fields[TAG_CHECK_COUNT]
    if state is TransactionState.ONGOING and check_count >= 0:
        state = TransactionState.CHECKING  # how Checking is written (the module docstring)
    return TransactionLogValue(producer_id, producer_epoch, timeout_ms, state, frozenset(partitions),
                               last_update, start, fields[TAG_PREVIOUS_PRODUCER_ID],
                               fields[TAG_NEXT_PRODUCER_ID], fields[TAG_CLIENT_TRANSACTION_VERSION],
                               fields[TAG_CHECK_BACK_GROUP], check_count, fields[TAG_NEXT_CHECK_TIMESTAMP_MS],
                               fields[TAG_ABORT_REASON])


_TAG_TYPES = {TAG_PREVIOUS_PRODUCER_ID: _INT64, TAG_NEXT_PRODUCER_ID: _INT64, TAG_CLIENT_TRANSACTION_VERSION: _INT16,
              TAG_CHECK_COUNT: _INT32, TAG_NEXT_CHECK_TIMESTAMP_MS: _INT64}


def _decode_compact_string(data: memoryview, tag: int) -> str | None:
    inner = _Reader(data)
    length = _uvarint(inner) - 1
    if length < 0:
        return None
    try:
        text = bytes(inner.take(length)).decode("utf-8")
    except UnicodeDecodeError as e:
        raise TransactionLogFormatError(f"tagged field {tag} is not UTF-8: {e}") from None
    inner.done()
    return text


def _uvarint(r: _Reader) -> int:
    try:
        value, pos = read_uvarint(r.buf, r.pos)
    except (Malformed, IndexError) as e:
        raise TransactionLogFormatError(f"bad varint at byte {r.pos}: {e}") from None
    r.pos = pos
    return value


def _skip_tags(r: _Reader) -> None:
    for _ in range(_uvarint(r)):
        _uvarint(r)
        r.take(_uvarint(r))


def _retry_identity(v: TransactionLogValue) -> tuple[int, int]:
    """Transaction version 2: the identity whose EndTxn decided a Prepare / Complete record, so its
    retry is still answered after a reload: epoch - 1 of the same producer id, or the last epoch before
    the producer id moved on (prepare_complete). Version 1 keeps none (see load_state)."""
    if v.client_transaction_version < TRANSACTION_VERSION_2 or not (
            v.state.is_prepare or v.state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)):
        return NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    if v.producer_epoch == 0 and v.previous_producer_id not in (NO_PRODUCER_ID, v.producer_id):
        return v.previous_producer_id, MAX_PRODUCER_EPOCH - 1
    if v.producer_epoch == 0:
        return NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    return v.producer_id, v.producer_epoch - 1


# ---- loading and recovery ---------------------------------------------------------------------------------

def load_state(records: Iterable[tuple[bytes | memoryview, bytes | memoryview | None]]
               ) -> dict[str, TransactionMetadata]:
    """Rebuild the coordinator cache from one __transaction_state partition, read from its start.

    ``records`` are (key, value) in log order; a None value is a tombstone. Records whose key version
    is not a transaction log key are skipped (room for other record types, as in Kafka).
    """
    states: dict[str, TransactionMetadata] = {}
    for key, value in records:
        if key_version(key) != KEY_VERSION:
            continue
        transactional_id = decode_key(key)
        if value is None:
            states.pop(transactional_id, None)
            continue
        v = decode_value(value)
        if v.state is TransactionState.DEAD:
            states.pop(transactional_id, None)
            continue
        state = v.state
        if state is TransactionState.PREPARE_EPOCH_FENCE:
            # Never written by eoslog (nor by Kafka); if met, it can only mean "abort under this epoch".
            state = TransactionState.PREPARE_ABORT
        # previous_producer_id / last_producer_epoch are not in the v0 value: after a reload no older
        # identity is recoverable (a KIP-360 retry across a coordinator restart is fenced, as in Kafka).
        # A transaction version 2 record keeps the one whose EndTxn retry must still be answered.
        previous_producer_id, last_producer_epoch = _retry_identity(v)
        states[transactional_id] = TransactionMetadata.from_transit(TxnTransitMetadata(
            transactional_id=transactional_id, from_state=state, state=state,
            producer_id=v.producer_id, previous_producer_id=previous_producer_id,
            next_producer_id=v.next_producer_id,
            producer_epoch=v.producer_epoch, last_producer_epoch=last_producer_epoch,
            txn_timeout_ms=v.transaction_timeout_ms, topic_partitions=v.topic_partitions,
            txn_start_timestamp=v.start_timestamp_ms, txn_last_update_timestamp=v.last_update_timestamp_ms,
            client_transaction_version=v.client_transaction_version, check_back_group=v.check_back_group,
            check_count=v.check_count, next_check_ms=v.next_check_ms, abort_reason=v.abort_reason))
    return states


@dataclass(frozen=True)
class RecoveryAction:
    """A decision found in the log whose markers may not all be written yet.

    ``complete`` is already pending on the metadata (so client requests get CONCURRENT_TRANSACTIONS
    meanwhile): write ``markers`` (writing one twice is harmless), then log ``complete`` and call
    ``metadata.complete_transition(complete)``."""

    markers: WriteTxnMarkers
    complete: TxnTransitMetadata


def recovery_actions(states: Mapping[str, TransactionMetadata], now_ms: int) -> list[RecoveryAction]:
    """Finish what the log says was decided: every PrepareCommit / PrepareAbort gets its markers and
    its Complete record. Ongoing transactions are left alone; the timeout aborts them if their producer
    does not come back."""
    actions = []
    for transactional_id in sorted(states):
        metadata = states[transactional_id]
        if not metadata.state.is_prepare or metadata.pending_transition_in_progress:
            continue
        result = result_of(metadata.state)
        assert result is not None
        markers = WriteTxnMarkers(transactional_id, metadata.producer_id, metadata.producer_epoch, result,
                                  frozenset(metadata.topic_partitions))
        actions.append(RecoveryAction(markers, metadata.prepare_complete(now_ms)))
    return actions
