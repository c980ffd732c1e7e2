"""CRC checks of the batches a fetch is about to send (issue 38, "Corruption").

The fetch path sends segment bytes with ``sendfile`` and never decodes them, so without this check a bit
flipped on the disk would reach consumers (librdkafka checks CRCs only with ``check.crcs=true``, off by
default) and followers, which would then copy the damage. Recovery cannot catch it either: after a clean
shutdown it reads nothing, and after a crash only the segments past the recovery point.

So every region a Fetch reads is read once more into memory and each batch's CRC-32C is checked before the
regions are handed to the network layer. The regions themselves are still sent with ``sendfile``: the
bytes checked are the page-cache pages ``sendfile`` then reads. The cost is one ``pread`` copy and the CRC
(docs/benchmarks.md, "CRC checks on the fetch path").

What a damaged batch does to a read:
- batches before it are served as usual (they are intact, and a consumer makes progress up to it);
- a read that starts at it fails with :class:`eoslog.records.CorruptRecordError`, which the dispatcher
  answers with CORRUPT_MESSAGE, as Kafka answers a read of a corrupt record. Never the bytes.

The CRC covers bytes 21 to the end of a batch: a flip in base_offset, batch_length or
partition_leader_epoch is outside it (docs/durability.md, "Corruption", says what catches those).

Each refusal is counted (``DAMAGED_BATCH_READS``, per log directory; the metrics endpoint's
``eoslog_log_damaged_batch_reads_total``), but logged at most once per damaged batch per
``REFUSAL_LOG_INTERVAL_S``: a consumer stuck at the batch fetches it again after every back-off
(librdkafka: ``fetch.error.backoff.ms``, 500 ms), and each read used to add an error line.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from collections import Counter

from eoslog.log.region import FileRegion
from eoslog.records import CorruptRecordError, read_header
from eoslog.records.checksum import crc32c

logger = logging.getLogger("eoslog.log")

# One "refusing to serve" line per damaged batch per this many seconds; the reads in between are counted.
REFUSAL_LOG_INTERVAL_S = 60.0
# Damaged batches remembered for the interval: damage is rare, but a disk that rots wholesale must not
# make this grow without bound (past it, the oldest is forgotten and may be logged again early).
REFUSALS_REMEMBERED = 1024
# Reads refused or cut short at a damaged batch, per log directory (the ``what`` of checked_regions).
DAMAGED_BATCH_READS: Counter[str] = Counter()
# (what, inode, byte) -> [monotonic time of its last line, reads refused since that line]
_refusals: dict[tuple[str, int, int], list] = {}
_refusals_lock = threading.Lock()  # fetch reads may run in worker threads as well as on the loop


def _report_refusal(what: str, fd: int, byte: int, problem: str) -> None:
    """Counts a refused read of the batch at ``byte`` and logs it unless it was logged lately."""
    try:
        inode = os.fstat(fd).st_ino  # two segments may both have a damaged batch at the same byte
    except OSError:
        inode = -1
    key = (what, inode, byte)
    now = time.monotonic()
    with _refusals_lock:
        DAMAGED_BATCH_READS[what] += 1
        seen = _refusals.get(key)
        if seen is not None and now - seen[0] < REFUSAL_LOG_INTERVAL_S:
            seen[1] += 1
            return
        quiet = seen[1] if seen is not None else 0
        _refusals.pop(key, None)
        while len(_refusals) >= REFUSALS_REMEMBERED:
            del _refusals[next(iter(_refusals))]
        _refusals[key] = [now, 0]
    since = f" ({quiet} more reads of it refused since the last line)" if quiet else ""
    logger.error("%s: refusing to serve the batch at byte %d of its segment: %s%s", what, byte, problem, since)


# Regions are checked in pieces of at most this many bytes (at least one whole batch), so a large fetch
# does not hold a copy of all it sends.
CHECK_CHUNK = 1024 * 1024


def checked_regions(regions: list[FileRegion], what: str) -> tuple[list[FileRegion], int]:
    """The longest prefix of ``regions`` whose batches all pass their CRC check, and its size in bytes.

    Raises CorruptRecordError when the very first batch fails: there is nothing intact to serve, and the
    reader has to be told. ``what`` names the partition in the error and the log line.
    """
    kept: list[FileRegion] = []
    total = 0
    for region in regions:
        good = _good_prefix(region, what, first=not kept)
        if good:
            kept.append(FileRegion(region.fd, region.position, good))
            total += good
        if good < region.length:
            break
    return kept, total


def _good_prefix(region: FileRegion, what: str, first: bool) -> int:
    """How many bytes from the start of ``region`` are whole batches with a matching CRC."""
    checked = 0
    while checked < region.length:
        position = region.position + checked
        remaining = region.length - checked
        data = os.pread(region.fd, min(CHECK_CHUNK, remaining), position)
        if not data:
            return checked  # the file ends before the region (cut meanwhile): serve what was checked
        if len(data) < remaining and len(data) < _batch_size(data, 0) <= remaining:
            data = os.pread(region.fd, _batch_size(data, 0), position)  # one batch larger than a chunk
        at = _intact_batches(data)
        if at < len(data) and (len(data) >= remaining or at == 0 or _damaged(data, at)):
            bad = checked + at
            problem = _problem(data, at)
            _report_refusal(what, region.fd, region.position + bad, problem)
            if first and bad == 0:
                raise CorruptRecordError(
                    f"{what}: the stored batch at byte {region.position} of its segment is damaged "
                    f"({problem}); the broker will not serve it"
                )
            return bad
        checked += at
    return checked


# batch_length (bytes 8-11), partition_leader_epoch (skipped), magic (16), crc (17-20): the fields the
# check needs, in one unpack; read_header is called only to describe a failure.
_CHECK_FIELDS = struct.Struct(">i4xbI")


def _intact_batches(data: bytes) -> int:
    """Bytes of ``data`` from its start that are whole batches with matching CRCs: the hot loop (a fetch
    checks every batch it sends), kept to one unpack and one CRC call per batch."""
    view = memoryview(data)
    size = len(data)
    at = 0
    unpack, crc = _CHECK_FIELDS.unpack_from, crc32c
    while size - at >= 61:  # HEADER_SIZE
        batch_length, magic, stored = unpack(data, at + 8)
        end = at + 12 + batch_length
        if magic != 2 or batch_length < 49 or end > size or crc(view[at + 21 : end]) != stored:
            return at
        at = end
    return at


def _damaged(data: bytes, at: int) -> bool:
    """Whether what stopped the walk at ``at`` is damage rather than the end of the chunk cutting a batch."""
    size = _batch_size(data, at)
    return len(data) - at >= 12 and (size < 61 or at + size <= len(data))


def _problem(data: bytes, at: int) -> str:
    try:
        read_header(data, at)
    except CorruptRecordError as exc:
        return str(exc)
    return f"batch at byte {at}: cut off"


def _batch_size(data: bytes, at: int) -> int:
    """batch_length + LOG_OVERHEAD of the batch starting at ``at``, or -1 when its header is cut off."""
    if len(data) - at < 12:
        return -1
    return int.from_bytes(data[at + 8 : at + 12], "big", signed=True) + 12
