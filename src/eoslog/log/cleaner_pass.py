"""One cleaning pass over one log, in the cleaner's child process or worker thread (Kafka's Cleaner.doClean).

Contract:
- Reads only immutable bytes: every segment is read through a descriptor dup'ed on the event loop when the
  pass was planned, and only up to the size it had then (non-active segments never change; the active one
  is only read for its markers and only grows). Nothing here touches a ``Log`` or a ``LogSegment``.
- Writes only ``<base>.log.cleaned``, ``<base>.index.cleaned`` and ``<base>.timeindex.cleaned`` files, all
  fsync'ed before ``clean_group`` returns; installing them is the swap's job (cleaner_swap.py), on the loop.
- Runs in one child process (cleaner_worker.py) or one worker thread, one call at a time; in the thread it
  gives the GIL back between batches so the event loop never waits a whole switch interval behind a
  CPU-bound cleaner (see ``_yield_gil``).

Steps: ``prepare`` walks all headers for transaction outcomes (cleaner_filter.TransactionScan), then
builds the key -> offset map over the dirty section (stopping on a batch boundary when the map's memory
budget is reached) and groups the segments to rewrite by size; ``clean_group`` writes one group's
cleaned segment.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from eoslog.log.cleaner_filter import BatchCleaner, Outcome, TransactionScan, map_batch_keys
from eoslog.log.cleaner_offset_map import OffsetMap
from eoslog.log.config import INT_MAX, LogConfig
from eoslog.log.offset_index import OffsetIndex
from eoslog.log.scan import BatchInfo, scan_batches
from eoslog.log.segment import CLEANED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name
from eoslog.log.time_index import TimeIndex
from eoslog.records import decode_batch, read_end_transaction_marker, read_header
from eoslog.records.header import HEADER, HEADER_SIZE, BatchHeader

WRITE_CHUNK = 1024 * 1024
READ_CHUNK = 4 * 1024 * 1024
SCAN_CHUNK = 64 * 1024  # header-only walks


class CleaningAborted(Exception):
    """The pass was stopped (shutdown) or its input changed under it; nothing was installed."""


@dataclass(frozen=True)
class SegmentSource:
    """A segment as planned on the loop: a dup'ed descriptor (owned by the pass) and the size to read."""

    base_offset: int
    fd: int
    size: int
    next_offset: int
    index_entries: int
    time_index_entries: int


@dataclass(frozen=True)
class CleaningPlan:
    directory: str
    config: LogConfig
    segments: tuple[SegmentSource, ...]  # every segment of the log, the active one last
    first_dirty_offset: int
    first_uncleanable_offset: int  # min(LSO, active segment base, min.compaction.lag bound)
    now_ms: int
    map_budget: int
    referenced_markers: frozenset[tuple[int, int]] = frozenset()
    active_producers: frozenset[int] | None = None


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    batches_read: int = 0
    records_read: int = 0
    records_kept: int = 0
    mapped_records: int = 0
    map_bytes: int = 0
    elapsed_s: float = 0.0


@dataclass
class CleanedGroup:
    """One group's output, fsync'ed and ready to swap in for the segments ``replaced_bases``."""

    base_offset: int
    replaced_bases: tuple[int, ...]
    size: int
    batches: int


@dataclass
class PassState:
    plan: CleaningPlan
    map_end: int  # the last offset the offset map covers; the next pass's first dirty offset is this + 1
    groups: list[tuple[SegmentSource, ...]]
    cleaner: BatchCleaner
    offset_map: OffsetMap
    stats: CleanerStats = field(default_factory=CleanerStats)
    next_horizon_ms: int | None = None  # the earliest delete horizon still pending in the output


# The worker hands the GIL over for YIELD_PAUSE_S after every YIELD_EVERY_S of work. time.sleep(0) is not
# enough: the worker usually takes the GIL straight back before the woken loop thread gets it, and the
# loop then waits a whole switch interval (5 ms). A real pause lets the loop run; it costs the cleaner
# about a tenth of its speed (bench/cleaner_bench.py).
YIELD_EVERY_S = 0.001
YIELD_PAUSE_S = 0.0001
_last_yield = 0.0


def _yield_gil() -> None:
    global _last_yield
    now = time.perf_counter()
    if now - _last_yield >= YIELD_EVERY_S:
        time.sleep(YIELD_PAUSE_S)
        _last_yield = time.perf_counter()


