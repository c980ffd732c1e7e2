"""The check-back counters (telemetry.Family values), read at scrape time: checks asked, answers by kind,
transactions the broker decided for their group by outcome (extension.py counts them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.log.telemetry import COUNTER, Family

if TYPE_CHECKING:
    from eoslog.coordinator.check_back.extension import CheckBacks


def check_back_families(check_backs: CheckBacks) -> list[Family]:
    counts = check_backs.counts
    checks = Family("eoslog_transaction_coordinator_check_back_checks", COUNTER,
                    "Checks of check-back transactions logged (the timeout's first one and every one after)")
    checks.add(counts["checking"])
    answers = Family("eoslog_transaction_coordinator_check_back_answers", COUNTER,
                     "Check-back answers that decided something, by answer (unanswered: a lease ran out)",
                     ("answer",))
    for answer in ("commit", "rollback", "unknown", "unanswered"):
        answers.add(counts[f"answer:{answer}"], answer)
    resolved = Family("eoslog_transaction_coordinator_check_back_resolved", COUNTER,
                      "Check-back transactions the broker decided for their group, by outcome", ("outcome",))
    for outcome in ("commit", "abort"):
        resolved.add(counts[f"resolved:{outcome}"], outcome)
    return [checks, answers, resolved]
