"""What the coordinator decides for the transaction-group APIs: pure functions, no I/O, no clock.

The semantics are docs/spark.md's ("Broker extension: transaction groups"); docs/transactions.md
("Transaction groups") says how eoslog carries them out. The I/O shell (``groups.py``) asks here and
does what the answer says:

- :func:`decide_commit` is CommitTransactionGroup's one atomic decision: refuse (malformed, something in
  flight), answer "already committed" (and abort the members), fail validation (and abort the members),
  or commit (log ``record``, the commit point, then roll every member forward).
- :func:`member_step` is one roll-forward step for one member of a logged commit: used right after the
  commit point and again on every coordinator load.
- :func:`prefix_abort_candidates` / :func:`abort_by_prefix` are the abort by prefix (as the transaction
  timeout aborts: epoch + 1, PrepareAbort, markers, CompleteAbort).

A member's transaction is only ever moved by the existing core (``TransactionMetadata.prepare_*`` and
``decisions.end_txn``), so the one transition table still governs every transactional id.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.decisions import Decision, TxnError
from eoslog.coordinator.transaction.metadata import TransactionMetadata, TransactionResult, WriteTxnMarkers
from eoslog.coordinator.transaction.state import TransactionState
from eoslog.coordinator.transaction_groups.log_format import (
    NO_SEQUENCE,
    GroupMember,
    GroupRecord,
    GroupState,
    check_group_transition,
)

S = TransactionState
# The shortest prefix AbortTransactionsByPrefix accepts, so that a typo cannot abort everything.
MIN_ABORT_PREFIX = 8

Lookup = Callable[[str], TransactionMetadata | None]


@dataclass(frozen=True)
class CommitDecision:
    """CommitTransactionGroup's answer and what the shell must do, in this order:

    1. ``record`` set: pin ``record.members``, log ``record`` (the commit point), then roll each member
       forward with :func:`member_step`, then log ``record.completed(now)``. If logging ``record`` fails,
       unpin and answer the append's error: nothing happened.
    2. ``abort`` set: abort these members as EndTxn(abort) would (``decisions.end_txn``).
    3. ``abort_prefix`` set: abort by prefix, sparing ``requested`` (the request's ids).
    Then answer ``error`` / ``already_committed`` / ``member_errors``; ``last_committed_sequence`` is
    the answer's value when the shell did not fail."""

    error: TxnError
    already_committed: bool = False
    last_committed_sequence: int = NO_SEQUENCE
    member_errors: tuple[TxnError, ...] = ()
    record: GroupRecord | None = None
    abort: tuple[GroupMember, ...] = ()
    abort_prefix: str | None = None
    requested: frozenset[str] = frozenset()


def is_busy(metadata: TransactionMetadata | None) -> bool:
    """A state change is in flight: a pending transit, or a decision whose markers are being written."""
    return metadata is not None and (metadata.pending_transition_in_progress or metadata.state.is_prepare)


def is_ongoing_under(metadata: TransactionMetadata | None, member: GroupMember) -> bool:
    return (metadata is not None and metadata.state is S.ONGOING
            and (metadata.producer_id, metadata.producer_epoch) == (member.producer_id, member.producer_epoch))


def validate_member(metadata: TransactionMetadata | None, member: GroupMember) -> TxnError:
    """NONE for an Ongoing (to commit) or Empty (nothing to commit, ignored) transaction under exactly
    the member's identity; otherwise why not."""
    if metadata is None or metadata.state is S.DEAD:
        return TxnError.TRANSACTIONAL_ID_NOT_FOUND
    if metadata.producer_id != member.producer_id:
        return TxnError.INVALID_PRODUCER_ID_MAPPING
    if metadata.producer_epoch != member.producer_epoch:
        return TxnError.PRODUCER_FENCED
    if metadata.state in (S.ONGOING, S.EMPTY):
        return TxnError.NONE
    return TxnError.INVALID_TXN_STATE


def decide_commit(group: GroupRecord | None, group_busy: bool, group_name: str, sequence: int,
                  abort_prefix: str | None, members: Sequence[GroupMember], lookup: Lookup,
                  pinned: Container[str], now_ms: int) -> CommitDecision:
    """CommitTransactionGroup for ``group`` (None: unknown). ``group_busy``: a decision of this group is
    in flight; ``pinned``: transactional ids held by any group's commit in flight."""
    last = group.sequence if group is not None else NO_SEQUENCE
    ids = [m.transactional_id for m in members]
    if (not group_name or sequence < 0 or len(set(ids)) != len(ids) or any(not i for i in ids)
            or (abort_prefix is not None and len(abort_prefix) < MIN_ABORT_PREFIX)):
        return _refuse(TxnError.INVALID_REQUEST, last, members)
    metadata = [lookup(i) for i in ids]
    if (group_busy or (group is not None and group.state is GroupState.PREPARE_COMMIT)
            or any(i in pinned for i in ids) or any(is_busy(m) for m in metadata)):
        return _refuse(TxnError.CONCURRENT_TRANSACTIONS, last, members)
    requested = frozenset(ids)
    open_members = tuple(m for m, md in zip(members, metadata) if is_ongoing_under(md, m))
    if sequence <= last:
        # Already committed: this is a replay (or a retry whose answer was lost, whose members are now
        # CompleteCommit and so not in open_members). Whatever the replay wrote must not count twice.
        return CommitDecision(TxnError.NONE, already_committed=True, last_committed_sequence=last,
                              member_errors=tuple(TxnError.NONE for _ in members), abort=open_members,
                              abort_prefix=abort_prefix, requested=requested)
    errors = tuple(validate_member(md, m) for m, md in zip(members, metadata))
    first = next((e for e in errors if e is not TxnError.NONE), None)
    if first is not None:
        return CommitDecision(first, last_committed_sequence=last, member_errors=errors, abort=open_members,
                              abort_prefix=abort_prefix, requested=requested)
    check_group_transition(group_name, group.state if group is not None else None, GroupState.PREPARE_COMMIT)
    record = GroupRecord(group_name, sequence, GroupState.PREPARE_COMMIT,
                         max(now_ms, group.timestamp_ms if group is not None else now_ms), open_members)
    return CommitDecision(TxnError.NONE, last_committed_sequence=sequence, member_errors=errors, record=record,
                          abort_prefix=abort_prefix, requested=requested)


def _refuse(error: TxnError, last: int, members: Sequence[GroupMember]) -> CommitDecision:
    return CommitDecision(error, last_committed_sequence=last, member_errors=tuple(error for _ in members))


# ---- rolling a committed group forward ------------------------------------------------------------------

class MemberStep(Enum):
    COMMIT = "commit"  # Ongoing under the logged identity: log PrepareCommit now, markers follow
    WAIT = "wait"  # PrepareCommit under it (or a transit pending): wait for its markers and Complete record
    DONE = "done"  # CompleteCommit, or the id moved on afterwards: nothing left for this group to do


def member_step(metadata: TransactionMetadata | None, member: GroupMember) -> MemberStep:
    if metadata is None or (metadata.producer_id, metadata.producer_epoch) != (member.producer_id,
                                                                               member.producer_epoch):
        # Pinning keeps every other identity out until the group completes, so the member already
        # reached CompleteCommit and a later producer took the id over (or it expired): done.
        return MemberStep.DONE
    if metadata.pending_transition_in_progress:
        return MemberStep.WAIT
    if metadata.state is S.ONGOING:
        return MemberStep.COMMIT
    if metadata.state is S.PREPARE_COMMIT:
        return MemberStep.WAIT
    return MemberStep.DONE


def commit_member(metadata: TransactionMetadata, member: GroupMember, now_ms: int) -> Decision:
    """The EndTxn(commit) of a member whose step is COMMIT: the same decision, taken for its producer."""
    return d.end_txn(metadata, member.transactional_id, member.producer_id, member.producer_epoch,
                     TransactionResult.COMMIT, now_ms)


def abort_member(metadata: TransactionMetadata | None, member: GroupMember, now_ms: int) -> Decision:
    """EndTxn(abort) on the member's behalf; nothing to do (no transit) unless it is Ongoing under the
    member's identity."""
    if not is_ongoing_under(metadata, member):
        return Decision()
    return d.end_txn(metadata, member.transactional_id, member.producer_id, member.producer_epoch,
                     TransactionResult.ABORT, now_ms)


# ---- abort by prefix ------------------------------------------------------------------------------------

def prefix_abort_candidates(all_metadata: Iterable[TransactionMetadata], prefix: str, spared: Container[str],
                            pinned: Container[str]) -> list[str]:
    """Ongoing (or Checking: a check-back transaction is open too) transactions under ``prefix``, except
    ``spared`` ids, pinned ones and busy ones."""
    return sorted(m.transactional_id for m in all_metadata
                  if m.transactional_id.startswith(prefix) and m.state in (S.ONGOING, S.CHECKING)
                  and not m.pending_transition_in_progress and m.transactional_id not in spared
                  and m.transactional_id not in pinned)


def abort_by_prefix(metadata: TransactionMetadata, now_ms: int) -> Decision:
    """Abort an Ongoing transaction as the transaction timeout does: epoch + 1 (the old producer is
    fenced, recoverably as after a timeout), PrepareAbort, markers, CompleteAbort. A Checking one (eoslog's
    check-back) likewise, its reason recorded: the prefix abort is an explicit decision, as a fence is."""
    if metadata.state not in (S.ONGOING, S.CHECKING) or metadata.pending_transition_in_progress:
        return Decision()
    reason = ABORTED_BY_PREFIX if metadata.state is S.CHECKING else None
    transit = metadata.prepare_fence_and_abort(now_ms, recoverable=True, abort_reason=reason)
    return Decision(transit=transit, write_markers=WriteTxnMarkers(
        transit.transactional_id, transit.producer_id, transit.producer_epoch, TransactionResult.ABORT,
        transit.topic_partitions))


ABORTED_BY_PREFIX = "check-back: aborted by AbortTransactionsByPrefix while checking"


def validate_abort_prefix(prefix: str | None) -> TxnError:
    return TxnError.NONE if prefix is not None and len(prefix) >= MIN_ABORT_PREFIX else TxnError.INVALID_REQUEST
