"""The transaction state machine: one enum with persisted ids, one table of valid previous states.

The ids are written into ``__transaction_state`` (the ``transaction_status`` int8 of a
TransactionLogValue, see docs/transactions.md) and are Kafka's, so they are spelled out and never
renumbered. ``kafka_name`` is the spelling DescribeTransactions / ListTransactions put on the wire.

The table follows Kafka's rule: a state lists the states it may be entered from. Every transition in
this package goes through :func:`check_transition`, so a move that is not in the table is an error by
construction rather than by a forgotten ``if``.

PREPARE_ABORT may be entered from EMPTY / COMPLETE_* as in Kafka 4: that is the KIP-890 part 2
"abort when unsure" path, taken by an EndTxn(abort) v5+ (transaction version 2) with no transaction open. PREPARE_EPOCH_FENCE is likewise kept for its
id and name: eoslog fences in a single logged Ongoing -> PrepareAbort step (see metadata.py).

CHECKING (8) is eoslog's own (check-back transactions, docs/transactions.md "Check-back transactions"): a
check-back transaction whose timeout passed waits there for its producer group's answer instead of being
aborted. It is never written as 8: the record says Ongoing plus a check count (log_format.py), so a reader
that knows nothing of check-back sees the open transaction it is.
"""

from __future__ import annotations

from enum import Enum


class TransactionState(Enum):
    """States of one transactional id. ``value`` is the persisted byte id."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7
    CHECKING = 8  # eoslog's extension; persisted as ONGOING + CheckCount (see the module docstring)

    @property
    def id(self) -> int:
        return self.value

    @property
    def kafka_name(self) -> str:
        return _KAFKA_NAMES[self]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        try:
            return cls(state_id)
        except ValueError:
            raise UnknownTransactionState(f"unknown transaction state id {state_id}") from None

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState:
        for state, kafka_name in _KAFKA_NAMES.items():
            if kafka_name == name:
                return state
        raise UnknownTransactionState(f"unknown transaction state name {name!r}")

    @property
    def expiration_allowed(self) -> bool:
        """Whether transactional.id.expiration.ms may retire an id resting in this state."""
        return self in _EXPIRABLE

    @property
    def is_prepare(self) -> bool:
        """A decision has been logged whose markers may still be unwritten."""
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT,
                        TransactionState.PREPARE_EPOCH_FENCE)


S = TransactionState

_KAFKA_NAMES: dict[TransactionState, str] = {
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
    S.CHECKING: "Checking",
}

_EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})

# For each state, the states it may be entered from. The only table of transitions in eoslog.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    # InitProducerId: first use of an id, or an epoch bump / producer id rotation between transactions.
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    # AddPartitionsToTxn / AddOffsetsToTxn: starts a transaction, or widens the ongoing one.
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    # EndTxn(commit): the logged PrepareCommit record is the commit point.
    S.PREPARE_COMMIT: frozenset({S.ONGOING, S.CHECKING}),
    # EndTxn(abort), the zombie fence of InitProducerId, the transaction timeout; Empty / Complete* only
    # for KIP-890 part 2 (see the module docstring).
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                                S.COMPLETE_ABORT, S.CHECKING}),
    # All markers written.
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    # transactional.id.expiration.ms: only an id with no transaction in flight may be retired.
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
    # Check-back: the timeout of a check-back transaction (from Ongoing); an `unknown` answer or an
    # expired lease (Checking -> Checking, one more check). Its way out is PrepareCommit / PrepareAbort.
    S.CHECKING: frozenset({S.ONGOING, S.CHECKING}),
}


class UnknownTransactionState(ValueError):
    """A persisted state id or name that is not one of Kafka's."""


class IllegalStateTransition(RuntimeError):
    """A transition not in VALID_PREVIOUS_STATES was attempted: a coordinator bug, never a client's."""

    def __init__(self, transactional_id: str | None, from_state: TransactionState,
                 to_state: TransactionState, detail: str = "") -> None:
        self.transactional_id = transactional_id
        self.from_state = from_state
        self.to_state = to_state
        message = (f"transactional id {transactional_id!r}: illegal transition "
                   f"{from_state.kafka_name} -> {to_state.kafka_name}")
        super().__init__(f"{message}: {detail}" if detail else message)


def is_valid_transition(from_state: TransactionState, to_state: TransactionState) -> bool:
    return from_state in VALID_PREVIOUS_STATES[to_state]


def check_transition(from_state: TransactionState, to_state: TransactionState,
                     transactional_id: str | None = None) -> None:
    """Raise IllegalStateTransition unless ``to_state`` may be entered from ``from_state``."""
    if from_state not in VALID_PREVIOUS_STATES[to_state]:
        raise IllegalStateTransition(transactional_id, from_state, to_state)
