"""Acknowledgements inside a transaction (issue 37 step 6, an eoslog extension): a pure core.

A producer in a transaction acknowledges records that one of the share group's members acquired; the
acknowledgement is *pending* (Pulsar's pending ack) until the transaction's marker reaches the share
partition: COMMIT makes it final (ACCEPT acknowledges, REJECT and GAP archive, RELEASE makes Available),
ABORT gives the records back as a release (delivery count kept, archived at the delivery limit).

How it sits on :class:`~eoslog.share.partition_state.SharePartition`: a record held by a transaction stays
ACQUIRED, owned by :class:`TransactionOwner` (never equal to a member id, which is a string) with the lock
deadline :data:`HELD_BY_TRANSACTION_MS`, which no clock reaches. So the share-partition core and its one
transition table need nothing new: acquisition skips held records (they are not Available), a member's
acknowledgement of them is INVALID_RECORD_STATE (not its records), lock expiry and a member's release
never reach them (no deadline comes; the owner is no member), and the markers move them through the
table's ACQUIRED rows (ACCEPT, REJECT, GAP, RELEASE). What this module adds is the transaction's side: its
own table (:data:`TXN_TRANSITIONS`), the pending acknowledgement types per offset, the producer epochs
for fencing, and what to persist.

The transaction timeout never releases records here. A transaction past its timeout is OVERDUE: it may
add no acknowledgement, and its records stay held until its marker, because only the transaction
coordinator knows whether it was already prepared to commit (then it commits whatever the time); it
aborts an ongoing transaction past its timeout and sends the ABORT marker, as it does for offsets
(TxnOffsetCommit's pending offsets have no timeout of their own in the group coordinator either).

Style as partition_state.py: an immutable value; each operation returns a :class:`TxnChange` whose
``after`` replaces the caller's value only once its ``update`` (state batches and the whole pending set,
see docs/share-groups.md "Step 6") is durable at the share coordinator (prepare -> log -> apply).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from eoslog.share.in_flight import AcknowledgementBatch, InFlightBatch, OffsetRange, PersistedState, cut
from eoslog.share.partition_state import SharePartition, first_malformed, type_runs
from eoslog.share.record_state import AcknowledgeType, Event, RecordState, transition

S = RecordState

# The lock deadline of a record held by a transaction: no clock reaches it, so lock expiry never does.
HELD_BY_TRANSACTION_MS = 2**63 - 1

# What a transaction may acknowledge; RENEW is refused (a held record has no lock to renew).
TXN_ACKNOWLEDGE_TYPES = frozenset({AcknowledgeType.GAP, AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                   AcknowledgeType.REJECT})


@dataclass(frozen=True, order=True)
class TransactionOwner:
    """The owner of the records a transaction holds, in place of a member id."""

    producer_id: int


class TxnAckError(Enum):
    """Each value names the eoslog.protocol.errors.ErrorCode member the handler answers with."""

    NONE = "NONE"
    INVALID_REQUEST = "INVALID_REQUEST"  # malformed batches, a RENEW, past the SPEO
    INVALID_RECORD_STATE = "INVALID_RECORD_STATE"  # not acquired by that member, or its lock ran out
    PRODUCER_FENCED = "PRODUCER_FENCED"  # an older epoch of the producer: a zombie
    INVALID_TXN_STATE = "INVALID_TXN_STATE"  # the transaction is past its timeout (being aborted)
    CONCURRENT_TRANSACTIONS = "CONCURRENT_TRANSACTIONS"  # a newer epoch before the older one's marker


class TxnState(Enum):
    """The state of one producer's transaction on one share partition; absent means nothing held."""

    OPEN = "open"  # holds records, may acknowledge more
    OVERDUE = "overdue"  # past its timeout: holds its records until the marker, may add nothing


