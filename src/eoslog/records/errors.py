"""The one error type for bad record data.

Everything that parses record batches raises :class:`CorruptRecordError` and nothing else when the bytes
are wrong, so callers (the Produce handler, log recovery) catch exactly one type. The message says which
rule was broken and where.
"""


class CorruptRecordError(ValueError):
    """The bytes are not a valid RecordBatch v2 (bad magic, CRC mismatch, length past the buffer, ...)."""
