"""Control records: the COMMIT and ABORT transaction markers (docs/record-format.md, "Control records").

A marker is a batch with the transactional and control attribute bits set, the producer's id and epoch
in its header, and exactly one record whose key names the marker type and whose value carries the
transaction coordinator's epoch. Consumers never see these records; read_committed consumers use them to
drop aborted data, and the broker uses them to advance the last stable offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from eoslog.records.batch import DecodedBatch, Record, decode_batch
from eoslog.records.builder import build_batch, now_ms
from eoslog.records.errors import CorruptRecordError

CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_KEY_VERSION = 0
END_TRANSACTION_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator_epoch
END_TRANSACTION_MARKER_VERSION = 0


class ControlType(IntEnum):
    """The type in a control record's key. Persisted values: never renumber."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlType
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type is ControlType.COMMIT


def control_record_key(control_type: ControlType) -> bytes:
    return CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type)


def end_transaction_marker_value(coordinator_epoch: int) -> bytes:
    return END_TRANSACTION_MARKER_VALUE.pack(END_TRANSACTION_MARKER_VERSION, coordinator_epoch)


def build_control_batch(
    marker: ControlType,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker (never compressed, no sequence)."""
    if producer_id < 0:
        raise ValueError(f"a transaction marker needs a producer id, got {producer_id}")
    record = Record(
        0, 0, control_record_key(ControlType(marker)), end_transaction_marker_value(coordinator_epoch)
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=now_ms() if timestamp is None else timestamp,
    )


def parse_control_type(key: bytes | None) -> ControlType:
    """The type named by a control record's key.

    Kafka reads the version-0 fields of any newer key version too, so a higher version is accepted.
    """
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecordError(
            f"control record key must be at least {CONTROL_KEY.size} bytes, got {_len(key)}"
        )
    version, raw_type = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key has negative version {version}")
    try:
        return ControlType(raw_type)
    except ValueError:
        raise CorruptRecordError(f"unknown control record type {raw_type}") from None


def parse_control_record(record: Record) -> EndTransactionMarker:
    """The COMMIT/ABORT marker a control record holds."""
    control_type = parse_control_type(record.key)
    value = record.value
    if value is None or len(value) < END_TRANSACTION_MARKER_VALUE.size:
        raise CorruptRecordError(
            f"end transaction marker value must be at least {END_TRANSACTION_MARKER_VALUE.size} bytes, "
            f"got {_len(value)}"
        )
    version, coordinator_epoch = END_TRANSACTION_MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"end transaction marker has negative version {version}")
    return EndTransactionMarker(control_type, coordinator_epoch)


def parse_control_batch(batch: DecodedBatch) -> EndTransactionMarker:
    """The marker of a decoded control batch (exactly one record, as Kafka writes them)."""
    if not batch.header.is_control:
        raise CorruptRecordError(f"batch at byte {batch.header.position} is not a control batch")
    if len(batch.records) != 1:
        raise CorruptRecordError(
            f"control batch at byte {batch.header.position} holds {len(batch.records)} records, expected 1"
        )
    return parse_control_record(batch.records[0])


def read_end_transaction_marker(buf, position: int = 0, *, verify_crc: bool = True) -> EndTransactionMarker:
    """Decodes the control batch at ``position`` and returns its marker (for the log's transaction index)."""
    return parse_control_batch(decode_batch(buf, position, verify_crc=verify_crc))


def _len(data: bytes | None) -> str:
    return "null" if data is None else str(len(data))