class TxnEvent(Enum):
    ACKNOWLEDGE = "acknowledge"  # the producer acknowledges records inside the transaction
    TIMEOUT = "timeout"  # the transaction timeout, counted from its first acknowledgement here, has come
    COMMIT = "commit"  # the COMMIT marker
    ABORT = "abort"  # the ABORT marker


# (state or None, event) -> state or None (None: nothing held). The only table of transaction moves; a pair
# not here is refused (an acknowledgement: INVALID_TXN_STATE) or a bug (anything else).
TXN_TRANSITIONS: dict[tuple[TxnState | None, TxnEvent], TxnState | None] = {
    (None, TxnEvent.ACKNOWLEDGE): TxnState.OPEN,
    (TxnState.OPEN, TxnEvent.ACKNOWLEDGE): TxnState.OPEN,
    (TxnState.OPEN, TxnEvent.TIMEOUT): TxnState.OVERDUE,
    (TxnState.OPEN, TxnEvent.COMMIT): None,
    (TxnState.OPEN, TxnEvent.ABORT): None,
    (TxnState.OVERDUE, TxnEvent.COMMIT): None,
    (TxnState.OVERDUE, TxnEvent.ABORT): None,
    # Markers are retried, and a transaction may never have acknowledged on this share partition.
    (None, TxnEvent.COMMIT): None,
    (None, TxnEvent.ABORT): None,
}

class IllegalTxnTransition(RuntimeError):
    """A (state, event) pair not in TXN_TRANSITIONS where the caller cannot refuse it: a bug."""


def txn_transition(state: TxnState | None, event: TxnEvent) -> TxnState | None:
    try:
        return TXN_TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTxnTransition(f"illegal share transaction move: {event.value} in {state}") from None


# The record event a marker applies to a held record, per pending acknowledgement type.
COMMIT_EVENTS: dict[AcknowledgeType, Event] = {
    AcknowledgeType.ACCEPT: Event.ACCEPT,
    AcknowledgeType.REJECT: Event.REJECT,
    AcknowledgeType.GAP: Event.GAP,
    AcknowledgeType.RELEASE: Event.RELEASE,
}
ABORT_EVENT = Event.RELEASE


class PendingAck(NamedTuple):
    first_offset: int
    last_offset: int
    acknowledge_type: AcknowledgeType


@dataclass(frozen=True)
class TransactionHold:
    """What one producer's open transaction holds on this share partition."""

    producer_id: int
    producer_epoch: int
    deadline_ms: int  # first acknowledgement here + the transaction timeout
    state: TxnState
    acks: tuple[PendingAck, ...]  # ascending, disjoint

    @property
    def ranges(self) -> tuple[OffsetRange, ...]:
        return tuple(OffsetRange(a.first_offset, a.last_offset) for a in self.acks)


class PersistedHold(NamedTuple):
    """A hold as the share coordinator stores it (eoslog's tagged field, see docs/share-groups.md)."""

    producer_id: int
    producer_epoch: int
    acks: tuple[PendingAck, ...]


@dataclass(frozen=True)
class TxnChange:
    after: PendingAcknowledgements
    error: TxnAckError = TxnAckError.NONE
    update: PersistedState | None = None  # the share partition's state batches to write, if any
    write_needed: bool = False  # the pending set changed: write ``after.persisted_holds()`` with ``update``


