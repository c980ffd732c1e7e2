"""Check-back transactions on the broker (eoslog's extension; docs/transactions.md, "Check-back
transactions"): the I/O side of BeginCheckBack, PollCheckBack and AnswerCheckBack, and the check-back
part of the coordinator's timer. An extension of the transaction coordinator: it uses only the
coordinator's :class:`TransactionEngine` (coordinator/transaction/engine.py).

Contract
- Owns nothing persistent of its own: a check-back transaction is a transactional id's
  :class:`TransactionMetadata` in the coordinator's cache, changed only through decisions.py's
  check-back decisions and the coordinator's ``carry_out`` (prepare -> log -> apply). The check counter
  therefore only advances once the Checking record with the new count is durable. The coordinator's
  own timer moves a check-back transaction past its timeout to Checking and tells this extension
  (``add_checking_listener``).
- Leases are memory only (``TransactionMetadata.check_lease_until_ms``): a restart or a coordinator move
  forgets them and the next poll hands the due check out again; answers are idempotent.
- Long polls wait on one event, replaced at every wake-up, set whenever a check may have fallen due
  (a transaction entered Checking, a check was asked again); besides that a poll wakes at the earliest
  due time or lease end of its group, so it needs no timer of its own. Only the broker's event loop calls it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.checkback import Answer
from eoslog.coordinator.transaction.decisions import Decision, TxnError
from eoslog.coordinator.transaction.state import TransactionState
from eoslog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from eoslog.coordinator.transaction.engine import TransactionEngine
    from eoslog.coordinator.transaction.metadata import TxnTransitMetadata

log = logging.getLogger(__name__)

MAX_POLL_WAIT_MS = 30_000  # a long poll never outlives a client's usual request timeout
ANSWER_COMPLETION_WAIT_S = 5.0  # as EndTxn: answer once the markers are written, never later than this


@dataclass(frozen=True)
class DueCheck:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    check_number: int


class CheckBacks:
    def __init__(self, coordinator: TransactionEngine) -> None:
        self.coordinator = coordinator
        self._changed = asyncio.Event()
        # for metrics.py: "checking" (a Checking record logged), "answer:<kind>" (an answer or an expired
        # lease that decided something), "resolved:<commit|abort>" (the broker decided for the group)
        self.counts: Counter[str] = Counter()
        coordinator.add_checking_listener(self._checking)

    @property
    def _config(self) -> d.TransactionConfig:
        return self.coordinator.config

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _refusal(self, transactional_id: str) -> TxnError | None:
        return self.coordinator.admit(transactional_id)

    # ---- the coordinator's calls --------------------------------------------------------------------

    def load(self, index: int, records) -> None:
        pass  # nothing of its own in the log: check-back transactions are the coordinator's metadata

    def unload(self, index: int) -> None:
        pass

    def recover(self, index: int) -> int:
        return 0  # a check due is found by the next poll; leases are memory only

    def admit(self, transactional_id: str) -> TxnError | None:
        return None

    async def on_timer(self, now_ms: int, expiration_due: bool) -> None:
        await self._expire_leases()

    def _checking(self, transactional_id: str, transit: TxnTransitMetadata, why: str) -> None:
        self.counts["checking"] += 1
        log.info("check-back: %r (producer %d) checking, check %d due at %d (%s)", transactional_id,
                 transit.producer_id, transit.check_count, transit.next_check_ms, why)
        self._wake()

    async def _carry_out(self, transactional_id: str, decision: Decision, why: str, answer: str) -> TxnError:
        metadata = self.coordinator.get(transactional_id)
        transit = decision.transit
        error = await self.coordinator.carry_out(transactional_id, metadata, decision)
        if transit is None or error is not decision.error:  # nothing logged, or the append failed
            return error
        if answer:
            self.counts[f"answer:{answer}"] += 1
        if transit.state is TransactionState.CHECKING:
            self._checking(transactional_id, transit, why)
        elif transit.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            outcome = "commit" if transit.state is TransactionState.PREPARE_COMMIT else "abort"
            self.counts[f"resolved:{outcome}"] += 1
            log.info("check-back: %r (producer %d) %s (%s)%s", transactional_id, transit.producer_id, outcome, why,
                     f": {transit.abort_reason}" if transit.abort_reason else "")
        return error

    # ---- the APIs -----------------------------------------------------------------------------------

    async def begin(self, transactional_id: str, producer_id: int, producer_epoch: int, group: str) -> ErrorCode:
        error = self._refusal(transactional_id)
        if error is None:
            metadata = self.coordinator.get(transactional_id) if transactional_id else None
            decision = d.begin_check_back(metadata, transactional_id, producer_id, producer_epoch, group,
                                          self.coordinator.now_ms())
            error = await self.coordinator.carry_out(transactional_id, metadata, decision)
        return ErrorCode[error.value]

    async def poll(self, group: str, member_id: str, max_wait_ms: int, max_checks: int) -> list[DueCheck]:
        """The due checks of ``group``, lent to ``member_id``; waits up to ``max_wait_ms`` for one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(max_wait_ms, 0), MAX_POLL_WAIT_MS) / 1000
        while True:
            await self._expire_leases(group)
            now = self.coordinator.now_ms()
            due = d.lease_due_checks(self.coordinator.all_metadata(), group, now, self._config.check_lease_ms,
                                     max_checks)
            if due:
                log.debug("check-back: %d checks of %r lent to %r", len(due), group, member_id)
                return [DueCheck(m.transactional_id, m.producer_id, m.producer_epoch, m.check_count) for m in due]
            left = deadline - loop.time()
            if left <= 0 or max_checks <= 0:
                return []
            next_due = d.next_check_due_ms(self.coordinator.all_metadata(), group)
            if next_due is not None:
                left = min(left, max((next_due - now) / 1000, 0.005))
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                pass

    async def answer(self, transactional_id: str, producer_id: int, producer_epoch: int, check_number: int,
                     answer: int) -> ErrorCode:
        try:
            answered = Answer(answer)
        except ValueError:
            return ErrorCode.INVALID_REQUEST
        error = self._refusal(transactional_id)
        if error is None:
            metadata = self.coordinator.get(transactional_id) if transactional_id else None
            decision = d.answer_check_back(metadata, transactional_id, producer_id, producer_epoch, check_number,
                                           answered, self.coordinator.now_ms(), self._config.check_policy)
            error = await self._carry_out(transactional_id, decision, f"answer {answered.name.lower()} to check "
                                                                      f"{check_number}", answered.name.lower())
            if error is TxnError.NONE and decision.write_markers is not None:
                await self.coordinator.wait_for_completion(transactional_id, ANSWER_COMPLETION_WAIT_S)
        return ErrorCode[error.value]

    # ---- timers -------------------------------------------------------------------------------------

    async def _expire_leases(self, group: str | None = None) -> None:
        """A lent-out check nobody answered in time counts as an unknown answer."""
        now = self.coordinator.now_ms()
        for states in self.coordinator.partition_states():
            for transactional_id in d.expired_check_leases(states, now):
                metadata = states.get(transactional_id)
                if metadata is None or (group is not None and metadata.check_back_group != group):
                    continue
                if self._refusal(transactional_id) is not None:
                    continue
                decision = d.check_lease_expired(metadata, now, self._config.check_policy)
                if decision.transit is not None:
                    await self._carry_out(transactional_id, decision, f"check {metadata.check_count} unanswered",
                                          "unanswered")
