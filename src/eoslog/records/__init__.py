"""RecordBatch v2: the record format exactly as Kafka defines it (docs/record-format.md). No I/O here."""

from __future__ import annotations

import importlib

# Where each name lives. They load on first use (PEP 562), not with the package: importing
# ``eoslog.records.errors`` (the protocol's error table does) must not build the batch classes, so that a
# broker with a new data directory opens its port first (its first partition, or the warm-up, loads them).
_WHERE = {
    "AbsoluteRecord": "batch", "DecodedBatch": "batch", "Record": "batch", "decode_batch": "batch",
    "decode_batches": "batch", "iter_batches": "batch",
    "SimpleRecord": "builder", "build_batch": "builder", "build_simple": "builder",
    "CompressionType": "compression", "compress": "compression", "decompress": "compression",
    "ControlType": "control", "EndTransactionMarker": "control", "build_control_batch": "control",
    "parse_control_batch": "control", "parse_control_record": "control", "read_end_transaction_marker": "control",
    "CorruptRecordError": "errors",
    "BatchHeader": "header", "iter_headers": "header", "read_header": "header", "set_base_offset": "header",
    "set_log_append_time": "header", "set_partition_leader_epoch": "header",
}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


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
