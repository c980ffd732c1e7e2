"""Exceptions of the partition log.

They are Python exceptions only; the request dispatcher turns them into Kafka error codes (the mapping
noted on each class is a hint for it, not an import). Bad record bytes raise
:class:`eoslog.records.CorruptRecordError`, which the log lets through unchanged.
"""

from __future__ import annotations


class LogError(Exception):
    """Base class of everything the log raises on purpose."""


class OffsetOutOfRange(LogError):
    """A read or lookup asked for an offset outside [log_start_offset, log_end_offset]. (OFFSET_OUT_OF_RANGE)"""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, what: str = "") -> None:
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        where = f" of {what}" if what else ""
        super().__init__(
            f"offset {offset} is outside the log{where}: valid offsets are "
            f"{log_start_offset}..{log_end_offset}"
        )


class InvalidRecordError(LogError):
    """The batches parse but break a rule of the log (record count vs offset delta, ...). (INVALID_RECORD)"""


class RecordTooLargeError(LogError):
    """One batch is larger than max.message.bytes. (MESSAGE_TOO_LARGE)"""


class RecordBatchTooLargeError(LogError):
    """One append is larger than a whole segment (segment.bytes). (RECORD_LIST_TOO_LARGE)"""


class InvalidConfigError(LogError, ValueError):
    """A log configuration value is out of range; the message names the property. (INVALID_CONFIG)"""

    def __init__(self, name: str, value: object, reason: str) -> None:
        self.name = name
        self.value = value
        super().__init__(f"invalid value {value!r} for configuration {name}: {reason}")


class LogStorageError(LogError):
    """A write or fsync failed; the log is offline until the broker restarts. (KAFKA_STORAGE_ERROR)

    After a failed fsync the page cache state is unknown (the kernel may have dropped the dirty pages), so
    like Kafka we stop using the log instead of retrying.
    """


class CorruptIndexError(LogError):
    """An index file failed its sanity check; recovery rebuilds it from the segment. Internal to the log."""


class CorruptCheckpointError(LogError):
    """A checkpoint file does not follow the format in docs/storage-format.md."""


class LogDirectoryLockedError(LogError):
    """Another process (or another LogDirectory in this one) already holds the data directory's .lock."""


class DataDirectoryError(LogError):
    """The data directory cannot be used: not writable, not a directory, or written by a newer format
    version. The message names the directory and says what to do; the broker refuses to start."""
