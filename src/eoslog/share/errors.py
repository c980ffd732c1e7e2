"""The Kafka error names the share cores answer with.

Each value is the name of the ``eoslog.protocol.errors.ErrorCode`` member the handler puts on the wire
(``ErrorCode[error.value]``), as the transaction coordinator's TxnError does.
"""

from __future__ import annotations

from enum import Enum


class ShareError(Enum):
    NONE = "NONE"
    INVALID_REQUEST = "INVALID_REQUEST"  # a malformed acknowledgement; an initial ShareFetch that acknowledges
    INVALID_RECORD_STATE = "INVALID_RECORD_STATE"  # the record is not acquired by this member (any more)
    SHARE_SESSION_NOT_FOUND = "SHARE_SESSION_NOT_FOUND"
    INVALID_SHARE_SESSION_EPOCH = "INVALID_SHARE_SESSION_EPOCH"
    SHARE_SESSION_LIMIT_REACHED = "SHARE_SESSION_LIMIT_REACHED"
