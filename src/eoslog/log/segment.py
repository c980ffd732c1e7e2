"""LogSegment: one ``.log`` file of whole batches plus its ``.index`` and ``.timeindex`` (Kafka's LogSegment).

Contract:
- Owns three file descriptors: the ``.log`` file (opened O_APPEND; an append is one ``os.writev`` call
  into the page cache, never fsync'ed here) and the two index files. The ``.log`` descriptor is also what
  ``FileRegion``s returned by ``read`` point at; it stays open until ``close``.
- Always true between calls: the file holds ``size`` bytes of whole batches whose offsets increase and
  lie in [base_offset, next_offset); index entries point at batch starts inside the file; ``max_timestamp``
  / ``offset_of_max_timestamp`` describe the largest batch timestamp in the segment.
- Called from the event-loop thread only. ``sync_fds`` hands out dup'ed descriptors so the fsync itself
  can run in a worker thread while appends continue.
- Names and layouts: docs/storage-format.md (".log", ".index", ".timeindex").
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence

from eoslog.log.config import INT_MAX, LogConfig
from eoslog.log.offset_index import OffsetIndex
from eoslog.log.region import FileRegion
from eoslog.log.scan import BatchInfo, recover_batches, scan_batches
from eoslog.log.time_index import TimeIndex
from eoslog.records import CorruptRecordError
from eoslog.records.header import HEADER, HEADER_SIZE, NO_TIMESTAMP, BatchHeader

logger = logging.getLogger("eoslog.log")

# File name suffixes (docs/storage-format.md, "Files of a partition directory").
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"  # renamed on deletion, unlinked file.delete.delay.ms later
CLEANED_SUFFIX = ".cleaned"  # a cleaner's unfinished output: discarded by recovery
SWAP_SUFFIX = ".swap"  # a cleaner's finished output waiting to replace segments: completed by recovery
OFFSET_DIGITS = 20


def segment_file_name(base_offset: int) -> str:
    """``00000000000000000042``: the base offset, zero-padded so names sort like offsets."""
    return f"{base_offset:0{OFFSET_DIGITS}d}"


IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024

# Disk blocks are reserved ahead of the active segment's end (fallocate with FALLOC_FL_KEEP_SIZE, so the
# file's size, and everything recovery reads, stays that of its batches): with ext4's delayed
# allocation an append that needs new blocks waits while writeback or an fsync of the same file holds
# the allocation lock, and that wait blocked the event loop (docs/benchmarks.md, "Where a produce
# request's time goes"). The reservation grows with the segment (as much again as it holds, at least
# PREALLOCATE_MIN, at most PREALLOCATE_MAX) and is handed back when the segment stops being active.
PREALLOCATE_MIN = 1 << 20
PREALLOCATE_MAX = 16 << 20
_FALLOC_FL_KEEP_SIZE = 1
_fallocate = None  # libc's fallocate(2) once looked up; False where there is none


def preallocate(fd: int, offset: int, length: int) -> bool:
    """Reserves blocks for [offset, offset + length) without changing the file's size. False when the
    platform or filesystem cannot (or the disk is full): then appends simply allocate as they go."""
    global _fallocate
    if _fallocate is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols, libc's among them (syncfs.py)
            function = libc.fallocate
            function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
            function.restype = ctypes.c_int
            _fallocate = function
        except (OSError, AttributeError):
            _fallocate = False
    return bool(_fallocate) and _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0


def write_fully(fd: int, pieces: Sequence[bytes | bytearray | memoryview], size: int) -> None:
    """``os.writev`` of every piece (``size`` bytes in all), in IOV_MAX-sized groups, resuming after short
    writes. The usual case is one system call."""
    pending = pieces
    remaining = size
    while True:
        written = os.writev(fd, pending[:IOV_MAX])
        remaining -= written
        if remaining <= 0:
            return
        pending = list(pending)
        done = 0
        for piece in pending:
            length = len(piece)
            if written < length:
                break
            written -= length
            done += 1
        del pending[:done]
        if written:  # the write ended inside this piece
            pending[0] = memoryview(pending[0])[written:]


class LogSegment:
    def __init__(
        self, directory: str, base_offset: int, config: LogConfig, *, create: bool, now_ms: int
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        stem = os.path.join(directory, segment_file_name(base_offset))
        self.log_path = stem + LOG_SUFFIX
        self.index_missing = not os.path.exists(stem + INDEX_SUFFIX)
        self.time_index_missing = not os.path.exists(stem + TIME_INDEX_SUFFIX)
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(self.log_path, flags, 0o644)
        self.offset_index = OffsetIndex(stem + INDEX_SUFFIX, base_offset, config.max_index_entries)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX, base_offset, config.max_time_index_entries)
        stat = os.fstat(self.fd)
        self.size = stat.st_size
        self.created_ms = now_ms if create else int(stat.st_mtime * 1000)
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._log_synced = not create
        # Bytes of the .log file with blocks reserved (see preallocate); None: do not preallocate.
        self._allocated: int | None = self.size

    @classmethod
    def create(cls, directory: str, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        return cls(directory, base_offset, config, create=True, now_ms=now_ms)

    @classmethod
    def open(cls, directory: str, base_offset: int, config: LogConfig) -> LogSegment:
        """Opens existing files and loads the indexes as found; the caller checks or recovers them."""
        return cls(directory, base_offset, config, create=False, now_ms=0)

    # ---- loading and recovery -------------------------------------------------------------------

    def load_indexes(self, next_segment_base: int | None) -> str | None:
        """Loads both index files and restores the tail state; returns why a rebuild is needed, or None."""
        if self.index_missing or self.time_index_missing:
            return "index file missing" if self.index_missing else "time index file missing"
        problem = self.offset_index.load() or self.time_index.load()
        problem = problem or self.offset_index.check(self.size, next_segment_base)
        if problem:
            return problem
        try:
            self.restore_tail_state(check_crc=True)
        except CorruptRecordError as exc:
            return f"{self.log_path}: {exc}"
        if next_segment_base is not None and self.next_offset > next_segment_base:
            return f"{self.log_path}: offsets run into the next segment at {next_segment_base}"
        return self.time_index.check(self.next_offset)

    def restore_tail_state(self, *, check_crc: bool = False) -> None:
        """Recomputes next_offset, max timestamp and index spacing by walking the batches after the last
        offset-index entry (the time index covers every batch up to that entry).

        ``check_crc`` (opening a segment recovery would otherwise not re-read, after a clean shutdown): the
        walk checks each batch's CRC and raises CorruptRecordError at a damaged one, so the caller recovers
        the segment, which keeps and settles it (scan._damaged_header). The fields this walk takes (last
        offset delta, max timestamp) lie in the CRC-covered bytes: one flipped bit there became the log end
        offset or the segment's max timestamp, and the next append failed its time-index check after its
        bytes were written, wedging the partition (docs/durability.md, "Corruption")."""
        last_timestamp = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = last_timestamp.timestamp, last_timestamp.offset
        start = self.offset_index.last_entry().position
        self.next_offset = self.base_offset
        self._bytes_since_last_index_entry = 0
        walk = recover_batches(self.fd, start, self.size) if check_crc else scan_batches(self.fd, start, self.size)
        for batch in walk:
            self._note_batch(batch.last_offset, batch.max_timestamp)
            self._bytes_since_last_index_entry += batch.size
        self._rolling_based_timestamp = None

    def recover(self, keep_damaged_below: int | None = None, damaged: list[int] | None = None) -> int:
        """Rebuilds both indexes from the batches, CRC-checking each; truncates the file at the first bad
        or incomplete batch. Returns the number of bytes cut off. A batch below ``keep_damaged_below`` that
        fails only its CRC is kept and its base offset added to ``damaged`` (scan.recover_batches)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self.next_offset = self.base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        valid_end = 0
        damaged = [] if damaged is None else damaged
        known = len(damaged)
        try:
            for header in recover_batches(
                self.fd, 0, self.size, keep_damaged_below=keep_damaged_below, damaged=damaged
            ):
                is_damaged, known = len(damaged) > known, len(damaged)  # the walk lists one as it yields it
                if header.base_offset < self.next_offset or header.last_offset - self.base_offset > INT_MAX:
                    raise CorruptRecordError(
                        f"batch at byte {header.position}: base offset {header.base_offset} out of order "
                        f"(expected >= {self.next_offset})"
                    )
                if is_damaged:
                    self._settle_damaged_header(header)
                self._index_batch(header.position, header.size, header.last_offset, header.max_timestamp)
                valid_end = header.position + header.size
        except CorruptRecordError as exc:
            logger.warning("%s: stopping recovery at byte %d: %s", self.log_path, valid_end, exc)
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
            self._log_synced = False
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.write_pending()
        self.time_index.write_pending()
        self.index_missing = self.time_index_missing = False
        return truncated

    def _settle_damaged_header(self, header: BatchHeader) -> None:
        """Writes the offsets recovery settled on (scan._damaged_header) into a kept damaged batch.

        Its last_offset_delta, max_timestamp and records_count lie in the damaged bytes: left as they are,
        one flipped bit there makes every header walk (offset lookups, producer-state rebuilds) believe the
        batch ends thousands of offsets later, or stop at a negative count. Rewritten, every walk agrees
        with the index; the CRC still fails, so the batch is still refused to every reader. Fsync'ed."""
        position = header.position
        fields = HEADER.unpack(os.pread(self.fd, HEADER_SIZE, position))
        settled = (*fields[:6], header.last_offset_delta, fields[7], header.max_timestamp, *fields[9:12],
                   header.records_count)
        if settled != fields:
            # A descriptor of its own: self.fd is O_APPEND, where Linux's pwrite ignores the offset.
            fd = os.open(self.log_path, os.O_WRONLY)
            try:
                os.pwrite(fd, HEADER.pack(*settled), position)
                os.fsync(fd)
            finally:
                os.close(fd)
            logger.warning("%s: damaged batch at byte %d: header settled to offsets %d..%d",
                           self.log_path, position, header.base_offset, header.last_offset)

    # ---- appending ------------------------------------------------------------------------------

    def should_roll(self, append_size: int, max_timestamp: int, last_offset: int, now_ms: int) -> bool:
        """Kafka's roll rule: the append would overflow segment.bytes, the segment is older than
        segment.ms (by the first batch's timestamp, else creation time), an index is full, or an offset
        would not fit the int32 relative offsets."""
        if self.size == 0:
            return False
        if self.size > self.config.segment_bytes - append_size:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        if last_offset - self.base_offset > INT_MAX:
            return True
        first = self._first_batch_timestamp()
        waited = max_timestamp - first if first >= 0 else now_ms - self.created_ms
        return waited > self.config.segment_ms

    def append(
        self,
        pieces: Sequence[bytes | bytearray | memoryview],
        size: int,
        batches: Sequence[tuple[int, int, int, int]],
    ) -> None:
        """Writes ``pieces`` (together ``size`` bytes of whole batches, offsets assigned) at the end of the
        file with gather writes, and indexes them.

        ``batches`` holds (position within the appended bytes, size, last_offset, max_timestamp) per
        batch. If a write fails the file is cut back, so it never ends in a partial batch.
        """
        physical = self.size
        if self._allocated is not None and physical + size > self._allocated:
            self._reserve(physical + size)
        try:
            write_fully(self.fd, pieces, size)
        except OSError:
            os.ftruncate(self.fd, physical)
            raise
        self._log_synced = False
        try:
            for position, batch_size, last_offset, max_timestamp in batches:
                self._index_batch(physical + position, batch_size, last_offset, max_timestamp)
        except ValueError:
            # An index refused the entry (an invariant broken, e.g. by a trusted damaged header): the
            # bytes must not stay in the file, where the next recovery would find an append whose
            # producer was told it failed and whose producer state was never applied. The caller takes
            # the log offline (Log._append), so the half-updated in-memory state is never used.
            os.ftruncate(self.fd, physical)
            raise
        self.size = physical + size

    def _reserve(self, end: int) -> None:
        ahead = min(max(end, PREALLOCATE_MIN), PREALLOCATE_MAX)
        target = max(end, min(end + ahead, self.config.segment_bytes))
        if preallocate(self.fd, self._allocated, target - self._allocated):
            self._allocated = target
        else:
            self._allocated = None  # not supported here (or no space): stop trying for this segment

    def release_preallocated(self) -> None:
        """Hands back the blocks reserved past the last batch (the segment takes no more appends)."""
        if self._allocated is not None and self._allocated > self.size and self.fd >= 0:
            stat = os.fstat(self.fd)
            os.ftruncate(self.fd, self.size)
            # ftruncate stamps the file's mtime, which stands in for the segment's age on a restart
            os.utime(self.fd, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        self._allocated = None

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        self.next_offset = last_offset + 1
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def _note_batch(self, last_offset: int, max_timestamp: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        self.next_offset = last_offset + 1

    def _first_batch_timestamp(self) -> int:
        if self._rolling_based_timestamp is None:
            raw = os.pread(self.fd, HEADER_SIZE, 0)
            self._rolling_based_timestamp = (
                HEADER.unpack_from(raw)[8] if len(raw) == HEADER_SIZE else NO_TIMESTAMP
            )
        return self._rolling_based_timestamp

    def on_become_inactive(self) -> None:
        """At roll: the final time-index entry records the segment's largest timestamp (used by
        retention and time lookups after a restart), then the indexes go to the file."""
        self.release_preallocated()
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.write_pending()
        self.time_index.write_pending()

    # ---- reading --------------------------------------------------------------------------------

    def find_batch(self, offset: int) -> BatchInfo | None:
        """The first batch whose last offset is >= ``offset`` (Kafka's translateOffset)."""
        if offset >= self.next_offset:
            return None
        start = self.offset_index.lookup(offset).position
        found = None
        for batch in scan_batches(self.fd, start, self.size):
            # A batch's last offset is read from bytes its CRC covers, unchecked here: one flipped bit makes
            # a damaged batch claim the offsets of the batches after it (a clean restart re-reads nothing,
            # docs/durability.md, "Corruption"). The next batch's base offset has the last word, on which
            # batch holds ``offset`` and on where the found one ends: a read bounded by the high watermark
            # or the LSO must see a damaged batch end there, or it stops before it without an error and a
            # read_committed consumer waits at it forever instead of being refused.
            if found is not None:
                if batch.base_offset > offset:
                    if found.last_offset >= batch.base_offset:
                        return found._replace(last_offset=batch.base_offset - 1)
                    return found
                found = None
            if batch.last_offset >= offset:
                found = batch
        return found

    def find_timestamp(self, timestamp: int, min_offset: int = 0) -> BatchInfo | None:
        """The first batch whose max timestamp is >= ``timestamp`` and whose last offset >= ``min_offset``."""
        if self.max_timestamp < timestamp:
            return None
        before = self.time_index.lookup_before(timestamp)
        start = self.offset_index.lookup(max(before.offset, min_offset)).position
        for batch in scan_batches(self.fd, start, self.size):
            if batch.max_timestamp >= timestamp and batch.last_offset >= min_offset:
                return batch
        return None

    def batches(self, start_position: int = 0) -> Iterable[BatchInfo]:
        return scan_batches(self.fd, start_position, self.size)

    def read(
        self, start_offset: int, max_bytes: int, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> FileRegion | None:
        """Whole batches from the one holding ``start_offset``: as many as fit in ``max_bytes`` (at least
        one if ``min_one_batch``, KIP-74), none whose last offset reaches ``upper_bound`` (exclusive)."""
        first = self.find_batch(start_offset)
        if first is None:
            return None
        limit = self.size
        if upper_bound is not None:
            if first.last_offset >= upper_bound:
                return None
            if upper_bound < self.next_offset:
                cut = self.find_batch(upper_bound)
                limit = cut.position if cut is not None else self.size
        end = self._boundary_at_or_before(min(limit, first.position + max(max_bytes, 0)), first)
        if end == first.position:
            if not min_one_batch:
                return None
            end = first.end
        return FileRegion(self.fd, first.position, end - first.position)

    def _boundary_at_or_before(self, target: int, first: BatchInfo) -> int:
        if target >= self.size:
            return self.size
        position = max(first.position, self.offset_index.lookup_position(target))
        for batch in scan_batches(self.fd, position, self.size):
            if batch.end > target:
                return batch.position
        return self.size

    def read_bytes(self, position: int, length: int) -> bytes:
        return os.pread(self.fd, length, position)

    # ---- truncation, flushing, deletion ---------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Removes the batch holding ``offset`` and everything after it; returns the bytes removed."""
        batch = self.find_batch(offset)
        if batch is None:
            return 0
        removed = self.size - batch.position
        os.ftruncate(self.fd, batch.position)  # also frees any blocks reserved past the end
        self.size = batch.position
        if self._allocated is not None:
            self._allocated = self.size
        self._log_synced = False
        self.offset_index.truncate_to(batch.base_offset)
        self.time_index.truncate_to(batch.base_offset)
        self.restore_tail_state()
        if self.size == 0:
            self.next_offset = self.base_offset
        return removed

    @property
    def largest_timestamp(self) -> int:
        """For retention: the largest batch timestamp, or the file's mtime when no batch has one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.fd).st_mtime * 1000)

    def sync_fds(self, include_indexes: bool = True, *, descriptors: bool = True, every_file: bool = False) -> list[int]:
        """Dup'ed descriptors of the files written since the last call, for a worker thread to fsync and
        close. Index entries are written out first. The active segment's indexes are left out of the
        routine flushes (``include_indexes=False``): after an unclean shutdown the last segment is
        rebuilt from its batches anyway, so syncing them per acks=all flush would only cost fsyncs.

        ``descriptors=False``: the caller syncs the whole filesystem instead (syncfs), so the files are only
        marked synced and nothing is dup'ed. ``every_file``: all of them, written since the last call or not
        (after a failed syncfs nothing marked since then is known to be durable)."""
        fds = []
        if every_file or not self._log_synced:
            if descriptors:
                fds.append(os.dup(self.fd))
            self._log_synced = True
        for index in (self.offset_index, self.time_index) if include_indexes or every_file else ():
            if index.write_pending() or every_file:
                if descriptors:
                    fds.append(os.dup(index.fd))
                index.mark_synced()
        return fds

    def rename_to_deleted(self) -> None:
        """First step of a deferred delete: the files leave the segment namespace but stay open."""
        os.rename(self.log_path, self.log_path + DELETED_SUFFIX)
        self.log_path += DELETED_SUFFIX
        for index in (self.offset_index, self.time_index):
            index.rename(index.path + DELETED_SUFFIX)

    def close(self) -> None:
        if self.fd >= 0:
            self.release_preallocated()
            os.close(self.fd)
            self.fd = -1
        self.offset_index.close()
        self.time_index.close()

    def delete_files(self) -> None:
        """Closes and unlinks the files (wherever they are named now)."""
        self.offset_index.close_without_writing()
        self.time_index.close_without_writing()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"