@dataclass(frozen=True)
class PendingAcknowledgements:
    """A share partition with the acknowledgements its transactions hold, and the producers' epochs."""

    partition: SharePartition
    holds: Mapping[int, TransactionHold] = field(default_factory=dict)
    # The newest epoch seen per producer id: an acknowledgement or marker below it is a zombie's.
    producer_epochs: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The records each transaction owns are exactly its pending acknowledgements at or above the SPSO
        # (the log start offset may have moved past some; a reset drops every hold with the records).
        owned: dict[int, set[int]] = {}
        for run in self.partition.in_flight:
            if isinstance(run.member_id, TransactionOwner):
                if run.lock_deadline_ms != HELD_BY_TRANSACTION_MS:
                    raise ValueError(f"a held run with a lock deadline: {run}")
                owned.setdefault(run.member_id.producer_id, set()).update(
                    range(run.first_offset, run.last_offset + 1))
        for producer_id, hold in self.holds.items():
            if hold.producer_id != producer_id or self.producer_epochs.get(producer_id) != hold.producer_epoch:
                raise ValueError(f"hold {hold} filed under {producer_id}")
            pending = {o for a in hold.acks for o in range(max(a.first_offset, self.partition.start_offset),
                                                            a.last_offset + 1)}
            if owned.pop(producer_id, set()) != pending:
                raise ValueError(f"producer {producer_id}'s held records are not its pending acknowledgements")
        if owned:
            raise ValueError(f"records held by producers without a hold: {sorted(owned)}")

    @classmethod
    def of(cls, partition: SharePartition) -> PendingAcknowledgements:
        return cls(partition)

    # ---- queries -------------------------------------------------------------------------------------

    def state_of(self, producer_id: int) -> TxnState | None:
        hold = self.holds.get(producer_id)
        return None if hold is None else hold.state

    def held_count(self, producer_id: int | None = None) -> int:
        return sum(run.offset_count for run in self.partition.in_flight if isinstance(run.member_id, TransactionOwner)
                   and (producer_id is None or run.member_id.producer_id == producer_id))

    def next_deadline(self) -> int | None:
        """The earliest moment something is due: a member's lock or an open transaction's timeout (the
        partition's own next_deadline would name HELD_BY_TRANSACTION_MS for held records)."""
        deadlines = [run.lock_deadline_ms for run in self.partition.in_flight
                     if run.state is S.ACQUIRED and run.lock_deadline_ms != HELD_BY_TRANSACTION_MS]
        deadlines += [h.deadline_ms for h in self.holds.values() if h.state is TxnState.OPEN]
        return min(deadlines) if deadlines else None

    def persisted_holds(self) -> tuple[PersistedHold, ...]:
        """The whole pending set, as every write carries it (the last write's set is the state)."""
        return tuple(PersistedHold(h.producer_id, h.producer_epoch, h.acks)
                     for _, h in sorted(self.holds.items()))

    def with_partition(self, partition: SharePartition) -> PendingAcknowledgements:
        """The value after an operation of the share-partition core (acquire, a member's acknowledgement,
        lock expiry, a member's release, a moved log start offset). None of those touches held records
        but a moved log start offset, which drops those below it: their pending acknowledgements stay,
        and the marker ignores them, as an acknowledgement below the SPSO is ignored."""
        return PendingAcknowledgements(partition, self.holds, self.producer_epochs)

    # ---- operations ------------------------------------------------------------------------------------

    def acknowledge(self, member_id: str, producer_id: int, producer_epoch: int,
                    batches: Sequence[AcknowledgementBatch], *, now_ms: int, transaction_timeout_ms: int,
                    delivery_counts: Sequence[int] = ()) -> TxnChange:
        """The producer's transaction acknowledges records ``member_id`` acquired; on an error nothing
        changes. The records leave the member for the transaction: held past their lock, until the marker.
        ``delivery_counts`` (per batch, -1 or absent: not said) is the count each batch's records were
        handed out with: a record acquired since (its lock ran out, then any member got it again, with a
        higher count) is not the delivery the transaction processed, and is refused."""
        known = self.producer_epochs.get(producer_id)
        if known is not None and producer_epoch < known:
            return TxnChange(self, TxnAckError.PRODUCER_FENCED)
        hold = self.holds.get(producer_id)
        if hold is not None and producer_epoch > hold.producer_epoch:
            return TxnChange(self, TxnAckError.CONCURRENT_TRANSACTIONS)
        state = None if hold is None else hold.state
        if (state, TxnEvent.ACKNOWLEDGE) not in TXN_TRANSITIONS:
            return TxnChange(self, TxnAckError.INVALID_TXN_STATE)
        if first_malformed(batches) is not None or any(
                AcknowledgeType(t) not in TXN_ACKNOWLEDGE_TYPES for b in batches for t in b.acknowledge_types):
            return TxnChange(self, TxnAckError.INVALID_REQUEST)
        partition = self.partition
        owner = TransactionOwner(producer_id)
        limit = partition.config.delivery_count_limit
        runs = list(partition.in_flight)
        added: list[PendingAck] = []
        for index, batch in enumerate(batches):
            expected = delivery_counts[index] if index < len(delivery_counts) else -1
            if batch.last_offset < partition.start_offset:
                # Done already, and not by this member's hand if its lock ran out and another member's
                # acknowledgement moved the SPSO: refused, as a member's own acknowledgement is
                # (SharePartition.acknowledge), or two consumers would each commit output for one record.
                return TxnChange(self, TxnAckError.INVALID_RECORD_STATE)
            if batch.last_offset >= partition.end_offset:
                return TxnChange(self, TxnAckError.INVALID_REQUEST)
            first = max(batch.first_offset, partition.start_offset)
            below, inside, above = cut(runs, first, batch.last_offset)
            if any(run.state is not S.ACQUIRED or run.member_id != member_id or run.lock_deadline_ms <= now_ms
                   or expected not in (-1, run.delivery_count) for run in inside):
                return TxnChange(self, TxnAckError.INVALID_RECORD_STATE)
            moved = []
            for run in inside:
                # The table's RENEW row: the record stays ACQUIRED, its count unchanged, under a new owner.
                state_after, count = transition(run.state, Event.RENEW, run.delivery_count, limit)
                moved.append(InFlightBatch(run.first_offset, run.last_offset, state_after, count, owner,
                                           HELD_BY_TRANSACTION_MS))
                for piece_first, piece_last, ack_type in type_runs(batch, run.first_offset, run.last_offset):
                    added.append(PendingAck(piece_first, piece_last, AcknowledgeType(ack_type)))
            runs = below + moved + above
        if not added:
            return TxnChange(self)
        after_partition = SharePartition(partition.config, partition.start_offset, partition.end_offset,
                                         partition.state_epoch, _merged(runs), partition.archived_total)
        acks = tuple(sorted((hold.acks if hold else ()) + tuple(added)))
        new_hold = TransactionHold(producer_id, producer_epoch,
                                   hold.deadline_ms if hold else now_ms + transaction_timeout_ms,
                                   txn_transition(state, TxnEvent.ACKNOWLEDGE), acks)
        after = PendingAcknowledgements(after_partition, {**self.holds, producer_id: new_hold},
                                        {**self.producer_epochs, producer_id: producer_epoch})
        # The held records persist as Available with their count (no lock outlives a leader); the pending
        # set, written with them, is what keeps them held across a leader change.
        return TxnChange(after, update=None, write_needed=True)

    def expire_transactions(self, now_ms: int) -> TxnChange:
        """Open transactions whose timeout has come become OVERDUE: no more acknowledgements; their records
        stay held until the marker. Nothing to persist (the deadline is not persisted: a new leader starts
        the clock again, which only delays refusing a late acknowledgement)."""
        holds = {pid: (hold if hold.state is not TxnState.OPEN or hold.deadline_ms > now_ms else
                       TransactionHold(pid, hold.producer_epoch, hold.deadline_ms,
                                       txn_transition(hold.state, TxnEvent.TIMEOUT), hold.acks))
                 for pid, hold in self.holds.items()}
        return TxnChange(PendingAcknowledgements(self.partition, holds, self.producer_epochs))

    def complete(self, producer_id: int, producer_epoch: int, commit: bool) -> TxnChange:
        """The transaction's marker (its epoch may be bumped past the hold's, as markers' are): COMMIT
        applies each pending acknowledgement, ABORT releases every held record. A marker of an epoch
        below what this producer already used is a fenced coordinator's or a zombie's: refused."""
        known = self.producer_epochs.get(producer_id)
        if known is not None and producer_epoch < known:
            return TxnChange(self, TxnAckError.PRODUCER_FENCED)
        hold = self.holds.get(producer_id)
        event = TxnEvent.COMMIT if commit else TxnEvent.ABORT
        epochs = {**self.producer_epochs, producer_id: producer_epoch}
        if hold is None:
            txn_transition(None, event)
            return TxnChange(PendingAcknowledgements(self.partition, self.holds, epochs))
        txn_transition(hold.state, event)
        partition = self.partition
        limit = partition.config.delivery_count_limit
        owner = TransactionOwner(producer_id)
        runs = list(partition.in_flight)
        touched: list[OffsetRange] = []
        for ack in hold.acks:
            if ack.last_offset < partition.start_offset:
                continue
            below, inside, above = cut(runs, max(ack.first_offset, partition.start_offset), ack.last_offset)
            record_event = COMMIT_EVENTS[ack.acknowledge_type] if commit else ABORT_EVENT
            moved = []
            for run in inside:
                if run.member_id != owner:  # the invariant says this cannot be: fail loudly
                    raise ValueError(f"pending acknowledgement {ack} over a record not held: {run}")
                state, count = transition(run.state, record_event, run.delivery_count, limit)
                moved.append(InFlightBatch(run.first_offset, run.last_offset, state, count))
                touched.append(run.as_range())
            runs = below + moved + above
        changed = partition.changed(runs, partition.end_offset, touched)
        holds = {pid: h for pid, h in self.holds.items() if pid != producer_id}
        after = PendingAcknowledgements(changed.after, holds, epochs)
        return TxnChange(after, update=changed.update, write_needed=True)

    # ---- persistence -----------------------------------------------------------------------------------

    @classmethod
    def load(cls, partition: SharePartition, persisted: Sequence[PersistedHold], *, now_ms: int,
             transaction_timeout_ms: int) -> PendingAcknowledgements:
        """A new leader's value: ``partition`` loaded from the share coordinator (held records came back
        Available), and the pending set written with it; the held records are held again. A pending
        acknowledgement over a record that is not Available there (done since: the marker's write won)
        is a broken state, refused."""
        runs = list(partition.in_flight)
        holds: dict[int, TransactionHold] = {}
        for producer_id, producer_epoch, acks in persisted:
            owner = TransactionOwner(producer_id)
            for ack in acks:
                if ack.last_offset < partition.start_offset:
                    continue
                below, inside, above = cut(runs, max(ack.first_offset, partition.start_offset), ack.last_offset)
                if any(run.state is not S.AVAILABLE for run in inside) or not inside or (
                        inside[-1].last_offset != ack.last_offset):
                    raise ValueError(f"pending acknowledgement {ack} over records not available: {inside}")
                runs = below + [InFlightBatch(r.first_offset, r.last_offset, S.ACQUIRED, r.delivery_count, owner,
                                              HELD_BY_TRANSACTION_MS) for r in inside] + above
            holds[producer_id] = TransactionHold(producer_id, producer_epoch, now_ms + transaction_timeout_ms,
                                                 TxnState.OPEN, tuple(sorted(acks)))
        held = SharePartition(partition.config, partition.start_offset, partition.end_offset,
                              partition.state_epoch, _merged(runs), partition.archived_total)
        return cls(held, holds, {pid: h.producer_epoch for pid, h in holds.items()})


def _merged(runs: Sequence[InFlightBatch]) -> tuple[InFlightBatch, ...]:
    out: list[InFlightBatch] = []
    for run in runs:
        if out and out[-1].attributes() == run.attributes() and out[-1].last_offset + 1 == run.first_offset:
            out[-1] = out[-1].part(out[-1].first_offset, run.last_offset)
        else:
            out.append(run)
    return tuple(out)
