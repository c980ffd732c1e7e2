"""RecordBatch v2: the record format exactly as Kafka defines it (docs/record-format.md). No I/O here."""

from eoslog.records.batch import (
    AbsoluteRecord,
    DecodedBatch,
    Record,
    decode_batch,
    decode_batches,
    iter_batches,
)
from eoslog.records.builder import SimpleRecord, build_batch, build_simple
from eoslog.records.compression import CompressionType, compress, decompress
from eoslog.records.control import (
    ControlType,
    EndTransactionMarker,
    build_control_batch,
    parse_control_batch,
    parse_control_record,
    read_end_transaction_marker,
)
from eoslog.records.errors import CorruptRecordError
from eoslog.records.header import (
    BatchHeader,
    iter_headers,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

__all__ = [
    "AbsoluteRecord",
    "BatchHeader",
    "CompressionType",
    "ControlType",
    "CorruptRecordError",
    "DecodedBatch",
    "EndTransactionMarker",
    "Record",
    "SimpleRecord",
    "build_batch",
    "build_control_batch",
    "build_simple",
    "compress",
    "decode_batch",
    "decode_batches",
    "decompress",
    "iter_batches",
    "iter_headers",
    "parse_control_batch",
    "parse_control_record",
    "read_end_transaction_marker",
    "read_header",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
]
