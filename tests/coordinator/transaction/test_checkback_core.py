"""Unit tests of the pure check-back core (issue 20). Wiring and crash tests with real processes follow."""

from eoslog.coordinator.transaction.checkback import (
    Answer,
    CheckPolicy,
    CheckState,
    Outcome,
    is_due,
    on_answer,
    on_lease_expired,
    on_timeout,
)

POLICY = CheckPolicy(max_checks=3, backoff_ms=100, backoff_max_ms=250)


def _checking(now=1000):
    d = on_timeout(CheckState("g", 7, 2), now)
    assert d.outcome is Outcome.KEEP_CHECKING
    return d.state


def test_timeout_starts_checking_due_at_once_and_is_idempotent():
    s = _checking(1000)
    assert s.checking and s.check_count == 0 and s.next_check_ms == 1000
    assert is_due(s, 1000) and not is_due(CheckState("g", 7, 2), 10**12)
    assert on_timeout(s, 5000).outcome is Outcome.IGNORE


def test_commit_and_rollback():
    s = _checking()
    assert on_answer(s, 7, 2, 0, Answer.COMMIT, 1000, POLICY).outcome is Outcome.COMMIT
    d = on_answer(s, 7, 2, 0, Answer.ROLLBACK, 1000, POLICY)
    assert d.outcome is Outcome.ABORT and d.reason == "check-back: rollback"


def test_unknown_backs_off_then_aborts_after_max_checks():
    s = _checking(1000)
    d1 = on_answer(s, 7, 2, 0, Answer.UNKNOWN, 1000, POLICY)
    assert d1.outcome is Outcome.KEEP_CHECKING
    assert (d1.state.check_count, d1.state.next_check_ms) == (1, 1100)
    assert not is_due(d1.state, 1099) and is_due(d1.state, 1100)
    d2 = on_answer(d1.state, 7, 2, 1, Answer.UNKNOWN, 1100, POLICY)
    assert (d2.state.check_count, d2.state.next_check_ms) == (2, 1300)
    d3 = on_lease_expired(d2.state, 1300, POLICY)
    assert d3.outcome is Outcome.ABORT and d3.reason == "check-back: max checks (3) reached"


def test_backoff_is_capped():
    assert [POLICY.backoff(n) for n in (1, 2, 3, 4)] == [100, 200, 250, 250]


def test_stale_or_repeated_answer_is_ignored():
    s = _checking()
    d1 = on_answer(s, 7, 2, 0, Answer.UNKNOWN, 1000, POLICY)
    # A retry of the answer to check 0 after check 1 was scheduled changes nothing.
    again = on_answer(d1.state, 7, 2, 0, Answer.COMMIT, 1000, POLICY)
    assert again.outcome is Outcome.IGNORE and again.state == d1.state
    # An answer before the transaction timed out (not checking) is ignored too.
    assert on_answer(CheckState("g", 7, 2), 7, 2, -1, Answer.COMMIT, 0, POLICY).outcome is Outcome.IGNORE


def test_zombie_answer_is_fenced():
    s = _checking()
    assert on_answer(s, 7, 1, 0, Answer.COMMIT, 1000, POLICY).outcome is Outcome.FENCED
    assert on_answer(s, 8, 2, 0, Answer.COMMIT, 1000, POLICY).outcome is Outcome.FENCED
