"""Per-partition producer state: idempotent de-duplication and transaction tracking.

The model is Kafka's ProducerStateManager and ProducerAppendInfo.

Contract of :class:`ProducerStateTable`
  Owns: one :class:`~eoslog.log.producer_entry.ProducerEntry` per producer id that wrote to the partition,
  the open transactions, and ``map_end_offset`` (every batch below it has been applied).
  Always true: the state equals what replaying the partition's producer batches below
  ``map_end_offset`` in order would give; ``first_unstable_offset()`` is the smallest first offset of
  an open transaction.
  Callers: the partition layer, on the event loop, without awaiting between ``prepare_append``, the
  log append and ``apply`` (a second append prepared in between would be checked against stale state;
  ``apply`` refuses an append prepared against an entry that has since changed).

Append path (prepare -> log -> apply)::

    result = table.prepare_append(header, now_ms)        # raises a ProducerStateError subclass
    if isinstance(result, Duplicate):                     # a retry: answer result.first_offset
        ...
    else:
        info = log.append(...)                            # assigns offsets
        completed = table.apply(result, info.first_offset, info.last_offset)

Nothing changes before ``apply``. Recovery: ``load_latest_snapshot`` then ``replay`` every batch header
from the returned offset to the log end.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from eoslog.log import producer_snapshot
from eoslog.log.producer_entry import ProducerEntry
from eoslog.log.producer_validation import (
    AppendOrigin,
    Situation,
    UnknownProducerPolicy,
    Verdict,
    classify,
    table_for,
)
from eoslog.records.control import ControlType, EndTransactionMarker
from eoslog.records.header import BatchHeader

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 60 * 60 * 1000  # producer.id.expiration.ms: 1 day
DEFAULT_SNAPSHOTS_TO_KEEP = 2


# ---------------------------------------------------------------------------------------------------
# Errors: one per Kafka error name; the request dispatcher maps ``error_name`` to the wire code.


class ProducerStateError(Exception):
    """A batch was refused by the producer state checks. The client's fault, never the broker's."""

    error_name = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str, situation: Situation | None = None) -> None:
        super().__init__(message)
        self.situation = situation


class OutOfOrderSequence(ProducerStateError):
    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpoch(ProducerStateError):
    error_name = "INVALID_PRODUCER_EPOCH"


class UnknownProducerId(ProducerStateError):
    error_name = "UNKNOWN_PRODUCER_ID"


class InvalidTxnState(ProducerStateError):
    error_name = "INVALID_TXN_STATE"


class TransactionCoordinatorFenced(ProducerStateError):
    error_name = "TRANSACTION_COORDINATOR_FENCED"


ERRORS: dict[Verdict, type[ProducerStateError]] = {
    Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER: OutOfOrderSequence,
    Verdict.INVALID_PRODUCER_EPOCH: InvalidProducerEpoch,
    Verdict.UNKNOWN_PRODUCER_ID: UnknownProducerId,
    Verdict.INVALID_TXN_STATE: InvalidTxnState,
    Verdict.TRANSACTION_COORDINATOR_FENCED: TransactionCoordinatorFenced,
}


class StaleAppendInfo(RuntimeError):
    """``apply`` got an append prepared against state that changed since: a bug in the caller."""


# ---------------------------------------------------------------------------------------------------
# Values handed to and returned by the table.


@dataclass(frozen=True, slots=True)
class ProducerAppendInfo:
    """A validated, not yet applied append of one producer batch (the transit object)."""

    producer_id: int
    producer_epoch: int
    first_seq: int
    last_seq: int
    timestamp: int
    is_transactional: bool
    marker: EndTransactionMarker | None  # set for control batches
    situation: Situation
    prepared_against: ProducerEntry | None  # the entry the checks saw (None: unknown producer)


class Duplicate(NamedTuple):
    """The batch is a retry of one already in the log: answer with its offsets, append nothing."""

    producer_id: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker: data from ``first_offset``, marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class OngoingTxn(NamedTuple):
    """An open transaction, for DescribeProducers and the hanging-transaction tools (KIP-664)."""

    producer_id: int
    producer_epoch: int
    first_offset: int
    last_timestamp: int
    coordinator_epoch: int


# ---------------------------------------------------------------------------------------------------


class ProducerStateTable:
    """The producer ids of one partition, checked and updated batch by batch (contract: module docstring)."""

    def __init__(
        self, *, unknown_producer_policy: UnknownProducerPolicy = UnknownProducerPolicy.ACCEPT
    ) -> None:
        self._table = table_for(unknown_producer_policy)
        self._producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.map_end_offset = 0

    @classmethod
    def with_entries(
        cls,
        entries: Iterable[ProducerEntry],
        map_end_offset: int,
        *,
        unknown_producer_policy: UnknownProducerPolicy = UnknownProducerPolicy.ACCEPT,
    ) -> ProducerStateTable:
        """A table holding ``entries`` as the state below ``map_end_offset`` (tests, tools)."""
        table = cls(unknown_producer_policy=unknown_producer_policy)
        table._reset(entries, map_end_offset)
        return table

    # -- reading ------------------------------------------------------------------------------------

    def get(self, producer_id: int) -> ProducerEntry | None:
        """The producer's entry; treat it as read-only."""
        return self._producers.get(producer_id)

    def entries(self) -> list[ProducerEntry]:
        """Every entry, by producer id (DescribeProducers); treat them as read-only."""
        return [self._producers[pid] for pid in sorted(self._producers)]

    def __len__(self) -> int:
        return len(self._producers)

    def first_unstable_offset(self) -> int | None:
        """Smallest first offset of an open transaction; the LSO is min(this, high watermark)."""
        return min(self._ongoing.values()) if self._ongoing else None

    def ongoing_transactions(self) -> list[OngoingTxn]:
        """Open transactions, oldest first."""
        result = []
        for producer_id, first_offset in sorted(self._ongoing.items(), key=lambda item: (item[1], item[0])):
            entry = self._producers[producer_id]
            result.append(
                OngoingTxn(
                    producer_id,
                    entry.producer_epoch,
                    first_offset,
                    entry.last_timestamp,
                    entry.coordinator_epoch,
                )
            )
        return result

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO right after ``completed`` was applied, for its aborted-transaction index entry.

        It is the first offset of the oldest transaction still open, or just past the marker.
        """
        first_unstable = self.first_unstable_offset()
        return completed.last_offset + 1 if first_unstable is None else first_unstable

    # -- the append path ----------------------------------------------------------------------------

    def prepare_append(
        self,
        header: BatchHeader,
        now_ms: int,
        marker: EndTransactionMarker | None = None,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transaction_version: int = 0,
    ) -> ProducerAppendInfo | Duplicate | None:
        """Checks one batch about to be appended; changes nothing.

        Returns None for batches without a producer id (nothing to track), a :class:`Duplicate` for a
        retry of a batch already in the log, else the :class:`ProducerAppendInfo` to pass to
        :meth:`apply` once the log has assigned offsets. Raises a :class:`ProducerStateError` subclass
        when the batch must be refused. Control batches need their ``marker``; ``transaction_version``
        is the one the coordinator wrote it with (KIP-890). ``now_ms`` stands in for the batch
        timestamp when the batch has none.

        One batch per call, applied before the next is prepared: Produce v3+ carries exactly one
        batch per partition, so a request never needs two pending appends of one producer.
        """
        producer_id = header.producer_id
        if producer_id < 0:
            return None
        entry = self._producers.get(producer_id)
        situation = classify(entry, header, marker, origin=origin, transaction_version=transaction_version)
        verdict = self._table[situation]
        if verdict is Verdict.DUPLICATE:
            assert entry is not None
            batch = entry.find_duplicate(header.producer_epoch, header.base_sequence, header.last_sequence)
            assert batch is not None
            return Duplicate(producer_id, batch.first_offset, batch.last_offset, batch.timestamp)
        if verdict is not Verdict.APPEND:
            raise ERRORS[verdict](_explain(situation, header, entry, marker), situation)
        timestamp = header.max_timestamp if header.max_timestamp >= 0 else now_ms
        return ProducerAppendInfo(
            producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.last_sequence,
            timestamp,
            header.is_transactional,
            marker if header.is_control else None,
            situation,
            entry,
        )

    def apply(
        self, info: ProducerAppendInfo | None, first_offset: int, last_offset: int
    ) -> CompletedTxn | None:
        """Records a prepared append now that the log holds it at ``first_offset``..``last_offset``.

        Returns the :class:`CompletedTxn` when the batch was a marker closing an open transaction.
        ``info`` None (a batch without a producer id) only advances ``map_end_offset``.
        """
        if info is None:
            self.map_end_offset = max(self.map_end_offset, last_offset + 1)
            return None
        current = self._producers.get(info.producer_id)
        if current is not info.prepared_against:
            raise StaleAppendInfo(
                f"producer {info.producer_id}: its state changed between prepare_append and apply"
            )
        return self._update(
            current,
            info.producer_id,
            info.producer_epoch,
            info.first_seq,
            info.last_seq,
            info.timestamp,
            info.is_transactional,
            info.marker,
            first_offset,
            last_offset,
        )

    def replay(self, header: BatchHeader, marker: EndTransactionMarker | None = None) -> CompletedTxn | None:
        """Updates the state from a batch already in the log (recovery); history is never refused.

        ``header`` carries its assigned offsets. Control batches need their ``marker``; one without
        (an empty control batch, its record cleaned away) is skipped, as Kafka does. Batches below
        ``map_end_offset`` are already reflected in the state and are skipped.
        """
        last_offset = header.last_offset
        if last_offset < self.map_end_offset:
            return None
        if header.producer_id < 0 or (header.is_control and marker is None):
            self.map_end_offset = last_offset + 1
            return None
        entry = self._producers.get(header.producer_id)
        return self._update(
            entry,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.last_sequence,
            header.max_timestamp,
            header.is_transactional,
            marker if header.is_control else None,
            header.base_offset,
            last_offset,
        )

    def _update(
        self,
        entry: ProducerEntry | None,
        producer_id: int,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        timestamp: int,
        is_transactional: bool,
        marker: EndTransactionMarker | None,
        first_offset: int,
        last_offset: int,
    ) -> CompletedTxn | None:
        """The one state transition shared by live appends and replay."""
        base = entry if entry is not None else ProducerEntry(producer_id)
        completed = None
        if marker is not None:
            if base.current_txn_first_offset is not None:
                completed = CompletedTxn(
                    producer_id,
                    base.current_txn_first_offset,
                    last_offset,
                    marker.control_type is ControlType.ABORT,
                )
            updated = base.with_marker(producer_epoch, marker.coordinator_epoch, timestamp)
            self._ongoing.pop(producer_id, None)
        else:
            batch = (first_seq, last_seq, first_offset, last_offset, timestamp)
            updated = base.with_batch(producer_epoch, batch)
            if is_transactional and updated.current_txn_first_offset is None:
                updated.current_txn_first_offset = first_offset
                self._ongoing[producer_id] = first_offset
        self._producers[producer_id] = updated
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)
        return completed

    # -- expiration ---------------------------------------------------------------------------------

    def remove_expired(
        self, now_ms: int, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> list[int]:
        """Forgets producers silent for ``producer_id_expiration_ms`` with no open transaction.

        Returns the removed producer ids. An open transaction keeps its producer: forgetting it would
        lose the first offset that holds the LSO back (the transaction coordinator aborts it instead).
        """
        expired = [
            pid
            for pid, entry in self._producers.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= producer_id_expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return expired

    # -- snapshots and truncation -------------------------------------------------------------------

    def write_snapshot(
        self,
        directory: str | os.PathLike,
        offset: int | None = None,
        *,
        keep_newest: int | None = DEFAULT_SNAPSHOTS_TO_KEEP,
    ) -> int:
        """Writes ``<offset>.snapshot`` (default: ``map_end_offset``) atomically; returns the offset.

        The offset must be the log end offset the state covers, i.e. every batch below it has been
        applied and none above. Older snapshots beyond the ``keep_newest`` newest are deleted.
        """
        if offset is None:
            offset = self.map_end_offset
        producer_snapshot.write_snapshot_file(directory, offset, self._producers.values())
        if keep_newest is not None:
            producer_snapshot.retain_newest_snapshot_files(directory, keep_newest)
        return offset

    def load_latest_snapshot(
        self, directory: str | os.PathLike, below_offset: int | None = None
    ) -> int | None:
        """Replaces the state by the newest valid snapshot at or below ``below_offset``.

        Returns the snapshot's offset (replay the log from there), or None when there is no usable
        snapshot: the state is then empty with ``map_end_offset`` 0 (replay from the log start).
        Damaged snapshots are logged and deleted on the way.
        """
        loaded = producer_snapshot.load_latest_snapshot_file(directory, below_offset)
        if loaded is None:
            self._reset([], 0)
            return None
        offset, entries = loaded
        self._reset(entries, offset)
        return offset

    def delete_snapshots_below(self, directory: str | os.PathLike, offset: int) -> list[int]:
        """Deletes snapshots older than ``offset`` (e.g. the new log start offset); returns their offsets."""
        return producer_snapshot.delete_snapshot_files(directory, below=offset)

    def truncate_to(self, directory: str | os.PathLike, offset: int) -> int | None:
        """The log was truncated to end at ``offset``: drop newer snapshots and reload from an older one.

        In-memory state cannot be un-applied, so it is reloaded from the newest snapshot at or below
        ``offset``; the caller then replays the log from the returned offset (None: from the log
        start) up to ``offset``.
        """
        producer_snapshot.delete_snapshot_files(directory, above=offset)
        return self.load_latest_snapshot(directory, offset)

    def truncate_fully_and_start_at(self, directory: str | os.PathLike, offset: int) -> None:
        """The whole log was replaced, starting empty at ``offset``: forget everything."""
        producer_snapshot.delete_snapshot_files(directory, below=None, above=-1)
        self._reset([], offset)

    def _reset(self, entries: Iterable[ProducerEntry], map_end_offset: int) -> None:
        self._producers = {entry.producer_id: entry for entry in entries}
        self._ongoing = {
            entry.producer_id: entry.current_txn_first_offset
            for entry in self._producers.values()
            if entry.current_txn_first_offset is not None
        }
        self.map_end_offset = map_end_offset


def _explain(
    situation: Situation,
    header: BatchHeader,
    entry: ProducerEntry | None,
    marker: EndTransactionMarker | None,
) -> str:
    """An error message naming both sides, so the log line says who is behind."""
    pid = header.producer_id
    if entry is None:
        known = "no state"
    else:
        known = (
            f"epoch {entry.producer_epoch}, last sequence {entry.last_seq}, "
            f"coordinator epoch {entry.coordinator_epoch}, "
            f"open transaction from {entry.current_txn_first_offset}"
        )
    if marker is not None:
        got = (
            f"{marker.control_type.name} marker with epoch {header.producer_epoch}, "
            f"coordinator epoch {marker.coordinator_epoch}"
        )
    else:
        got = (
            f"epoch {header.producer_epoch}, sequences {header.base_sequence}..{header.last_sequence}, "
            f"transactional={header.is_transactional}"
        )
    return f"producer {pid}: {situation.name.lower().replace('_', ' ')}: got {got}; partition has {known}"
