"""Transaction groups, the I/O side: eoslog's CommitTransactionGroup / DescribeTransactionGroups /
AbortTransactionsByPrefix on this broker (docs/spark.md, "Broker extension: transaction groups";
docs/transactions.md, "Transaction groups"). An extension of the transaction coordinator: it uses only
the coordinator's :class:`TransactionEngine` (coordinator/transaction/engine.py).

Contract
- Owns the group records of ``__transaction_state`` (key version 0x7E00), the set of *pinned*
  transactional ids and the set of groups with a decision in flight, and it moves members only through
  the coordinator (``carry_out`` for a Prepare record, ``complete`` for markers and the Complete record).
  Only the broker's event loop calls it.
- prepare -> log -> apply: a group record changes memory only once its append is durable.
- The group's PrepareCommit record is the commit point. From the moment a commit is decided (before
  that record is even appended) until every member reaches CompleteCommit, the members are pinned:
  this extension's admission guard (:meth:`admit`) makes the coordinator answer CONCURRENT_TRANSACTIONS
  to their InitProducerId / AddPartitionsToTxn / AddOffsetsToTxn / EndTxn and to their produce-path
  verification, and the transaction timeout and aborts by prefix pass them by. So nothing can move a
  member between the decision and its commit.
- One decision per group at a time: a second request for a group with a decision in flight is answered
  CONCURRENT_TRANSACTIONS (the client retries).
- On load (:meth:`load` for every partition, then :meth:`recover` for each), a group whose newest record
  is PrepareCommit is rolled forward in the background, after ``recovery_actions`` has restarted the
  markers of members found in PrepareCommit.
- On a cluster a group is committed by the coordinator of its own ``__transaction_state`` partition,
  and every member must be coordinated there too (the Spark sink names its members so:
  spark/task_writer.py, ``colocated_transactional_id``); a commit naming a member of another
  partition is refused with INVALID_REQUEST before anything is decided. So a partition's group records
  and its members move together: the new leader loads both and rolls forward what the old one decided
  (:meth:`recover` for that partition), the old one forgets them (:meth:`unload`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eoslog.coordinator.transaction.decisions import TxnError
from eoslog.coordinator.transaction.metadata import WriteTxnMarkers, result_of
from eoslog.coordinator.transaction_groups import decisions as gd
from eoslog.coordinator.transaction_groups.decisions import MemberStep
from eoslog.coordinator.transaction_groups.log_format import (
    NO_SEQUENCE,
    NO_TIMESTAMP,
    GroupMember,
    GroupRecord,
    GroupState,
    encode_group_key,
    encode_group_value,
    load_groups,
)
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import SimpleRecord, build_batch

if TYPE_CHECKING:
    from eoslog.coordinator.transaction.engine import TransactionEngine

log = logging.getLogger(__name__)

# Test-only fault (server/config.py): SIGKILL this broker right after a group's commit point is durable,
# before any member is touched, so a test can watch the roll-forward at the next start.
CRASH_AFTER_GROUP_COMMIT_RECORD = "eoslog.test.crash.after.group.commit.record"
# Aborts answer once their markers are written, like EndTxn, but never wait longer than this.
ABORT_COMPLETION_WAIT_S = 5.0
RETRY_BACKOFF_S = (0.05, 1.0)


class GroupMoved(Exception):
    """The group's ``__transaction_state`` partition is coordinated by another broker now: its new
    coordinator rolls the group forward from the log; this one stops."""


@dataclass(frozen=True)
class CommitResult:
    error: ErrorCode
    already_committed: bool
    last_committed_sequence: int
    member_errors: tuple[ErrorCode, ...]
    aborted_by_prefix: int


@dataclass(frozen=True)
class GroupDescription:
    group_name: str
    last_committed_sequence: int
    last_commit_timestamp_ms: int
    error: ErrorCode = ErrorCode.NONE  # NOT_COORDINATOR on a cluster broker that does not coordinate it


class TransactionGroups:
    def __init__(self, coordinator: TransactionEngine) -> None:
        self.coordinator = coordinator
        self._groups: dict[str, GroupRecord] = {}
        self.pinned: dict[str, str] = {}  # transactional id -> the group committing it
        self._busy: set[str] = set()

    # ---- loading ----------------------------------------------------------------------------------

    def load(self, index: int, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Takes the group records of one ``__transaction_state`` partition (others are skipped)."""
        self._groups.update(load_groups(records))

    def unload(self, index: int) -> None:
        """``__transaction_state``-``index`` is coordinated elsewhere now: forget its groups and their pins
        (the roll-forward tasks were cancelled with the coordinator's completions)."""
        for name in [n for n in self._groups if self.coordinator.partition_for(n) == index]:
            self._unpin(self._groups.pop(name))
            self._busy.discard(name)

    def recover(self, index: int) -> int:
        """Rolls forward every group of partition ``index`` whose commit point is logged but not its
        completion. Call after the partitions holding its members are loaded and after the coordinator's
        own recovery actions were spawned. Returns how many groups it resumed."""
        resumed = 0
        for record in sorted(self._groups.values(), key=lambda r: r.group_name):
            if record.state is not GroupState.PREPARE_COMMIT:
                continue
            if self.coordinator.partition_for(record.group_name) != index:
                continue
            if record.group_name in self._busy:
                continue
            log.info("rolling transaction group %r forward: sequence %d, %d members", record.group_name,
                     record.sequence, len(record.members))
            self._pin(record)
            self._busy.add(record.group_name)
            self._spawn(self._finish_recovered(record))
            resumed += 1
        return resumed

    async def _finish_recovered(self, record: GroupRecord) -> None:
        try:
            await self._roll_forward(record)
        except GroupMoved:
            log.info("transaction group %r moved to another coordinator mid roll-forward", record.group_name)
        finally:
            self._busy.discard(record.group_name)

    def _spawn(self, coroutine) -> asyncio.Task:
        return self.coordinator.spawn(coroutine)  # stop() cancels it with the coordinator's own tasks

    # ---- the coordinator's calls --------------------------------------------------------------------

    def admit(self, transactional_id: str) -> TxnError | None:
        """The guard: a member of a group commit in flight may not move until the commit completes."""
        return TxnError.CONCURRENT_TRANSACTIONS if transactional_id in self.pinned else None

    async def on_timer(self, now_ms: int, expiration_due: bool) -> None:
        if expiration_due:
            expired = await self.expire(now_ms, self.coordinator.config.transactional_id_expiration_ms)
            if expired:
                log.info("expired %d idle transaction groups", len(expired))

    # ---- queries ----------------------------------------------------------------------------------

    def is_pinned(self, transactional_id: str | None) -> bool:
        return bool(transactional_id) and transactional_id in self.pinned

    def get(self, group_name: str) -> GroupRecord | None:
        return self._groups.get(group_name)

    def describe(self, group_names: Sequence[str]) -> list[GroupDescription]:
        out = []
        for name in group_names:
            record = self._groups.get(name)
            out.append(GroupDescription(name, record.sequence if record else NO_SEQUENCE,
                                        record.timestamp_ms if record else NO_TIMESTAMP,
                                        self.coordinator.ownership_error(name) or ErrorCode.NONE))
        return out

    def listing(self) -> list[tuple[GroupRecord, bool]]:
        """(newest record, decision in flight) of every group this broker coordinates, by name: what
        ListTransactionGroups shows (a group forgotten by expiration is absent)."""
        return [(record, name in self._busy) for name, record in sorted(self._groups.items())
                if self.coordinator.owns(name)]

    # ---- CommitTransactionGroup -------------------------------------------------------------------

    async def commit(self, group_name: str, sequence: int, abort_prefix: str | None,
                     members: Sequence[tuple[str, int, int]]) -> CommitResult:
        coordinator = self.coordinator
        requested = [GroupMember(t, p, e) for t, p, e in members]
        not_here = coordinator.ownership_error(group_name)
        if not_here is not None:
            return CommitResult(not_here, False, NO_SEQUENCE, tuple(not_here for _ in requested), 0)
        if requested:
            coordinator.ensure_state_topic()
        elsewhere = [m.transactional_id for m in requested
                     if not coordinator.coordinated_together(m.transactional_id, group_name)]
        if elsewhere:
            log.warning("transaction group %r: members %s may be coordinated by other brokers than the group; "
                        "refused (they must share its __transaction_state partition)", group_name, elsewhere[:3])
            return CommitResult(ErrorCode.INVALID_REQUEST, False, self._last_sequence(group_name),
                                tuple(ErrorCode.INVALID_REQUEST if m.transactional_id in elsewhere
                                      else ErrorCode.NONE for m in requested), 0)
        decision = gd.decide_commit(self._groups.get(group_name), group_name in self._busy, group_name, sequence,
                                    abort_prefix, requested, coordinator.get, self.pinned, _now_ms())
        if decision.error in (TxnError.INVALID_REQUEST, TxnError.CONCURRENT_TRANSACTIONS):
            return self._result(decision.error, decision)
        self._busy.add(group_name)
        try:
            if decision.record is not None:
                self._pin(decision.record)
                try:
                    await self._log_group(decision.record)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - the client retries on a retriable error
                    self._unpin(decision.record)
                    log.warning("could not log the commit of transaction group %r: %s", group_name, exc)
                    return self._result(TxnError.COORDINATOR_NOT_AVAILABLE, decision,
                                        last=self._last_sequence(group_name))
                if coordinator.test_faults.get(CRASH_AFTER_GROUP_COMMIT_RECORD):
                    log.error("test fault %s: killing the broker after the commit point of %r",
                              CRASH_AFTER_GROUP_COMMIT_RECORD, group_name)
                    os.kill(os.getpid(), signal.SIGKILL)
                try:
                    await self._roll_forward(decision.record)
                except GroupMoved:
                    return self._result(TxnError.NOT_COORDINATOR, decision)
            if decision.abort:
                await self._abort_members(decision.abort)
            aborted: list[str] = []
            if decision.abort_prefix is not None:
                aborted = await self.abort_by_prefix(decision.abort_prefix, spared=decision.requested)
        finally:
            self._busy.discard(group_name)
        return self._result(decision.error, decision, aborted=len(aborted))

    def _result(self, error: TxnError, decision: gd.CommitDecision, *, last: int | None = None,
                aborted: int = 0) -> CommitResult:
        return CommitResult(ErrorCode[error.value], decision.already_committed,
                            decision.last_committed_sequence if last is None else last,
                            tuple(ErrorCode[e.value] for e in decision.member_errors), aborted)

    def _last_sequence(self, group_name: str) -> int:
        record = self._groups.get(group_name)
        return record.sequence if record is not None else NO_SEQUENCE

    def _pin(self, record: GroupRecord) -> None:
        for member in record.members:
            self.pinned[member.transactional_id] = record.group_name

    def _unpin(self, record: GroupRecord) -> None:
        for member in record.members:
            if self.pinned.get(member.transactional_id) == record.group_name:
                del self.pinned[member.transactional_id]

    async def _log_group(self, record: GroupRecord) -> None:
        """Appends the group record to the group's partition and applies it once durable."""
        batch = build_batch([SimpleRecord(encode_group_key(record.group_name), encode_group_value(record))])
        await self.coordinator.write_durably(record.group_name, batch)
        self._groups[record.group_name] = record

    async def _roll_forward(self, record: GroupRecord) -> None:
        """Every member to CompleteCommit, then the group's CompleteCommit record, then unpin. The commit
        point is durable, so nothing here gives up: storage errors are retried."""
        await asyncio.gather(*(self._commit_member(member) for member in record.members))
        delay = RETRY_BACKOFF_S[0]
        while True:
            self._check_owned(record.group_name)
            try:
                await self._log_group(record.completed(_now_ms()))
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried: the decision is durable
                log.warning("could not log the completion of transaction group %r, retrying: %s",
                            record.group_name, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_BACKOFF_S[1])
        self._unpin(record)

    def _check_owned(self, group_name: str) -> None:
        if not self.coordinator.owns(group_name):
            raise GroupMoved(group_name)

    async def _commit_member(self, member: GroupMember) -> None:
        coordinator = self.coordinator
        delay = RETRY_BACKOFF_S[0]
        while True:
            self._check_owned(member.transactional_id)  # coordinated with its group: the same partition
            metadata = coordinator.get(member.transactional_id)
            step = gd.member_step(metadata, member)
            if step is MemberStep.DONE:
                return
            if step is MemberStep.COMMIT:
                decision = gd.commit_member(metadata, member, _now_ms())
                error = await coordinator.carry_out(member.transactional_id, metadata, decision)
                if error is not TxnError.NONE:
                    log.warning("could not commit %r for its group, retrying: %s", member.transactional_id,
                                error.value)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_BACKOFF_S[1])
                continue
            # WAIT: its markers and Complete record are on their way (a completion task of the
            # coordinator's); restart one if none is running, e.g. after it found the id busy.
            completion = coordinator.completion(member.transactional_id)
            if completion is None and metadata is not None and not metadata.pending_transition_in_progress:
                completion = coordinator.complete(WriteTxnMarkers(
                    member.transactional_id, metadata.producer_id, metadata.producer_epoch,
                    result_of(metadata.state), frozenset(metadata.topic_partitions)))
            if completion is not None:
                try:
                    await asyncio.shield(completion)
                    if gd.member_step(coordinator.get(member.transactional_id), member) is MemberStep.DONE:
                        return
                except asyncio.CancelledError:
                    if not completion.cancelled():
                        raise  # we are being cancelled, not the completion
                except Exception:
                    log.exception("completion of %r failed", member.transactional_id)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_BACKOFF_S[1])

    # ---- aborts -----------------------------------------------------------------------------------

    async def _abort_members(self, members: Iterable[GroupMember]) -> None:
        coordinator = self.coordinator
        started = []
        for member in members:
            metadata = coordinator.get(member.transactional_id)
            decision = gd.abort_member(metadata, member, _now_ms())
            if decision.transit is None:
                continue
            if await coordinator.carry_out(member.transactional_id, metadata, decision) is TxnError.NONE:
                started.append(member.transactional_id)
        await self._wait_for_completions(started)

    async def abort_by_prefix(self, prefix: str, spared: Iterable[str] = ()) -> list[str]:
        """Aborts (epoch + 1, as the transaction timeout) every Ongoing transaction under ``prefix`` that
        is neither spared nor pinned; returns the ids aborted, once their markers are written (at most
        ABORT_COMPLETION_WAIT_S)."""
        coordinator = self.coordinator
        spared = frozenset(spared)
        aborted = []
        for transactional_id in gd.prefix_abort_candidates(coordinator.all_metadata(), prefix, spared, self.pinned):
            metadata = coordinator.get(transactional_id)
            if metadata is None or self.is_pinned(transactional_id):
                continue
            decision = gd.abort_by_prefix(metadata, _now_ms())
            if decision.transit is None:
                continue
            log.info("aborting transaction of %r (producer %d) by prefix %r", transactional_id,
                     metadata.producer_id, prefix)
            if await coordinator.carry_out(transactional_id, metadata, decision) is TxnError.NONE:
                aborted.append(transactional_id)
        await self._wait_for_completions(aborted)
        return aborted

    async def _wait_for_completions(self, transactional_ids: Iterable[str]) -> None:
        tasks = [t for t in (self.coordinator.completion(i) for i in transactional_ids) if t is not None]
        if not tasks:
            return
        _, pending = await asyncio.wait([asyncio.shield(t) for t in tasks], timeout=ABORT_COMPLETION_WAIT_S)
        if pending:
            log.warning("%d aborts answered before their markers were all written", len(pending))

    # ---- expiration -------------------------------------------------------------------------------

    async def expire(self, now_ms: int, expiration_ms: int) -> list[str]:
        """Forgets (with a tombstone) every completed group not committed to for ``expiration_ms``
        (transactional.id.expiration.ms): a replay that old is not expected."""
        coordinator = self.coordinator
        expired = []
        for name, record in sorted(self._groups.items()):
            if (record.state is not GroupState.COMPLETE_COMMIT or name in self._busy
                    or record.timestamp_ms > now_ms - expiration_ms):
                continue
            self._busy.add(name)  # no commit of this group while its tombstone is being written
            try:
                await coordinator.write_durably(name, build_batch([SimpleRecord(encode_group_key(name), None)]))
            finally:
                self._busy.discard(name)
            if self._groups.get(name) is record:
                del self._groups[name]
                expired.append(name)
        return expired


def _now_ms() -> int:
    return int(time.time() * 1000)
