"""Error names the group coordinator answers with, and its own exception types.

The wire numbers live only in ``protocol/errors.py``. Responses built here carry an :class:`Errors`
member whose *value is Kafka's error name*, so the API layer turns it into a code with
``ErrorCode[response.error.value]`` and no number is written twice. A member here that is missing
from ``ErrorCode`` is a bug the test suite checks for once ``protocol/errors.py`` exists.
"""

from __future__ import annotations

from enum import Enum


class Errors(str, Enum):
    """The subset of Kafka's error names a classic group coordinator returns."""

    NONE = "NONE"
    UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"
    COORDINATOR_LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"
    COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
    NOT_COORDINATOR = "NOT_COORDINATOR"
    ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
    INCONSISTENT_GROUP_PROTOCOL = "INCONSISTENT_GROUP_PROTOCOL"
    INVALID_GROUP_ID = "INVALID_GROUP_ID"
    UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
    INVALID_SESSION_TIMEOUT = "INVALID_SESSION_TIMEOUT"
    REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
    OFFSET_METADATA_TOO_LARGE = "OFFSET_METADATA_TOO_LARGE"
    INVALID_COMMIT_OFFSET_SIZE = "INVALID_COMMIT_OFFSET_SIZE"
    GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"
    NON_EMPTY_GROUP = "NON_EMPTY_GROUP"
    MEMBER_ID_REQUIRED = "MEMBER_ID_REQUIRED"
    FENCED_INSTANCE_ID = "FENCED_INSTANCE_ID"
    GROUP_MAX_SIZE_REACHED = "GROUP_MAX_SIZE_REACHED"
    GROUP_SUBSCRIBED_TO_TOPIC = "GROUP_SUBSCRIBED_TO_TOPIC"
    UNSTABLE_OFFSET_COMMIT = "UNSTABLE_OFFSET_COMMIT"
    # consumer groups (KIP-848)
    FENCED_MEMBER_EPOCH = "FENCED_MEMBER_EPOCH"
    UNRELEASED_INSTANCE_ID = "UNRELEASED_INSTANCE_ID"
    UNSUPPORTED_ASSIGNOR = "UNSUPPORTED_ASSIGNOR"
    STALE_MEMBER_EPOCH = "STALE_MEMBER_EPOCH"
    INVALID_REQUEST = "INVALID_REQUEST"
    INVALID_REGULAR_EXPRESSION = "INVALID_REGULAR_EXPRESSION"


class GroupCoordinatorError(Exception):
    """Base of the group coordinator's exceptions. These are bugs or bad input from *our* side
    (the broker), never a client's mistake: client mistakes are answered with an :class:`Errors`."""


class CorruptGroupRecordError(GroupCoordinatorError, ValueError):
    """A ``__consumer_offsets`` key or value that does not decode (unknown version, short buffer)."""