def iter_raw_batches(source: SegmentSource, start: int = 0) -> Iterator[tuple[BatchInfo, bytes]]:
    """(header info, whole batch bytes) for every batch of the segment, read in large chunks."""
    fd, end = source.fd, source.size
    buf, buf_start = b"", start
    for info in scan_batches(fd, start, end):
        at = info.position - buf_start
        if at < 0 or at + info.size > len(buf):
            buf_start = info.position
            buf = os.pread(fd, max(info.size, min(READ_CHUNK, end - info.position)), info.position)
            at = 0
        yield info, buf[at : at + info.size]


def scan_transactions(plan: CleaningPlan) -> TransactionScan:
    """Walks every header of the log (markers decoded) for transaction outcomes and producers' last batches."""
    scan = TransactionScan()
    for source in plan.segments:
        fd = source.fd
        buf, buf_start = b"", 0
        for info in scan_batches(fd, 0, source.size):
            at = info.position - buf_start
            if at + HEADER_SIZE > len(buf):
                buf_start, at = info.position, 0
                buf = os.pread(fd, max(HEADER_SIZE, min(SCAN_CHUNK, source.size - info.position)), info.position)
            header = BatchHeader(*HEADER.unpack_from(buf, at), info.position)
            marker = None
            if header.is_control:
                marker = read_end_transaction_marker(os.pread(fd, info.size, info.position), 0)
            scan.add(header, marker)
    return scan.finish()


def prepare(plan: CleaningPlan, should_stop: Callable[[], bool] = lambda: False) -> PassState:
    """Transaction scan, offset map over the dirty section, and the groups of segments to rewrite."""
    started = time.monotonic()
    scan = scan_transactions(plan)
    offset_map = OffsetMap(plan.map_budget)
    stats = CleanerStats()
    map_end = plan.first_dirty_offset - 1
    full = False
    for source in plan.segments:
        # Only segments wholly below the first uncleanable offset are rewritten, so only they are mapped:
        # a mapped but unrewritten record would count as clean in the next pass and never be compared.
        if full or source.next_offset > plan.first_uncleanable_offset:
            break
        if source.next_offset <= plan.first_dirty_offset:
            continue
        for info, raw in iter_raw_batches(source):
            if info.last_offset < plan.first_dirty_offset:
                continue
            if info.last_offset >= plan.first_uncleanable_offset:
                full = True  # not a real "full": the cleanable range ends inside this segment
                break
            batch = decode_batch(raw, 0)
            keys = map_batch_keys(batch, scan)
            if not offset_map.fits([key for key, _ in keys]):
                full = True
                break
            for key, offset in keys:
                offset_map.put(key, offset)
            stats.mapped_records += len(keys)
            map_end = info.last_offset
            _yield_gil()
            if should_stop():
                raise CleaningAborted("cleaner stopping")
    stats.map_bytes = offset_map.bytes_used
    # Rewrite every segment wholly below the first uncleanable offset that starts at or before the map's
    # end: the clean ones before the dirty section too (their superseded records go now).
    last = max(map_end, plan.first_dirty_offset - 1)
    rewrite = [
        s
        for s in plan.segments[:-1]
        if s.next_offset <= plan.first_uncleanable_offset and s.base_offset <= last
    ]
    cleaner = BatchCleaner(
        scan,
        offset_map.get,
        map_end,
        plan.now_ms,
        plan.config.delete_retention_ms,
        plan.referenced_markers,
        plan.active_producers,
    )
    stats.elapsed_s = time.monotonic() - started
    return PassState(plan, map_end, group_by_size(rewrite, plan.config), cleaner, offset_map, stats)


def group_by_size(segments: list[SegmentSource], config: LogConfig) -> list[tuple[SegmentSource, ...]]:
    """Consecutive segments merged while the sum of their sizes fits segment.bytes, their index entries
    fit the index sizes and their offsets fit the int32 relative offsets (Kafka's groupSegmentsBySize)."""
    groups: list[tuple[SegmentSource, ...]] = []
    current: list[SegmentSource] = []
    size = entries = time_entries = 0
    for source in segments:
        if current and (
            size + source.size > config.segment_bytes
            or entries + source.index_entries > config.max_index_entries
            or time_entries + source.time_index_entries > config.max_time_index_entries
            or source.next_offset - 1 - current[0].base_offset > INT_MAX
        ):
            groups.append(tuple(current))
            current, size, entries, time_entries = [], 0, 0, 0
        current.append(source)
        size += source.size
        entries += source.index_entries
        time_entries += source.time_index_entries
    if current:
        groups.append(tuple(current))
    return groups


