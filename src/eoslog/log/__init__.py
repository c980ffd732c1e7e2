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


def __getattr__(name: str):
    # The Log and its results load on first use (PEP 562), not with the package: a broker with a new data
    # directory opens its port without the record and segment code (its first partition loads it).
    if name in ("AppendInfo", "Log", "OffsetAndTimestamp", "ReadResult"):
        from eoslog.log import log as module

        globals()[name] = value = getattr(module, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
