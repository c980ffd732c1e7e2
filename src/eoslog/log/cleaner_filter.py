"""The log cleaner's decisions, batch by batch (the core of Kafka's LogCleaner.cleanInto). No I/O.

Three pieces, used in this order by a cleaning pass (cleaner_pass.py):

1. :class:`TransactionScan` reads the headers (and the markers) of the whole log once and learns, per
   producer, which offset ranges belong to aborted transactions (data between the producer's first
   transactional batch and its ABORT marker), which transactions were still open at the end, and where
   each producer's last data batch is.
2. :func:`map_batch_keys` lists what a batch contributes to the key -> offset map: nothing for control
   batches and aborted data (an aborted record must never shadow a committed one).
3. :class:`BatchCleaner` decides, for every batch from the log start to the end of the cleaned range, what
   is written to the cleaned segment: the batch unchanged, rewritten with fewer records (offsets, producer
   id/epoch/sequence and ``last_offset_delta`` kept, so offsets never move and gaps appear), or nothing.

The rules (docs/compaction.md has the reasoning):
- a record stays when it is the latest version of its key (or lies beyond what the map covered);
  records without a key are dropped, as Kafka does;
- a tombstone (null value) stays until its batch's delete horizon (KIP-534: ``base_timestamp`` with the
  0x40 attribute bit) has passed; a batch first cleaned while holding tombstones gets the horizon
  ``now + delete.retention.ms``;
- aborted data is always dropped; data of a transaction whose outcome is not known is kept unchanged;
- a producer's last data batch is kept even when empty (its header carries the sequence numbers the
  producer state is rebuilt from, Kafka's RETAIN_EMPTY);
- a COMMIT/ABORT marker stays while any batch of its transaction stays or an aborted-transaction index
  entry refers to it; after that it gets a delete horizon, and goes once the horizon has passed.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from enum import Enum

from eoslog.records.batch import DecodedBatch, Record
from eoslog.records.builder import build_batch
from eoslog.records.checksum import crc32c
from eoslog.records.compression import CompressionType
from eoslog.records.control import ControlType, EndTransactionMarker
from eoslog.records.header import (
    ATTRIBUTES,
    ATTRIBUTES_OFFSET,
    CRC,
    CRC_OFFSET,
    CRC_START,
    DELETE_HORIZON_BIT,
    MAX_TIMESTAMP,
    MAX_TIMESTAMP_OFFSET,
    BatchHeader,
)


def delete_horizon(header: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534), or None when the cleaner has not set one."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


@dataclass
class TransactionScan:
    """Transaction outcomes learnt from one walk over every batch header (and marker) of the log."""

    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # pid -> [(first, marker)]
    open_at_end: dict[int, int] = field(default_factory=dict)  # pid -> first offset of an open txn
    last_data_offset: dict[int, int] = field(default_factory=dict)  # pid -> last offset of last data batch
    _open: dict[int, int] = field(default_factory=dict)

    def add(self, header: BatchHeader, marker: EndTransactionMarker | None) -> None:
        producer_id = header.producer_id
        if producer_id < 0:
            return
        if header.is_control:
            first = self._open.pop(producer_id, None)
            if first is not None and marker is not None and marker.control_type is ControlType.ABORT:
                self.aborted.setdefault(producer_id, []).append((first, header.base_offset))
            return
        self.last_data_offset[producer_id] = header.last_offset
        if header.is_transactional:
            self._open.setdefault(producer_id, header.base_offset)

    def finish(self) -> TransactionScan:
        self.open_at_end = dict(self._open)
        return self

    def is_aborted(self, header: BatchHeader) -> bool:
        ranges = self.aborted.get(header.producer_id)
        if not ranges or not header.is_transactional:
            return False
        slot = bisect_right(ranges, (header.base_offset, 1 << 63)) - 1
        return slot >= 0 and ranges[slot][0] <= header.base_offset < ranges[slot][1]

    def is_undecided(self, header: BatchHeader) -> bool:
        """A transactional data batch whose marker was not in the log when it was scanned."""
        first = self.open_at_end.get(header.producer_id)
        return header.is_transactional and first is not None and header.base_offset >= first


def map_batch_keys(batch: DecodedBatch, scan: TransactionScan) -> list[tuple[bytes, int]]:
    """(key, offset) of the records a batch puts in the offset map, in offset order."""
    header = batch.header
    if header.is_control or scan.is_aborted(header) or scan.is_undecided(header):
        return []
    base = header.base_offset
    return [(r.key, base + r.offset_delta) for r in batch.records if r.key is not None]


class Outcome(Enum):
    KEEP = "keep"  # the batch's bytes go to the cleaned segment unchanged
    REWRITE = "rewrite"  # a new batch with the retained records (``data``)
    DROP = "drop"  # nothing of the batch remains


@dataclass(frozen=True, slots=True)
class CleanedBatch:
    outcome: Outcome
    data: bytes | None = None  # for REWRITE
    records_before: int = 0
    records_after: int = 0
    pending_horizon: int | None = None  # the horizon of a kept batch still holding tombstones or a marker


@dataclass
class BatchCleaner:
    """Decides every batch of one cleaning pass, in offset order (state: open transactions' fates).

    ``latest_offset(key)`` answers from the offset map; ``map_end`` is the last offset the map covers.
    ``referenced_markers`` are (producer_id, marker offset) pairs an aborted-transaction index entry
    still names; ``active_producers`` (None: all) limits whose last batch is kept when empty.
    """

    scan: TransactionScan
    latest_offset: object  # Callable[[bytes], int | None]
    map_end: int
    now_ms: int
    delete_retention_ms: int
    referenced_markers: frozenset[tuple[int, int]] = frozenset()
    active_producers: frozenset[int] | None = None
    _txn_has_data: dict[int, bool] = field(default_factory=dict)

    def _must_keep_header(self, header: BatchHeader) -> bool:
        producer_id = header.producer_id
        if producer_id < 0 or self.scan.last_data_offset.get(producer_id) != header.last_offset:
            return False
        return self.active_producers is None or producer_id in self.active_producers

    def control(self, header: BatchHeader, raw: bytes, batch: DecodedBatch | None) -> CleanedBatch:
        """A COMMIT/ABORT marker batch; ``batch`` decoded (needed only to set its horizon)."""
        producer_id = header.producer_id
        has_data = self._txn_has_data.pop(producer_id, False)
        if has_data or (producer_id, header.base_offset) in self.referenced_markers:
            return CleanedBatch(Outcome.KEEP, records_before=1, records_after=1)
        horizon = delete_horizon(header)
        if horizon is not None:
            if horizon <= self.now_ms:
                return CleanedBatch(Outcome.DROP, records_before=1)
            return CleanedBatch(Outcome.KEEP, records_before=1, records_after=1, pending_horizon=horizon)
        horizon = self.now_ms + self.delete_retention_ms
        assert batch is not None
        data = rebuild_batch(header, list(batch.records), horizon)
        return CleanedBatch(Outcome.REWRITE, data, 1, 1, pending_horizon=horizon)

    def needs_records(self, header: BatchHeader) -> bool:
        """Whether ``data`` must decode the batch (False: aborted data, decided from the header alone)."""
        return not (header.is_transactional and self.scan.is_aborted(header))

    def data(self, header: BatchHeader, batch: DecodedBatch | None) -> CleanedBatch:
        """A data batch (``batch`` may be None when ``needs_records`` said so)."""
        scan = self.scan
        keep_header = self._must_keep_header(header)
        if header.is_transactional:
            if scan.is_aborted(header):
                if keep_header:
                    self._txn_has_data[header.producer_id] = True
                    return CleanedBatch(
                        Outcome.REWRITE, rebuild_batch(header, [], None), header.records_count, 0
                    )
                return CleanedBatch(Outcome.DROP, records_before=header.records_count)
            if scan.is_undecided(header):
                return CleanedBatch(Outcome.KEEP, records_before=header.records_count,
                                    records_after=header.records_count)
        assert batch is not None
        records = batch.records
        base = header.base_offset
        horizon = delete_horizon(header)
        tombstones_expired = horizon is not None and horizon <= self.now_ms
        map_end = self.map_end
        latest_offset = self.latest_offset
        kept = []
        tombstones = 0
        for record in records:
            key = record.key
            if key is None:
                continue
            offset = base + record.offset_delta
            if offset <= map_end:
                latest = latest_offset(key)
                if latest is not None and offset < latest:
                    continue
            if record.value is None:
                if tombstones_expired:
                    continue
                tombstones += 1
            kept.append(record)
        if not kept and not keep_header:
            return CleanedBatch(Outcome.DROP, records_before=len(records))
        if header.is_transactional:
            self._txn_has_data[header.producer_id] = True
        pending = None
        new_horizon = horizon
        if tombstones:
            if horizon is None:
                new_horizon = self.now_ms + self.delete_retention_ms
            pending = new_horizon
        elif not kept:
            new_horizon = None  # an empty batch kept for its header needs no horizon
        if len(kept) == len(records) and new_horizon == horizon:
            return CleanedBatch(Outcome.KEEP, None, len(records), len(kept), pending)
        data = rebuild_batch(header, kept, new_horizon)
        return CleanedBatch(Outcome.REWRITE, data, len(records), len(kept), pending)


def rebuild_batch(header: BatchHeader, records: list[Record], horizon: int | None) -> bytes:
    """The batch again with only ``records``: base offset, last_offset_delta, producer id, epoch, base
    sequence, leader epoch, attributes and codec kept (an empty batch is left uncompressed). With a
    ``horizon`` the base timestamp becomes it (KIP-534) and the record deltas are shifted so every record
    keeps its timestamp. max_timestamp stays the original for LogAppendTime batches and empty ones."""
    base_timestamp = header.base_timestamp
    if horizon is not None and horizon != base_timestamp:
        shift = base_timestamp - horizon
        records = [
            Record(r.offset_delta, r.timestamp_delta + shift, r.key, r.value, r.headers) for r in records
        ]
        base_timestamp = horizon
    data = bytearray(
        build_batch(
            records,
            base_offset=header.base_offset,
            compression=header.compression if records else CompressionType.NONE,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            timestamp_type=header.timestamp_type,
            partition_leader_epoch=header.partition_leader_epoch,
            base_timestamp=base_timestamp,
            last_offset_delta=header.last_offset_delta,
        )
    )
    attributes = ATTRIBUTES.unpack_from(data, ATTRIBUTES_OFFSET)[0]
    attributes = attributes | DELETE_HORIZON_BIT if horizon is not None else attributes & ~DELETE_HORIZON_BIT
    ATTRIBUTES.pack_into(data, ATTRIBUTES_OFFSET, attributes)
    if header.timestamp_type == 1 or not records:
        MAX_TIMESTAMP.pack_into(data, MAX_TIMESTAMP_OFFSET, header.max_timestamp)
    CRC.pack_into(data, CRC_OFFSET, crc32c(memoryview(data)[CRC_START:]))
    return bytes(data)
