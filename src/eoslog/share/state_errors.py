"""How the share-partition manager (share/manager.py) turns the share coordinator's answers and the cores'
errors into exceptions and wire errors: kept apart so that the manager stays one module of operations."""

from __future__ import annotations

from eoslog.protocol.errors import ErrorCode, error_for_code
from eoslog.share.errors import ShareError
from eoslog.share.transactional_acks import TxnAckError

# A share coordinator answering this cannot be used for now: the operation is tried again later.
_RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT})
# The state moved on without this leader (a newer leader, or the group re-initialized it): read it again.
_FENCED = frozenset({ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH})


class ShareStateUnavailable(Exception):
    """The share coordinator could not be used just now (retriable): nothing changed."""


TXN_MESSAGES = {
    TxnAckError.INVALID_RECORD_STATE: "the records are not acquired by that member, or their lock ran out",
    TxnAckError.INVALID_REQUEST: "the acknowledgement batches are malformed, reach past the records handed out, "
                                 "or RENEW records a transaction cannot hold",
    TxnAckError.PRODUCER_FENCED: "a newer epoch of this producer acknowledged here: this one is a zombie",
    TxnAckError.INVALID_TXN_STATE: "the transaction is past its timeout here (its coordinator aborts it)",
    TxnAckError.CONCURRENT_TRANSACTIONS: "an older transaction of this producer still holds records here; retry",
}

ACK_MESSAGES = {
    ShareError.INVALID_RECORD_STATE: "the records are not acquired by this member, or their lock ran out",
    ShareError.INVALID_REQUEST: "the acknowledgement batches are malformed or reach past the records handed out",
}


def state_error(code: ErrorCode, message: str | None) -> Exception:
    if code in _RETRIABLE:
        return ShareStateUnavailable(f"the share coordinator answered {code.name}: {message or ''}")
    if code in _FENCED:
        return error_for_code(int(ErrorCode.NOT_LEADER_OR_FOLLOWER))(f"share state fenced ({code.name})")
    if code is ErrorCode.INVALID_REQUEST:  # never initialized: not assigned to anyone yet
        return error_for_code(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))(
            "the share partition has no state yet (the group coordinator initializes it on assignment)")
    return error_for_code(int(code))(message or "")


def error_of(exc: BaseException) -> tuple[ErrorCode, str | None]:
    from eoslog.protocol.error_mapping import error_code_for

    if isinstance(exc, ShareStateUnavailable):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
    return error_code_for(exc), str(exc) or None
