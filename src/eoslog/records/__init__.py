"""RecordBatch v2: the record format exactly as Kafka defines it. No I/O here."""

from eoslog.records.errors import CorruptRecordError
from eoslog.records.header import BatchHeader, iter_headers, read_header, set_base_offset

__all__ = ["BatchHeader", "CorruptRecordError", "iter_headers", "read_header", "set_base_offset"]
