"""What a ShareFetch reads from a partition's log: whole record batches, each with its offsets and the
header fields share acquisition needs, and the batches of aborted transactions among them.

The records themselves are never decoded: a batch goes to the client as the file region it is (as Fetch
sends it), and only its 61-byte header is read here. A read_committed read stops at the last stable
offset, and the batches of aborted transactions are found with the partition's aborted-transaction index,
the same index a read_committed Fetch answers from (log/transaction_index.py): a transactional batch of
producer P is aborted when an aborted transaction of P starts at or before it and has its ABORT marker
after it. Control batches (the markers) are not aborted records: they are handed out like any record and
the client acknowledges them as gaps.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from eoslog.cluster.partition import READ_COMMITTED
from eoslog.log.region import FileRegion
from eoslog.records.header import CONTROL_BIT, HEADER, HEADER_SIZE, LOG_OVERHEAD, TRANSACTIONAL_BIT
from eoslog.share.in_flight import OffsetRange

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition


class LogBatch(NamedTuple):
    first_offset: int  # the batch's base offset
    last_offset: int
    region: FileRegion  # the whole batch in its segment file
    producer_id: int
    is_transactional: bool
    is_control: bool


class LogRead(NamedTuple):
    batches: tuple[LogBatch, ...]
    aborted: tuple[OffsetRange, ...]  # the batches of aborted transactions (read_committed only)
    upper_bound: int  # nothing at or past it was read: the high watermark, or the last stable offset

    @property
    def ranges(self) -> list[OffsetRange]:
        return [OffsetRange(b.first_offset, b.last_offset) for b in self.batches]


def read_for_share(partition: Partition, offset: int, max_bytes: int, isolation_level: int,
                   min_one_batch: bool) -> LogRead:
    """The batches from the one holding ``offset``, at most ``max_bytes`` (at least one batch when
    ``min_one_batch``), below the high watermark or (read_committed) the last stable offset. Their CRCs
    are checked as a consumer's fetch checks them (log/checked_read.py): a damaged batch is the partition's
    CORRUPT_MESSAGE, never records handed to a member."""
    upper_bound = partition.fetch_upper_bound(isolation_level)
    offset = max(offset, partition.log_start_offset)
    if offset >= upper_bound:
        return LogRead((), (), upper_bound)
    result = partition.log.read(offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch,
                                verify_crc=True)
    batches = tuple(_batches(result.regions))
    aborted: tuple[OffsetRange, ...] = ()
    if isolation_level == READ_COMMITTED and batches:
        aborted = aborted_batches(batches, partition.transaction_index.collect(offset, upper_bound))
    return LogRead(batches, aborted, upper_bound)


def _batches(regions: Sequence[FileRegion]):
    for region in regions:
        position, end = region.position, region.position + region.length
        while position < end:
            fields = HEADER.unpack(os.pread(region.fd, HEADER_SIZE, position))
            size = fields[1] + LOG_OVERHEAD  # batch_length counts from after itself
            attributes = fields[5]
            yield LogBatch(fields[0], fields[0] + fields[6], FileRegion(region.fd, position, size), fields[9],
                           bool(attributes & TRANSACTIONAL_BIT), bool(attributes & CONTROL_BIT))
            position += size


def aborted_batches(batches: Sequence[LogBatch], aborted_transactions) -> tuple[OffsetRange, ...]:
    """The data batches of ``batches`` that belong to one of the aborted transactions (each with
    ``producer_id``, ``first_offset`` and its marker's offset ``last_offset``)."""
    by_producer: dict[int, list[tuple[int, int]]] = {}
    for txn in aborted_transactions:
        by_producer.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    out = []
    for batch in batches:
        if not batch.is_transactional or batch.is_control:
            continue
        for first, marker in by_producer.get(batch.producer_id, ()):
            if first <= batch.first_offset < marker:
                out.append(OffsetRange(batch.first_offset, batch.last_offset))
                break
    return tuple(out)


def regions_for(batches: Sequence[LogBatch], wanted: Sequence[OffsetRange]) -> list[FileRegion]:
    """The file regions of the batches holding any offset of ``wanted`` (ascending ranges), neighbours in
    one file joined: the records a ShareFetch answer carries for what it acquired."""
    out: list[FileRegion] = []
    index = 0
    for batch in batches:
        while index < len(wanted) and wanted[index].last_offset < batch.first_offset:
            index += 1
        if index == len(wanted) or wanted[index].first_offset > batch.last_offset:
            continue
        region = batch.region
        if out and out[-1].fd == region.fd and out[-1].position + out[-1].length == region.position:
            out[-1] = FileRegion(region.fd, out[-1].position, out[-1].length + region.length)
        else:
            out.append(region)
    return out