def cleaned_paths(directory: str, base_offset: int) -> tuple[str, str, str]:
    """The ``.cleaned`` names of a group's log, offset index and time index."""
    stem = os.path.join(directory, segment_file_name(base_offset))
    return (
        stem + LOG_SUFFIX + CLEANED_SUFFIX,
        stem + INDEX_SUFFIX + CLEANED_SUFFIX,
        stem + TIME_INDEX_SUFFIX + CLEANED_SUFFIX,
    )


def remove_cleaned(directory: str, base_offset: int) -> None:
    for path in cleaned_paths(directory, base_offset):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


class _IndexBuilder:
    """The offset and time index of a segment being written, by LogSegment's own spacing rule."""

    def __init__(self, index_path: str, time_index_path: str, base_offset: int, config: LogConfig) -> None:
        self.offset_index = OffsetIndex(index_path, base_offset, config.max_index_entries)
        self.time_index = TimeIndex(time_index_path, base_offset, config.max_time_index_entries)
        self.interval = config.index_interval_bytes
        self.max_timestamp = -1
        self.offset_of_max = base_offset
        self.since_last_entry = 0

    def add(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max = max_timestamp, last_offset
        if self.since_last_entry > self.interval and not self.offset_index.is_full:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max)
            self.since_last_entry = 0
        self.since_last_entry += size

    def finish(self) -> None:
        """The final time entry (as at a roll), then both files written, fsync'ed and closed."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max, skip_full_check=True)
        for index in (self.offset_index, self.time_index):
            index.write_pending()
            os.fsync(index.fd)
            index.close()

    def abandon(self) -> None:
        self.offset_index.close_without_writing()
        self.time_index.close_without_writing()


def clean_group(
    state: PassState, group: tuple[SegmentSource, ...], should_stop: Callable[[], bool] = lambda: False
) -> CleanedGroup:
    """Writes the cleaned copy of ``group`` as ``.cleaned`` files (fsync'ed); returns what to swap in."""
    started = time.monotonic()
    plan, cleaner, stats = state.plan, state.cleaner, state.stats
    base = group[0].base_offset
    remove_cleaned(plan.directory, base)  # a leftover of a pass this process abandoned
    log_path, index_path, time_index_path = cleaned_paths(plan.directory, base)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    indexes = _IndexBuilder(index_path, time_index_path, base, plan.config)
    pending: list[bytes] = []
    pending_size = written = batches = 0
    try:
        for source in group:
            for info, raw in iter_raw_batches(source):
                header = read_header(raw, 0, verify_crc=True)
                stats.bytes_read += info.size
                stats.batches_read += 1
                stats.records_read += header.records_count
                if header.is_control:
                    decided = cleaner.control(header, raw, decode_batch(raw, 0, verify_crc=False))
                elif cleaner.needs_records(header):
                    decided = cleaner.data(header, decode_batch(raw, 0, verify_crc=False))
                else:
                    decided = cleaner.data(header, None)
                if decided.pending_horizon is not None and (
                    state.next_horizon_ms is None or decided.pending_horizon < state.next_horizon_ms
                ):
                    state.next_horizon_ms = decided.pending_horizon
                stats.records_kept += decided.records_after
                if decided.outcome is not Outcome.DROP:
                    out = raw if decided.outcome is Outcome.KEEP else decided.data
                    indexes.add(written, len(out), info.last_offset, read_header(out, 0, verify_crc=False).max_timestamp)
                    pending.append(out)
                    pending_size += len(out)
                    written += len(out)
                    batches += 1
                    if pending_size >= WRITE_CHUNK:
                        _write_all(fd, pending)
                        pending, pending_size = [], 0
                _yield_gil()
                if should_stop():
                    raise CleaningAborted("cleaner stopping")
        _write_all(fd, pending)
        os.fsync(fd)
        indexes.finish()
    except BaseException:
        indexes.abandon()
        os.close(fd)
        remove_cleaned(plan.directory, base)
        raise
    os.close(fd)
    stats.bytes_written += written
    stats.elapsed_s += time.monotonic() - started
    return CleanedGroup(base, tuple(s.base_offset for s in group), written, batches)


def _write_all(fd: int, pieces: list[bytes]) -> None:
    if not pieces:
        return
    view = memoryview(b"".join(pieces))
    while view:
        view = view[os.write(fd, view) :]


def close_sources(plan: CleaningPlan) -> None:
    for source in plan.segments:
        try:
            os.close(source.fd)
        except OSError:
            pass
