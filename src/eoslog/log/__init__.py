"""The partition log: segments, offset/time indexes, checkpoints, recovery, retention, group commit.

Formats: docs/storage-format.md. Contracts: docs/architecture.md ("log") and each class's docstring.
"""

from eoslog.log.config import LogConfig, TimestampType
from eoslog.log.errors import (
    InvalidConfigError,
    InvalidRecordError,
    LogDirectoryLockedError,
    LogError,
    LogStorageError,
    OffsetOutOfRange,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from eoslog.log.flush_task import FlushTask
from eoslog.log.flusher import GroupCommit
from eoslog.log.log import AppendInfo, Log, OffsetAndTimestamp, ReadResult
from eoslog.log.manager import LogDirectory
from eoslog.log.region import FileRegion

__all__ = [
    "AppendInfo",
    "FileRegion",
    "FlushTask",
    "GroupCommit",
    "InvalidConfigError",
    "InvalidRecordError",
    "Log",
    "LogConfig",
    "LogDirectory",
    "LogDirectoryLockedError",
    "LogError",
    "LogStorageError",
    "OffsetAndTimestamp",
    "OffsetOutOfRange",
    "ReadResult",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "TimestampType",
]
