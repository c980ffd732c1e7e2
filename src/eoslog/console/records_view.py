"""The message browser's core, without I/O: one page of a partition's records from a Fetch response,
each marked committed, aborted or open, the way a read_committed consumer decides it.

A Fetch answered at read_committed lists the aborted transactions overlapping the returned range as
(producer id, first offset). Walking the batches in offset order, a producer becomes *aborted* once a
batch reaches its aborted transaction's first offset, and stops being so at its ABORT marker; its
transactional batches in between belong to the aborted transaction. A transactional record at or past
the last stable offset belongs to a transaction still open. Control batches (the COMMIT and ABORT
markers) are shown as marker rows, since they explain where a transaction ended.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from eoslog.records.batch import DecodedBatch
from eoslog.records.control import ControlType, parse_control_type

COMMITTED, ABORTED, OPEN, MARKER = "committed", "aborted", "open", "marker"


@dataclass(frozen=True)
class RecordRow:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    status: str  # COMMITTED (or not transactional), ABORTED, OPEN or MARKER
    producer_id: int
    producer_epoch: int
    transactional: bool
    marker: str | None = None  # "COMMIT" / "ABORT" on a MARKER row


@dataclass
class RecordPage:
    rows: list[RecordRow] = field(default_factory=list)
    next_offset: int | None = None  # where the next page starts; None when this page reached the end


def mark_records(batches: list[DecodedBatch], aborted_transactions: list[tuple[int, int]],
                 last_stable_offset: int, from_offset: int, limit: int, hide_aborted: bool) -> RecordPage:
    """Up to ``limit`` rows at offsets >= ``from_offset``. ``hide_aborted`` is the read_committed view:
    aborted records and markers are left out, as a read_committed consumer leaves them out."""
    pending = [(first_offset, producer_id) for producer_id, first_offset in aborted_transactions]
    heapq.heapify(pending)
    aborting: set[int] = set()
    page = RecordPage()
    last_seen = from_offset - 1
    for batch in batches:
        header = batch.header
        while pending and pending[0][0] <= header.last_offset:
            aborting.add(heapq.heappop(pending)[1])
        if header.is_control:
            marker = _marker_name(batch)
            if marker == "ABORT":
                aborting.discard(header.producer_id)
            if header.base_offset >= from_offset and not hide_aborted:
                if len(page.rows) >= limit:
                    page.next_offset = header.base_offset
                    return page
                page.rows.append(RecordRow(header.base_offset, header.max_timestamp, None, None, (), MARKER,
                                           header.producer_id, header.producer_epoch, True, marker))
            last_seen = max(last_seen, header.last_offset)
            continue
        if header.is_transactional and header.producer_id in aborting:
            status = ABORTED
        elif header.is_transactional and header.base_offset >= last_stable_offset >= 0:
            status = OPEN
        else:
            status = COMMITTED
        for record in batch.absolute_records():
            last_seen = max(last_seen, record.offset)
            if record.offset < from_offset or (hide_aborted and status == ABORTED):
                continue
            if len(page.rows) >= limit:
                page.next_offset = record.offset
                return page
            page.rows.append(RecordRow(record.offset, record.timestamp, record.key, record.value, record.headers,
                                       status, header.producer_id, header.producer_epoch,
                                       header.is_transactional))
    # The page ended with the data: the next one starts after the last offset this response held.
    page.next_offset = last_seen + 1 if last_seen >= from_offset else None
    return page


def _marker_name(batch: DecodedBatch) -> str:
    try:
        kind = parse_control_type(batch.records[0].key) if batch.records else None
    except ValueError:
        return "?"
    return {ControlType.COMMIT: "COMMIT", ControlType.ABORT: "ABORT"}.get(kind, "?")


def text(data: bytes | None) -> str:
    """Bytes as the browser shows them: UTF-8 when they are, else hex; None as ``null``."""
    if data is None:
        return "null"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()
