"""Check-back decisions (issue 20, eoslog's extension): pure, no I/O, no clock of its own.

A check-back transaction is not aborted by its timeout; it is *checked*: the producer group is asked
to resolve it. This module decides, from the persisted check state and an answer, what happens next.
It is the first step of the design in docs/transactions.md ("Check-back transactions"); the wiring
into decisions.py / the coordinator's timer comes next. Kept apart from TransactionMetadata so that
plain Kafka transactions cannot be touched by it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

DEFAULT_MAX_CHECKS = 15  # RocketMQ's default (transactionCheckMax)
DEFAULT_BACKOFF_MS = 1000
DEFAULT_BACKOFF_MAX_MS = 60_000


class Answer(Enum):
    COMMIT = 0
    ROLLBACK = 1
    UNKNOWN = 2


class Outcome(Enum):
    """What the coordinator does after a decision."""

    KEEP_CHECKING = "keep_checking"  # log the new CheckState, ask again at next_check_ms
    COMMIT = "commit"  # transit to PrepareCommit, markers as for EndTxn(commit)
    ABORT = "abort"  # transit to PrepareAbort with `reason`
    IGNORE = "ignore"  # a stale or repeated answer: succeed, change nothing (idempotent)
    FENCED = "fenced"  # answer names another producer id/epoch: PRODUCER_FENCED


@dataclass(frozen=True)
class CheckPolicy:
    max_checks: int = DEFAULT_MAX_CHECKS
    backoff_ms: int = DEFAULT_BACKOFF_MS
    backoff_max_ms: int = DEFAULT_BACKOFF_MAX_MS

    def backoff(self, check_count: int) -> int:
        # Doubling per unknown answer, capped: a slow database is asked less and less often.
        return min(self.backoff_max_ms, self.backoff_ms * (2 ** max(0, check_count - 1)))


@dataclass(frozen=True)
class CheckState:
    """The persisted check state of one check-back transaction (tags 32256.. of the value)."""

    group: str
    producer_id: int
    producer_epoch: int
    check_count: int = -1  # -1: still Ongoing (not yet timed out)
    next_check_ms: int = -1

    @property
    def checking(self) -> bool:
        return self.check_count >= 0


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    state: CheckState
    reason: str | None = None


def on_timeout(state: CheckState, now_ms: int) -> Decision:
    """The transaction timeout fired: start checking (due at once) instead of aborting."""
    if state.checking:
        return Decision(Outcome.IGNORE, state)
    return Decision(Outcome.KEEP_CHECKING, replace(state, check_count=0, next_check_ms=now_ms))


def is_due(state: CheckState, now_ms: int) -> bool:
    return state.checking and state.next_check_ms <= now_ms


def on_answer(
    state: CheckState,
    producer_id: int,
    producer_epoch: int,
    check_number: int,
    answer: Answer,
    now_ms: int,
    policy: CheckPolicy,
) -> Decision:
    """Decide on an answer to check `check_number` (the check_count the poll handed out)."""
    if (producer_id, producer_epoch) != (state.producer_id, state.producer_epoch):
        return Decision(Outcome.FENCED, state)
    if not state.checking or check_number != state.check_count:
        # An answer to an earlier check (or a retry of one already applied): harmless to drop.
        return Decision(Outcome.IGNORE, state)
    if answer is Answer.COMMIT:
        return Decision(Outcome.COMMIT, state)
    if answer is Answer.ROLLBACK:
        return Decision(Outcome.ABORT, state, reason="check-back: rollback")
    return _one_more_check(state, now_ms, policy)


def on_lease_expired(state: CheckState, now_ms: int, policy: CheckPolicy) -> Decision:
    """Nobody answered a handed-out check in time: it counts as an unknown answer."""
    if not state.checking:
        return Decision(Outcome.IGNORE, state)
    return _one_more_check(state, now_ms, policy)


def _one_more_check(state: CheckState, now_ms: int, policy: CheckPolicy) -> Decision:
    count = state.check_count + 1
    if count >= policy.max_checks:
        return Decision(
            Outcome.ABORT,
            replace(state, check_count=count),
            reason=f"check-back: max checks ({policy.max_checks}) reached",
        )
    return Decision(
        Outcome.KEEP_CHECKING,
        replace(state, check_count=count, next_check_ms=now_ms + policy.backoff(count)),
    )
