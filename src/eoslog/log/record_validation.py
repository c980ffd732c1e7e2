"""What a client's batch must satisfy before it is appended, batch by batch and record by record (Kafka's
LogValidator), and KIP-467's per-record errors. No I/O: values in, an exception out.

Two kinds of refusal, as in Kafka:

- a rule of the *batch* (offsets, count, producer id without sequence) refuses it with INVALID_RECORD
  and a message: :func:`check_client_batch`;
- a rule of a *record* (a keyless record on a compacted topic, a timestamp out of
  ``message.timestamp.before/after.max.ms``, an extension's check) refuses the whole batch too, but
  names each bad record: :class:`RecordValidationError` carries one :class:`RecordError` (the record's
  index in its batch, and why) per bad record, and Produce v8+ answers them as ``record_errors`` with
  ``error_message`` (KIP-467). The client then knows which records to drop and which to retry.

:func:`validate_records` decodes records only when a rule needs them: a compacted topic, a timestamp
bound the batch header cannot vouch for, a producer that set LogAppendTime, or an extension's
:data:`RecordCheck`. The common batch (a delete-policy topic, CreateTime, a max timestamp within the
hour ahead that Kafka 4.x allows) is never decompressed, as before. The header's max timestamp is
trusted for the bound ahead, as the append trusts it for the time index.

An extension refuses records by giving the partition a :data:`RecordCheck` (``Partition.record_checks``):
it sees each decoded record and returns why it is refused (an INVALID_RECORD record error), or None. A
check may also have a ``whole_batch(header, records)`` method, given the batch's uncompressed records
section: True vouches that every record passes, and when every check vouches (and no rule of the log
needs the records) the batch is not decoded at all; False sends the batch record by record, so refusals
are always named per record (the schema id check does this: schema_registry/wire_scan.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from eoslog.log.config import LONG_MAX, LogConfig, TimestampType
from eoslog.log.errors import InvalidRecordError, LogError
from eoslog.records.batch import Record, parse_records
from eoslog.records.compression import CompressionType, decompress
from eoslog.records.header import HEADER_SIZE, NO_TIMESTAMP, BatchHeader

INVALID_RECORD = "INVALID_RECORD"
INVALID_TIMESTAMP = "INVALID_TIMESTAMP"
SHOWN_RECORD_ERRORS = 3  # Kafka's error message quotes at most the first three

# (header of the batch, one of its records, its index in the batch) -> why it is refused, or None.
RecordCheck = Callable[[BatchHeader, Record, int], "str | None"]


class RecordError(NamedTuple):
    """One refused record: its index in the batch and the reason (KIP-467's ``BatchIndexAndErrorMessage``)."""

    batch_index: int
    message: str

    def __str__(self) -> str:  # Kafka's ProduceResponse.RecordError.toString, which the message quotes
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class RecordValidationError(LogError):
    """Records of a batch broke a rule, so none of it is appended; ``record_errors`` names the bad ones.
    (INVALID_TIMESTAMP when a timestamp is among the reasons, else INVALID_RECORD; ``error_name`` is the
    one table's key.)"""

    def __init__(self, record_errors: Sequence[RecordError], *, timestamp: bool = False) -> None:
        self.record_errors = tuple(record_errors)
        self.error_name = INVALID_TIMESTAMP if timestamp else INVALID_RECORD
        if timestamp:
            message = "One or more records have been rejected due to invalid timestamp"
        else:
            shown = ", ".join(str(e) for e in self.record_errors[:SHOWN_RECORD_ERRORS])
            message = (f"One or more records have been rejected due to {len(self.record_errors)} record errors "
                       f"in total, and only showing the first three errors at most: [{shown}]")
        super().__init__(message)


def check_client_batch(header: BatchHeader, topic_partition: str) -> None:
    """The batch-level rules Kafka applies to a client's batch (UnifiedLog.analyzeAndValidateRecords and
    LogValidator.validateBatch), each an INVALID_RECORD with Kafka's words."""
    if header.base_offset != 0:
        raise InvalidRecordError(f"The baseOffset of the record batch in the append to {topic_partition} should "
                                 f"be 0, but it is {header.base_offset}")
    if header.last_offset_delta < 0:
        raise InvalidRecordError(f"Batch has an invalid offset range: [{header.base_offset}, {header.last_offset}] "
                                 f"in topic partition {topic_partition}")
    if header.records_count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {header.records_count} in topic "
                                 f"partition {topic_partition}")
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordError(f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                                 f"{header.producer_id} in topic partition {topic_partition}")


def validate_records(view: memoryview, header: BatchHeader, config: LogConfig, *, topic_partition: str,
                     now_ms: int, checks: Sequence[RecordCheck] = ()) -> None:
    """Raises :class:`RecordValidationError` if any record of the batch at ``header`` breaks a rule of
    ``config`` or a ``check``; decodes nothing when no rule can need it (see the module docstring)."""
    create_time = config.message_timestamp_type is TimestampType.CREATE_TIME
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    producer_log_append_time = not create_time and header.timestamp_type == 1
    timestamps_doubtful = create_time and (
        before < LONG_MAX or (header.max_timestamp != NO_TIMESTAMP and header.max_timestamp - now_ms > after))
    if not (config.compacts or timestamps_doubtful or producer_log_append_time or checks):
        return
    # Decompressed once, for the whole-batch checks and for the records if those cannot answer.
    body = view[header.position + HEADER_SIZE:header.position + header.size]
    if header.compression != CompressionType.NONE:
        body = decompress(header.compression, body)
    if (not (config.compacts or timestamps_doubtful or producer_log_append_time)
            and all(getattr(check, "whole_batch", None) is not None and check.whole_batch(header, body)
                    for check in checks)):
        return
    # The log checked the CRC already.
    records = parse_records(body, header.records_count, where=f"batch at byte {header.position}")
    errors: list[RecordError] = []
    timestamp_refused = False
    for index, record in enumerate(records):
        reason = None
        if config.compacts and record.key is None:
            reason = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
        elif producer_log_append_time:
            reason = (f"Invalid timestamp type in message {_describe(header, record)}. Producer should not set "
                      "timestamp type to LogAppendTime.")
            timestamp_refused = True
        elif timestamps_doubtful:
            timestamp = header.base_timestamp + record.timestamp_delta
            if timestamp != NO_TIMESTAMP and (now_ms - timestamp > before or timestamp - now_ms > after):
                reason = (f"Timestamp {timestamp} of message with offset {header.base_offset + record.offset_delta} "
                          f"is out of range. The timestamp should be within [{now_ms - before}, {now_ms + after}]")
                timestamp_refused = True
        if reason is None:
            for check in checks:
                reason = check(header, record, index)
                if reason is not None:
                    break
        if reason is not None:
            errors.append(RecordError(index, reason))
    if errors:
        raise RecordValidationError(errors, timestamp=timestamp_refused)


def _describe(header: BatchHeader, record: Record) -> str:
    """A record as Kafka's DefaultRecord.toString shows it."""
    key = "null" if record.key is None else f"{len(record.key)} bytes"
    value = "null" if record.value is None else f"{len(record.value)} bytes"
    return (f"DefaultRecord(offset={header.base_offset + record.offset_delta}, "
            f"timestamp={header.base_timestamp + record.timestamp_delta}, key={key}, value={value})")
