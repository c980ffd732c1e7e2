"""The one table that decides whether a producer's batch may be appended to a partition.

Two steps, both pure:

1. :func:`classify` looks at the producer's entry (or its absence) and the incoming batch and names the
   :class:`Situation`: one member per (state, input) pair that matters, in the order Kafka checks them
   (ProducerAppendInfo, UnifiedLog.analyzeAndValidateProducerState): duplicate first, then the producer
   epoch, then the sequence number, then the transaction state; for markers the producer epoch, then the
   coordinator epoch.
2. :data:`VALIDATION_TABLE` maps each situation to a :class:`Verdict`. Nothing outside the table
   decides, so a test can walk every row.

Kafka's behaviour for an unknown producer whose first batch does not start at sequence 0 changed in 2.5
(KIP-360): the broker used to answer UNKNOWN_PRODUCER_ID, and since then it accepts the batch, because
producer state now outlives the log segments and a producer only goes missing after
producer.id.expiration.ms of silence. :data:`VALIDATION_TABLE` follows Kafka 2.5+;
:data:`STRICT_VALIDATION_TABLE` differs in that one row, for callers that prefer the KIP-98 answer.
"""

from __future__ import annotations

from enum import Enum, IntEnum

from eoslog.log.producer_entry import NO_PRODUCER_EPOCH, ProducerEntry, in_sequence
from eoslog.records.control import EndTransactionMarker
from eoslog.records.header import BatchHeader

# Transaction versions (KIP-890): 0 and 1 write markers with the transaction's own epoch; 2 bumps the
# epoch for every marker, so a marker must carry an epoch above the one the partition knows.
TRANSACTION_VERSION_2 = 2


class AppendOrigin(IntEnum):
    """Who wrote the batch, which sets how much is checked (Kafka's AppendOrigin)."""

    CLIENT = 0  # a Produce request: epoch, duplicates and sequence numbers are all checked
    COORDINATOR = 1  # a coordinator's own write (transactional offset commits): epoch only, no sequence


class Verdict(IntEnum):
    """What to do with the batch. Names are Kafka's error names where the verdict is a rejection."""

    APPEND = 0
    DUPLICATE = 1  # already in the log: answer with the original offsets, write nothing
    OUT_OF_ORDER_SEQUENCE_NUMBER = 2
    INVALID_PRODUCER_EPOCH = 3
    UNKNOWN_PRODUCER_ID = 4
    INVALID_TXN_STATE = 5
    TRANSACTION_COORDINATOR_FENCED = 6


class Situation(IntEnum):
    """Every (producer state, incoming batch) pair the table distinguishes. "Epoch" = producer epoch."""

    # Data batches from clients.
    UNKNOWN_PRODUCER_SEQUENCE_ZERO = 1  # no entry; the batch starts at sequence 0
    UNKNOWN_PRODUCER_SEQUENCE_NONZERO = 2  # no entry; any other first sequence
    OLDER_EPOCH = 3  # the batch's epoch is below the entry's (a zombie); also coordinator writes
    SAME_EPOCH_DUPLICATE = 4  # same epoch, sequence range equals one of the last five batches
    SAME_EPOCH_IN_SEQUENCE = 5  # same epoch, first sequence = last sequence + 1 (with the wrap)
    SAME_EPOCH_OUT_OF_SEQUENCE = 6  # same epoch, a gap, or an older batch no longer cached
    NEWER_EPOCH_SEQUENCE_ZERO = 7  # a bumped epoch starting at 0, as it must
    NEWER_EPOCH_SEQUENCE_NONZERO = 8  # a bumped epoch not starting at 0
    NON_TRANSACTIONAL_IN_OPEN_TXN = 9  # epoch and sequence fine, but a plain batch inside a transaction
    # Data batches the coordinators write themselves (no sequence numbers).
    COORDINATOR_WRITE = 10
    # COMMIT/ABORT markers (control batches): sequence numbers do not apply.
    MARKER_OLDER_EPOCH = 11  # marker epoch below the entry's
    MARKER_EPOCH_NOT_BUMPED = 12  # transaction version 2: marker epoch not above the entry's
    MARKER_STALE_COORDINATOR_EPOCH = 13  # written by a coordinator older than the last one seen
    MARKER_RETRY_AFTER_COMPLETION = 14  # version 2: same epoch, transaction already closed (a resend)
    MARKER_VALID = 15


VALIDATION_TABLE: dict[Situation, Verdict] = {
    Situation.UNKNOWN_PRODUCER_SEQUENCE_ZERO: Verdict.APPEND,
    Situation.UNKNOWN_PRODUCER_SEQUENCE_NONZERO: Verdict.APPEND,  # Kafka 2.5+, see the module docstring
    Situation.OLDER_EPOCH: Verdict.INVALID_PRODUCER_EPOCH,
    Situation.SAME_EPOCH_DUPLICATE: Verdict.DUPLICATE,
    Situation.SAME_EPOCH_IN_SEQUENCE: Verdict.APPEND,
    Situation.SAME_EPOCH_OUT_OF_SEQUENCE: Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Situation.NEWER_EPOCH_SEQUENCE_ZERO: Verdict.APPEND,
    Situation.NEWER_EPOCH_SEQUENCE_NONZERO: Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Situation.NON_TRANSACTIONAL_IN_OPEN_TXN: Verdict.INVALID_TXN_STATE,
    Situation.COORDINATOR_WRITE: Verdict.APPEND,
    Situation.MARKER_OLDER_EPOCH: Verdict.INVALID_PRODUCER_EPOCH,
    Situation.MARKER_EPOCH_NOT_BUMPED: Verdict.INVALID_PRODUCER_EPOCH,
    Situation.MARKER_STALE_COORDINATOR_EPOCH: Verdict.TRANSACTION_COORDINATOR_FENCED,
    Situation.MARKER_RETRY_AFTER_COMPLETION: Verdict.APPEND,
    Situation.MARKER_VALID: Verdict.APPEND,
}

