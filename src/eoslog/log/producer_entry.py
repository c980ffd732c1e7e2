"""What a partition remembers about one producer id: its epoch, its last five batches, its open transaction.

These are plain values shared by the validation table (producer_validation.py), the state table
(producer_state.py) and the snapshot format (producer_snapshot.py). A :class:`ProducerEntry` is never
changed in place once it is in a table: an append builds a new entry, so an append prepared against an
entry can tell whether that entry is still current when it is applied.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: a producer has at most five requests in flight
# per connection (max.in.flight.requests.per.connection <= 5 with idempotence), so any retry it can
# send matches one of its last five batches.
NUM_BATCHES_TO_RETAIN = 5

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


@dataclass(slots=True, eq=True)
class ProducerEntry:
    """The state kept for one producer id on one partition.

    Invariants: ``batch_metadata`` holds at most NUM_BATCHES_TO_RETAIN batches, all appended with
    ``producer_epoch``, oldest first (a new epoch empties it); ``current_txn_first_offset`` is the
    offset of the first batch of the producer's open transaction, or None when it has none open.
    """

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.batch_metadata, deque) or self.batch_metadata.maxlen != NUM_BATCHES_TO_RETAIN:
            self.batch_metadata = deque(self.batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def has_open_transaction(self) -> bool:
        return self.current_txn_first_offset is not None

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this epoch and sequence range, if any (a client retry)."""
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batch_metadata:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def copy(self) -> ProducerEntry:
        # Once per appended batch: fields set directly, without __init__'s defaults and __post_init__'s
        # check (the deque made here already has the right maxlen). Every field: keep in step with the class.
        entry = _new_entry(ProducerEntry)
        entry.producer_id = self.producer_id
        entry.producer_epoch = self.producer_epoch
        entry.batch_metadata = deque(self.batch_metadata, NUM_BATCHES_TO_RETAIN)
        entry.coordinator_epoch = self.coordinator_epoch
        entry.last_timestamp = self.last_timestamp
        entry.current_txn_first_offset = self.current_txn_first_offset
        return entry

    def with_batch(self, producer_epoch: int, batch: BatchMetadata) -> ProducerEntry:
        """A new entry with ``batch`` appended; a different epoch starts an empty batch history."""
        entry = self.copy()
        if producer_epoch != entry.producer_epoch:
            entry.batch_metadata.clear()
            entry.producer_epoch = producer_epoch
        entry.batch_metadata.append(batch)  # maxlen drops the oldest
        entry.last_timestamp = batch.timestamp
        return entry

    def with_marker(self, producer_epoch: int, coordinator_epoch: int, timestamp: int) -> ProducerEntry:
        """A new entry after a COMMIT/ABORT marker: no open transaction, the marker's epochs."""
        entry = self.copy()
        if producer_epoch != entry.producer_epoch:
            entry.batch_metadata.clear()
            entry.producer_epoch = producer_epoch
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        entry.current_txn_first_offset = None
        return entry


_new_entry = object.__new__
