"""The one table of which wire error code each exception becomes.

Handlers and coordinators raise :class:`eoslog.protocol.errors.KafkaError` subclasses, or their own
subsystem errors (the log's, the record codec's, producer state's); this table says what Kafka would send
for each. Anything unexpected is logged and becomes UNKNOWN_SERVER_ERROR. The request dispatcher answers
with it (server/dispatcher.py), handlers use it for per-partition outcomes, and the coordinators for a
failed write to their internal topic.
"""

from __future__ import annotations

import logging

from eoslog.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("eoslog.api.errors")  # the logger the refusals were always logged under


def error_code_for(exc: BaseException) -> ErrorCode:
    """Maps any exception raised while serving a request to the wire error code Kafka would send.

    Every refusal passes here, so here it is logged at debug level with its reason (the dispatcher adds
    the API and the client for a whole-request refusal)."""
    code = _code_for(exc)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("refused with %s: %s: %s", code.name, type(exc).__name__, exc)
    return code


def _code_for(exc: BaseException) -> ErrorCode:
    if isinstance(exc, KafkaError):
        return exc.code
    error_name = getattr(exc, "error_name", None)  # producer-state and coordinator errors carry Kafka's name
    if error_name is not None and error_name in ErrorCode.__members__:
        return ErrorCode[error_name]
    for exception_type, code in _SUBSYSTEM_ERRORS:
        if isinstance(exc, exception_type):
            return code
    log.error("unexpected error while serving a request", exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _subsystem_errors() -> list[tuple[type[BaseException], ErrorCode]]:
    from eoslog.log import errors as log_errors
    from eoslog.records.errors import CorruptRecordError

    return [
        (CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
        (log_errors.OffsetOutOfRange, ErrorCode.OFFSET_OUT_OF_RANGE),
        (log_errors.InvalidRecordError, ErrorCode.INVALID_RECORD),
        (log_errors.RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
        (log_errors.RecordBatchTooLargeError, ErrorCode.RECORD_LIST_TOO_LARGE),
        (log_errors.InvalidConfigError, ErrorCode.INVALID_CONFIG),
        (log_errors.LogStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
        (OSError, ErrorCode.KAFKA_STORAGE_ERROR),
    ]


_SUBSYSTEM_ERRORS = _subsystem_errors()