# The data situations that pass the epoch and sequence checks; only these reach the transaction check.
_SEQUENCE_ACCEPTED = frozenset(
    {
        Situation.UNKNOWN_PRODUCER_SEQUENCE_ZERO,
        Situation.UNKNOWN_PRODUCER_SEQUENCE_NONZERO,
        Situation.SAME_EPOCH_IN_SEQUENCE,
        Situation.NEWER_EPOCH_SEQUENCE_ZERO,
        Situation.COORDINATOR_WRITE,
    }
)

STRICT_VALIDATION_TABLE: dict[Situation, Verdict] = {
    **VALIDATION_TABLE,
    Situation.UNKNOWN_PRODUCER_SEQUENCE_NONZERO: Verdict.UNKNOWN_PRODUCER_ID,  # Kafka 0.11 - 2.4
}


class UnknownProducerPolicy(Enum):
    ACCEPT = "accept"  # Kafka 2.5+
    REJECT = "reject"  # Kafka 0.11 - 2.4: UNKNOWN_PRODUCER_ID


def table_for(policy: UnknownProducerPolicy) -> dict[Situation, Verdict]:
    return STRICT_VALIDATION_TABLE if policy is UnknownProducerPolicy.REJECT else VALIDATION_TABLE


def decide(situation: Situation, table: dict[Situation, Verdict] = VALIDATION_TABLE) -> Verdict:
    return table[situation]


def classify(
    entry: ProducerEntry | None,
    header: BatchHeader,
    marker: EndTransactionMarker | None = None,
    *,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    transaction_version: int = 0,
) -> Situation:
    """Names the situation of appending ``header`` (with ``marker`` for control batches) on ``entry``.

    ``entry`` is the producer's current entry, or None when the partition has never seen the producer
    (or has forgotten it). Only producer batches (producer_id >= 0) are classified.
    """
    epoch = header.producer_epoch
    known_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
    if header.is_control:
        return _classify_marker(entry, epoch, known_epoch, marker, transaction_version)

    # Kafka looks for a duplicate before anything else: a retry is answered even if it would fail the
    # later checks now (e.g. the transaction it belonged to has since been closed).
    if (
        origin is AppendOrigin.CLIENT
        and entry is not None
        and entry.find_duplicate(epoch, header.base_sequence, header.last_sequence) is not None
    ):
        return Situation.SAME_EPOCH_DUPLICATE
    if epoch < known_epoch:
        return Situation.OLDER_EPOCH

    if origin is AppendOrigin.COORDINATOR:
        situation = Situation.COORDINATOR_WRITE
    elif known_epoch == NO_PRODUCER_EPOCH:
        # Never seen, or forgotten after producer.id.expiration.ms: any first sequence is a start.
        zero = header.base_sequence == 0
        situation = (
            Situation.UNKNOWN_PRODUCER_SEQUENCE_ZERO if zero else Situation.UNKNOWN_PRODUCER_SEQUENCE_NONZERO
        )
    elif epoch != known_epoch:
        zero = header.base_sequence == 0
        situation = Situation.NEWER_EPOCH_SEQUENCE_ZERO if zero else Situation.NEWER_EPOCH_SEQUENCE_NONZERO
    elif in_sequence(entry.last_seq, header.base_sequence):  # type: ignore[union-attr]
        situation = Situation.SAME_EPOCH_IN_SEQUENCE
    else:
        situation = Situation.SAME_EPOCH_OUT_OF_SEQUENCE

    if (
        situation in _SEQUENCE_ACCEPTED
        and entry is not None
        and entry.has_open_transaction
        and not header.is_transactional
    ):
        return Situation.NON_TRANSACTIONAL_IN_OPEN_TXN
    return situation


def _classify_marker(
    entry: ProducerEntry | None,
    epoch: int,
    known_epoch: int,
    marker: EndTransactionMarker | None,
    transaction_version: int,
) -> Situation:
    if marker is None:
        raise ValueError("a control batch needs its EndTransactionMarker to be validated")
    open_txn = entry is not None and entry.has_open_transaction
    if transaction_version >= TRANSACTION_VERSION_2:
        if epoch < known_epoch or (epoch == known_epoch and open_txn):
            return Situation.MARKER_EPOCH_NOT_BUMPED
        retry = epoch == known_epoch
    else:
        if epoch < known_epoch:
            return Situation.MARKER_OLDER_EPOCH
        retry = False
    known_coordinator_epoch = entry.coordinator_epoch if entry is not None else -1
    if marker.coordinator_epoch < known_coordinator_epoch:
        return Situation.MARKER_STALE_COORDINATOR_EPOCH
    return Situation.MARKER_RETRY_AFTER_COMPLETION if retry else Situation.MARKER_VALID
