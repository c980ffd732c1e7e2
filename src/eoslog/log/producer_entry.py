"""What a partition remembers about one producer id: its epoch, its last five batches, its open transaction.

These are plain values shared by the validation table (producer_validation.py), the state table
(producer_state.py) and the snapshot format (producer_snapshot.py). A :class:`ProducerEntry` is never
changed in place once it is in a table: an append builds a new entry, so an append prepared against an
entry can tell whether that entry is still current when it is applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: a producer has at most five requests in flight
# per connection (max.in.flight.requests.per.connection <= 5 with idempotence), so any retry it can
# send matches one of its last five batches.
NUM_BATCHES_TO_RETAIN = 5
BATCH_FIELDS = 5  # first_seq, last_seq, first_offset, last_offset, timestamp: BatchMetadata's, in order

NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_COORDINATOR_EPOCH = -1
NO_TIMESTAMP = -1
SEQUENCE_MODULUS = 0x80000000  # sequences are non-negative int32 and wrap from Int.MaxValue to 0
INT32_MAX = SEQUENCE_MODULUS - 1


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Whether ``next_sequence`` directly follows ``last_sequence`` (-1 when nothing came before).

    The only wrap Kafka allows is Int.MaxValue -> 0; ``last_sequence + 1`` is computed without
    overflow, as Kafka does with a long, so -1 -> 0 also holds for an empty history.
    """
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


def decrement_sequence(sequence: int, by: int) -> int:
    """``sequence - by`` on the wrapping sequence ring (first sequence from last sequence and delta)."""
    return (sequence - by) % SEQUENCE_MODULUS


class BatchMetadata(NamedTuple):
    """One batch a producer appended: its sequence range, where it landed, and its max timestamp."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


class ProducerEntry:
    """The state kept for one producer id on one partition.

    Invariants: ``batch_metadata`` holds at most NUM_BATCHES_TO_RETAIN batches, all appended with
    ``producer_epoch``, oldest first (a new epoch empties it); ``current_txn_first_offset`` is the
    offset of the first batch of the producer's open transaction, or None when it has none open.

    Why one flat tuple of ints inside: a broker keeps one entry per producer per partition (50,000 with
    1,000 partitions and 50 producers) and replaces it on every batch. The batch history is stored as a
    single tuple of ints, BATCH_FIELDS per batch, which CPython's garbage collector stops tracking the
    first time it looks at it (a tuple holding only ints cannot be part of a cycle); a deque of named
    tuples stayed tracked and tripled the objects every full collection walks and every batch promotes
    (docs/benchmarks.md, "The garbage collector at 1,000 partitions"). Readers get :class:`BatchMetadata`
    views.
    """

    __slots__ = (
        "_batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        batch_metadata: Iterable[Sequence[int]] = (),
        coordinator_epoch: int = NO_COORDINATOR_EPOCH,
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int | None = None,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        retained = list(batch_metadata)[-NUM_BATCHES_TO_RETAIN:]
        self._batches: tuple[int, ...] = tuple(
            int(value) for batch in retained for value in batch[:BATCH_FIELDS])
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset

    def _fields(self) -> tuple:
        return (self.producer_id, self.producer_epoch, self._batches, self.coordinator_epoch,
                self.last_timestamp, self.current_txn_first_offset)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not ProducerEntry:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # mutable (current_txn_first_offset is set while a table builds it)

    def __repr__(self) -> str:
        return (f"ProducerEntry(producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
                f"batch_metadata={list(self.batch_metadata)}, coordinator_epoch={self.coordinator_epoch}, "
                f"last_timestamp={self.last_timestamp}, "
                f"current_txn_first_offset={self.current_txn_first_offset})")

    @property
    def batch_metadata(self) -> tuple[BatchMetadata, ...]:
        """The retained batches, oldest first (views made on each call: not for the append path)."""
        flat = self._batches
        return tuple(BatchMetadata._make(flat[i:i + BATCH_FIELDS]) for i in range(0, len(flat), BATCH_FIELDS))

    @property
    def first_seq(self) -> int:
        return self._batches[0] if self._batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self._batches[1 - BATCH_FIELDS] if self._batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self._batches[3 - BATCH_FIELDS] if self._batches else -1

    @property
    def has_open_transaction(self) -> bool:
        return self.current_txn_first_offset is not None

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this epoch and sequence range, if any (a client retry)."""
        if producer_epoch != self.producer_epoch:
            return None
        flat = self._batches
        for i in range(0, len(flat), BATCH_FIELDS):
            if flat[i] == first_seq and flat[i + 1] == last_seq:
                return BatchMetadata._make(flat[i:i + BATCH_FIELDS])
        return None

    def copy(self) -> ProducerEntry:
        # Once per appended batch: fields set directly, without __init__'s conversion (the batch tuple is
        # immutable, so it is shared). Every field: keep in step with __slots__.
        entry = _new_entry(ProducerEntry)
        entry.producer_id = self.producer_id
        entry.producer_epoch = self.producer_epoch
        entry._batches = self._batches
        entry.coordinator_epoch = self.coordinator_epoch
        entry.last_timestamp = self.last_timestamp
        entry.current_txn_first_offset = self.current_txn_first_offset
        return entry

    def with_batch(self, producer_epoch: int, batch: tuple[int, int, int, int, int]) -> ProducerEntry:
        """A new entry with ``batch`` (first_seq, last_seq, first_offset, last_offset, timestamp: a plain
        tuple, see the class) appended; a different epoch starts an empty batch history."""
        entry = self.copy()
        if producer_epoch != entry.producer_epoch:
            entry._batches = batch
            entry.producer_epoch = producer_epoch
        else:
            # the last NUM_BATCHES_TO_RETAIN - 1 batches, then the new one (the oldest drops out)
            entry._batches = entry._batches[-(NUM_BATCHES_TO_RETAIN - 1) * BATCH_FIELDS:] + batch
        entry.last_timestamp = batch[4]
        return entry

    def with_marker(self, producer_epoch: int, coordinator_epoch: int, timestamp: int) -> ProducerEntry:
        """A new entry after a COMMIT/ABORT marker: no open transaction, the marker's epochs."""
        entry = self.copy()
        if producer_epoch != entry.producer_epoch:
            entry._batches = ()
            entry.producer_epoch = producer_epoch
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        entry.current_txn_first_offset = None
        return entry


_new_entry = object.__new__
