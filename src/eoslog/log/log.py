"""Log: one partition's ordered list of segments (Kafka's UnifiedLog, local part).

Contract:
- Owns the partition directory ``<topic>-<partition>/`` and every segment in it; nothing else writes there.
- Always true between calls: segments are sorted by base offset and never overlap; only the last one (the
  active segment) grows; ``log_start_offset <= log_end_offset``; ``recovery_point <= log_end_offset`` and
  every batch below the recovery point has been fsync'ed (file and index).
- Called from one thread, the event loop's. Nothing here blocks on the disk except ``flush`` and ``close``;
  the asyncio path fsyncs through ``prepare_flush`` (loop) -> ``FlushTask.run`` (worker thread) ->
  ``complete_flush`` (loop), which is what ``flusher.GroupCommit`` does.
- Segments removed by retention, DeleteRecords or truncation are renamed ``*.deleted`` and unlinked
  ``file.delete.delay.ms`` later (``delete_expired_files``), so FileRegions already handed out stay valid.
- Never decodes records: it reads and rewrites batch headers only.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import NamedTuple

from eoslog.log.checked_read import checked_regions
from eoslog.log.config import LogConfig, TimestampType
from eoslog.log.errors import (
    InvalidRecordError,
    LogError,
    LogStorageError,
    OffsetOutOfRange,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from eoslog.log.flush_task import LOG_FLUSH_TIME, FlushTask
from eoslog.log.loader import RecoveryReport, load_segments
from eoslog.log.region import FileRegion
from eoslog.log.segment import LogSegment
from eoslog.records import BatchHeader, iter_headers
from eoslog.records.header import (
    BASE_OFFSET,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    log_append_time_header,
    read_header,
)

logger = logging.getLogger("eoslog.log")

# How much read_batches reads at a time: a coordinator load or a producer-state replay walks whole
# segments, so large reads (but at least one batch, whatever its size).
READ_BATCHES_CHUNK = 8 * 1024 * 1024


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    batch_count: int
    byte_size: int


class ReadResult(NamedTuple):
    regions: list[FileRegion]
    size: int

    def to_bytes(self) -> bytes:
        """Copies the regions out (tools and tests; the network layer sends regions as they are)."""
        return b"".join(os.pread(r.fd, r.length, r.position) for r in self.regions)


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


def parse_topic_partition(directory: str) -> tuple[str, int] | None:
    """``/data/orders-3`` -> ("orders", 3); None when the name is not ``<topic>-<partition>``."""
    topic, _, partition = os.path.basename(os.path.normpath(directory)).rpartition("-")
    if not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Log:
    def __init__(
        self,
        directory: str,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        clock: Callable[[], int],
        report: RecoveryReport,
    ) -> None:
        self.directory = directory
        self.config = config
        self.topic_partition = parse_topic_partition(directory)
        self.recovery_report = report
        # Base offsets of stored batches whose CRC fails, found by recovery: refused to readers until a
        # truncation removes them (a follower's repair, cluster/partition.py become_follower).
        self.damaged_batches: list[int] = sorted(report.damaged_batches)
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._clock = clock
        self._roll_listeners: list[Callable[[int], None]] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._directory_dirty = True  # a fresh open may have created or removed files
        self._truncation_epoch = 0
        self._last_flush_ms = clock()
        self._failure: BaseException | None = None
        self._closed = False

    @classmethod
    def open(
        cls,
        directory: str,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        clock: Callable[[], int] | None = None,
        scrub: bool = False,
    ) -> Log:
        """Opens (creating when missing) and recovers a partition directory.

        ``recovery_point`` and ``log_start_offset`` come from the data directory's checkpoint files;
        the default recovery point 0 re-checks every segment, which is always safe. Unless
        ``clean_shutdown`` (the data directory's marker says every log was closed), the last segment is
        always rebuilt, since its indexes are not fsync'ed by routine flushes.
        """
        clock = clock or _now_ms
        loaded = load_segments(
            directory,
            config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
            now_ms=clock(),
            scrub=scrub,
        )
        return cls(
            directory,
            config,
            loaded.segments,
            log_start_offset=loaded.log_start_offset,
            recovery_point=loaded.recovery_point,
            clock=clock,
            report=loaded.report,
        )

    # ---- state ----------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    def flush_due(self, now_ms: int | None = None) -> bool:
        """Whether flush.messages or flush.ms asks for an fsync now (the caller schedules it)."""
        unflushed = self.unflushed_messages
        if unflushed <= 0:
            return False
        now = self._clock() if now_ms is None else now_ms
        return unflushed >= self.config.flush_messages or now - self._last_flush_ms >= self.config.flush_ms

    def on_roll(self, callback: Callable[[int], None]) -> None:
        """``callback(new_base_offset)`` runs after every roll (producer-state snapshots hook in here)."""
        self._roll_listeners.append(callback)

    def _check_usable(self) -> None:
        if self._closed:
            raise LogError(f"{self.directory}: log is closed")
        if self._failure is not None:
            raise LogStorageError(f"{self.directory}: log is offline after an I/O error: {self._failure}")

    # ---- appending ------------------------------------------------------------------------------

    def append(self, records: bytes | bytearray | memoryview, *, now_ms: int | None = None,
               leader_epoch: int | None = None) -> AppendInfo:
        """Appends a Produce request's batches, assigning offsets from log_end_offset.

        Every header is checked (CRC included) before anything is written. The records are not copied:
        each batch is written as its new base offset (for LogAppendTime: its rewritten header, CRC
        recomputed) followed by the rest of the caller's bytes, in one gather write into the page cache.
        ``records`` is only read during the call. Durability is ``flush``'s job. On a replicated
        partition the leader also stamps its ``leader_epoch`` into each batch (bytes 12..16, outside the
        CRC like the base offset), which is what followers' leader-epoch caches are built from.
        """
        self._check_usable()
        view = memoryview(records)
        headers = self._validate(view, check_counts=True)
        return self._append(view, headers, assign_offsets=True, now_ms=now_ms, leader_epoch=leader_epoch)

    def check_batches(self, records: bytes | bytearray | memoryview) -> tuple[memoryview, list[BatchHeader]]:
        """What :meth:`append` checks first (every header and CRC, sizes, record counts), on its own: a
        caller that needs the headers before appending (the partition's producer-state checks) parses
        them once, then hands them to :meth:`append_checked`."""
        self._check_usable()
        view = memoryview(records)
        return view, self._validate(view, check_counts=True)

    def append_checked(self, view: memoryview, headers: list[BatchHeader], *, now_ms: int | None = None,
                       leader_epoch: int | None = None) -> AppendInfo:
        """:meth:`append` of what :meth:`check_batches` returned (same ``view``, unchanged since)."""
        self._check_usable()
        return self._append(view, headers, assign_offsets=True, now_ms=now_ms, leader_epoch=leader_epoch)

    def append_as_is(
        self, records: bytes | bytearray | memoryview, *, now_ms: int | None = None
    ) -> AppendInfo:
        """Appends batches that already carry their offsets (a follower's, fetched from its leader).

        Offsets must start at or after log_end_offset and increase; gaps are allowed.
        """
        self._check_usable()
        view = memoryview(records)
        headers = self._validate(view, check_counts=False)
        return self._append(view, headers, assign_offsets=False, now_ms=now_ms)

    def _validate(self, view: memoryview, *, check_counts: bool) -> list[BatchHeader]:
        if view.nbytes == 0:
            raise InvalidRecordError("no record batches to append")
        first = read_header(view, 0)
        # One batch per partition is what producers send: no generator for the usual case.
        headers = [first] if first.size == view.nbytes else list(iter_headers(view))
        limit = self.config.max_message_bytes - LOG_OVERHEAD
        for header in headers:
            if header.batch_length > limit:
                raise RecordTooLargeError(
                    f"batch of {header.size} bytes exceeds max.message.bytes {self.config.max_message_bytes}"
                )
            if check_counts and header.records_count != header.last_offset_delta + 1:
                raise InvalidRecordError(
                    f"batch at byte {header.position}: {header.records_count} records but "
                    f"last_offset_delta {header.last_offset_delta}"
                )
        if view.nbytes > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"append of {view.nbytes} bytes exceeds segment.bytes {self.config.segment_bytes}"
            )
        return headers

    def _append(
        self, view: memoryview, headers: list[BatchHeader], *, assign_offsets: bool, now_ms: int | None,
        leader_epoch: int | None = None,
    ) -> AppendInfo:
        # No copy of the records: each batch goes out as a new 8-byte base offset (or, for LogAppendTime,
        # a rewritten 61-byte header) followed by a slice of the caller's buffer, in one gather write.
        now = self._clock() if now_ms is None else now_ms
        log_append_time = (
            assign_offsets and self.config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
        )
        next_offset = self.log_end_offset
        first_offset = next_offset if assign_offsets else headers[0].base_offset
        max_timestamp, offset_of_max = NO_TIMESTAMP, first_offset
        batches = []
        pieces: list[bytes | bytearray | memoryview] = [view] if not assign_offsets else []
        for header in headers:
            position = header.position
            size = header.batch_length + LOG_OVERHEAD
            end = position + size
            if assign_offsets:
                base = next_offset
                if log_append_time:
                    header_bytes, rest = log_append_time_header(view, position, end, base, now)
                    if leader_epoch is not None:
                        PARTITION_LEADER_EPOCH.pack_into(header_bytes, 12, leader_epoch)
                    pieces += (header_bytes, rest)
                elif leader_epoch is not None:
                    pieces += (BASE_LENGTH_EPOCH.pack(base, header.batch_length, leader_epoch),
                               view[position + BASE_LENGTH_EPOCH.size : end])
                else:
                    pieces += (BASE_OFFSET.pack(base), view[position + BASE_OFFSET.size : end])
            else:
                base = header.base_offset
                if base < next_offset:
                    raise InvalidRecordError(f"batch offset {base} is below the next offset {next_offset}")
            last = base + header.last_offset_delta
            timestamp = now if log_append_time else header.max_timestamp
            if timestamp > max_timestamp:
                max_timestamp, offset_of_max = timestamp, last
            batches.append((position, size, last, timestamp))
            next_offset = last + 1
        if log_append_time:
            offset_of_max = first_offset
        segment = self._maybe_roll(view.nbytes, max_timestamp, next_offset - 1, now)
        try:
            segment.append(pieces, view.nbytes, batches)
        except (OSError, ValueError) as exc:  # ValueError: an index refused its entry (segment.append)
            self._failure = exc
            raise LogStorageError(f"{segment.log_path}: append failed: {exc}") from exc
        return AppendInfo(
            first_offset,
            next_offset - 1,
            max_timestamp,
            offset_of_max,
            now if log_append_time else NO_TIMESTAMP,
            len(headers),
            view.nbytes,
        )

    def _maybe_roll(self, size: int, max_timestamp: int, last_offset: int, now_ms: int) -> LogSegment:
        segment = self._segments[-1]
        if segment.should_roll(size, max_timestamp, last_offset, now_ms):
            return self.roll(now_ms)
        return segment

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Starts a new active segment at log_end_offset (no-op when the active one is empty)."""
        self._check_usable()
        active = self._segments[-1]
        if active.size == 0:
            return active
        now = self._clock() if now_ms is None else now_ms
        active.on_become_inactive()
        new_base = self.log_end_offset
        segment = LogSegment.create(self.directory, new_base, self.config, now)
        self._segments.append(segment)
        self._bases.append(new_base)
        self._directory_dirty = True
        logger.info("%s: rolled new segment at offset %d", self.directory, new_base)
        for listener in self._roll_listeners:
            listener(new_base)
        return segment

    # ---- reading --------------------------------------------------------------------------------

    def _segment_slot(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def read_batches(self, start_offset: int | None = None,
                     chunk_bytes: int = READ_BATCHES_CHUNK) -> Iterator[tuple[bytes, BatchHeader]]:
        """Every batch from the one holding ``start_offset`` (the log start by default) to the log end, in
        order and each once, as (the bytes holding it, its header; ``header.position`` is where it starts in
        them). The one reader for everyone who walks a log in order: coordinators loading their internal
        partitions, producer-state recovery. Reads ``chunk_bytes`` at a time, at least one batch; CRCs are
        not checked here (decode with ``verify_crc`` where the records are wanted); a damaged batch (its
        producer id or control bit may be the flipped bits) is skipped."""
        offset = self.log_start_offset if start_offset is None else start_offset
        while offset < self.log_end_offset:
            result = self.read(offset, chunk_bytes, min_one_batch=True)
            if not result.regions:
                return
            for region in result.regions:
                data = os.pread(region.fd, region.length, region.position)
                for header in iter_headers(data, verify_crc=False):
                    # A read starts at the batch holding ``offset``, which may begin before it.
                    if header.last_offset >= offset:
                        if header.base_offset not in self.damaged_batches:  # a short list, empty but for rot
                            yield data, header
                        offset = header.last_offset + 1

    def read(
        self, start_offset: int, max_bytes: int, upper_bound: int | None = None, min_one_batch: bool = True,
        *, verify_crc: bool = False,
    ) -> ReadResult:
        """Whole batches from the one holding ``start_offset`` (it may begin before it), up to
        ``max_bytes`` (but at least one batch when ``min_one_batch``), stopping before any batch whose
        last offset reaches ``upper_bound`` (the high watermark or LSO; exclusive).

        ``verify_crc`` (reads that leave the broker: fetches): only the batches before the first one
        failing its CRC check; CorruptRecordError if that is the first (log/checked_read.py)."""
        self._check_usable()
        if start_offset < self._log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRange(start_offset, self._log_start_offset, self.log_end_offset, self.directory)
        if upper_bound is not None and start_offset >= upper_bound:
            # A caught-up fetcher, the common case with many partitions: no segment lookup for nothing.
            return ReadResult([], 0)
        regions: list[FileRegion] = []
        total = 0
        slot = self._segment_slot(start_offset)
        offset = start_offset
        while slot < len(self._segments):
            segment = self._segments[slot]
            region = segment.read(offset, max_bytes - total, upper_bound, min_one_batch and not regions)
            if region is None:
                if offset < segment.next_offset:
                    break  # stopped by max_bytes or upper_bound, not by the end of the segment
            else:
                regions.append(region)
                total += region.length
                if region.position + region.length < segment.size:
                    break
            slot += 1
            if slot < len(self._segments):
                offset = self._segments[slot].base_offset
        if verify_crc and regions:
            regions, total = checked_regions(regions, self.directory)
        return ReadResult(regions, total)

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """The first batch whose max timestamp is >= ``timestamp`` (ListOffsets by time).

        Batch granularity, since records are never decoded here: the offset is the batch's base offset
        (or the log start offset inside it), the timestamp the batch's max timestamp.
        """
        self._check_usable()
        for segment in self._segments:
            if segment.next_offset <= self._log_start_offset or segment.max_timestamp < timestamp:
                continue
            batch = segment.find_timestamp(timestamp, self._log_start_offset)
            if batch is not None:
                return OffsetAndTimestamp(max(batch.base_offset, self._log_start_offset), batch.max_timestamp)
        return None

    def max_timestamp_and_offset(self) -> OffsetAndTimestamp | None:
        """The largest timestamp in the log and the last offset of the batch holding it (ListOffsets
        MAX_TIMESTAMP); None when no batch carries a timestamp."""
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        return OffsetAndTimestamp(best.offset_of_max_timestamp, best.max_timestamp)

    # ---- retention, DeleteRecords, truncation ---------------------------------------------------

    def apply_retention(self, now_ms: int | None = None, *, high_watermark: int | None = None) -> int:
        """Deletes whole old segments (never the active one) that are below the log start offset, older
        than retention.ms (by their largest timestamp) or beyond retention.bytes; returns how many.
        With ``high_watermark`` only segments wholly below it are candidates."""
        self._check_usable()
        now = self._clock() if now_ms is None else now_ms
        self.delete_expired_files(now)
        deleted = self._delete_prefix(
            lambda seg, nxt: nxt.base_offset <= self._log_start_offset,
            "below the log start offset",
            high_watermark,
            now,
        )
        if not self.config.deletes:
            return deleted
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_prefix(
                lambda seg, nxt: now - seg.largest_timestamp > retention_ms,
                f"older than retention.ms {retention_ms}",
                high_watermark,
                now,
            )
        if self.config.retention_bytes >= 0:
            excess = self.size - self.config.retention_bytes

            def over_size(segment: LogSegment, _next: LogSegment) -> bool:
                nonlocal excess
                if excess - segment.size < 0:
                    return False
                excess -= segment.size
                return True

            deleted += self._delete_prefix(
                over_size, f"beyond retention.bytes {self.config.retention_bytes}", high_watermark, now
            )
        return deleted

    def _delete_prefix(
        self,
        predicate: Callable[[LogSegment, LogSegment], bool],
        reason: str,
        high_watermark: int | None,
        now_ms: int,
    ) -> int:
        victims = []
        for segment, following in zip(self._segments, self._segments[1:]):
            if high_watermark is not None and following.base_offset > high_watermark:
                break
            if not predicate(segment, following):
                break
            victims.append(segment)
        if victims:
            logger.info(
                "%s: deleting %d segment(s) %s: %s",
                self.directory,
                len(victims),
                reason,
                [s.base_offset for s in victims],
            )
            self._remove_segments(victims, now_ms)
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        return len(victims)

    def delete_records_before(self, offset: int, *, now_ms: int | None = None) -> int:
        """DeleteRecords: advances the log start offset to ``offset`` and deletes segments wholly below it.
        Returns the new log start offset. The caller keeps ``offset`` at or below the high watermark."""
        self._check_usable()
        if offset > self.log_end_offset or offset < 0:
            raise OffsetOutOfRange(offset, self._log_start_offset, self.log_end_offset, self.directory)
        if offset <= self._log_start_offset:
            return self._log_start_offset
        now = self._clock() if now_ms is None else now_ms
        self._log_start_offset = offset
        self._delete_prefix(
            lambda seg, nxt: nxt.base_offset <= offset, "below the log start offset", None, now
        )
        return self._log_start_offset

    def _remove_segments(self, victims: list[LogSegment], now_ms: int) -> None:
        gone = {id(s) for s in victims}
        self._segments = [s for s in self._segments if id(s) not in gone]
        self._bases = [s.base_offset for s in self._segments]
        self._directory_dirty = True
        delay = self.config.file_delete_delay_ms
        for segment in victims:
            if delay == 0:
                segment.delete_files()
            else:
                segment.rename_to_deleted()
                self._pending_deletes.append((now_ms + delay, segment))

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Unlinks ``*.deleted`` segments whose file.delete.delay.ms has passed; returns how many."""
        if not self._pending_deletes:
            return 0  # the usual case, checked for every log every second: no lists built for nothing
        now = self._clock() if now_ms is None else now_ms
        due = [s for when, s in self._pending_deletes if when <= now]
        self._pending_deletes = [(when, s) for when, s in self._pending_deletes if when > now]
        for segment in due:
            segment.delete_files()
        return len(due)

    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> bool:
        """Removes everything from the batch holding ``offset`` on (a follower's or an aborted append's
        truncation); returns whether anything was removed. log_end_offset ends on a batch boundary."""
        self._check_usable()
        if offset >= self.log_end_offset:
            return False
        now = self._clock() if now_ms is None else now_ms
        if offset <= self._segments[0].base_offset or offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset, now_ms=now)
            return True
        self._truncation_epoch += 1
        self.damaged_batches = [d for d in self.damaged_batches if d < offset]
        doomed = [s for s in self._segments[1:] if s.base_offset >= offset]
        if doomed:
            self._remove_segments(doomed, now)
        self._segments[-1].truncate_to(offset)
        self._recovery_point = min(self._recovery_point, self.log_end_offset)
        logger.info(
            "%s: truncated to offset %d (log end offset %d)", self.directory, offset, self.log_end_offset
        )
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Removes every segment and starts an empty log at ``offset``."""
        self._check_usable()
        now = self._clock() if now_ms is None else now_ms
        self._truncation_epoch += 1
        self.damaged_batches = []
        self._remove_segments(list(self._segments), now)  # renamed away first: the new name may be taken
        self._segments = [LogSegment.create(self.directory, offset, self.config, now)]
        self._bases = [s.base_offset for s in self._segments]
        self._log_start_offset = offset
        self._recovery_point = offset
        self._directory_dirty = True

    # ---- the log cleaner's swap (log/cleaner_swap.py drives it; docs/storage-format.md, "Cleaning") ----

    @property
    def truncation_epoch(self) -> int:
        """Changes whenever the log is truncated: a cleaner pass planned before must not be swapped in."""
        return self._truncation_epoch

    def replace_segments(
        self, old: list[LogSegment], install: Callable[[], LogSegment], *, now_ms: int | None = None
    ) -> LogSegment:
        """Replaces consecutive non-active segments ``old`` by the one ``install()`` opens, in one step on
        the loop. The old files are renamed ``*.deleted`` (or unlinked) first, so ``install`` may move the
        new files to their names; FileRegions of the old segments stay valid until the delete delay.
        Any OSError takes the log offline: recovery at the next open completes or rolls back the swap."""
        self._check_usable()
        slot = next((i for i, s in enumerate(self._segments) if s is old[0]), None)
        if slot is None or self._segments[slot : slot + len(old)] != old or slot + len(old) >= len(
            self._segments
        ):
            raise LogError(f"{self.directory}: segments to replace are not consecutive non-active segments")
        now = self._clock() if now_ms is None else now_ms
        try:
            self._remove_segments(list(old), now)
            segment = install()
        except OSError as exc:
            self._failure = exc
            raise LogStorageError(f"{self.directory}: segment swap failed: {exc}") from exc
        self._segments.insert(slot, segment)
        self._bases = [s.base_offset for s in self._segments]
        self._directory_dirty = True
        return segment

    # ---- flushing and closing -------------------------------------------------------------------

    def prepare_flush(self, up_to: int | None = None, *, include_active_indexes: bool = False,
                      descriptors: bool = True, every_file: bool = False) -> FlushTask:
        """On the loop: writes pending index entries and collects what an fsync must cover for every
        offset below ``up_to`` (default: log_end_offset). The active segment's indexes are synced only
        when asked (at close); see LogSegment.sync_fds.

        ``descriptors=False`` prepares a round that one syncfs of the whole filesystem covers: the task
        holds no descriptors and no directory, and is not run; the caller syncs, then sets ``synced`` and
        completes it. ``every_file`` collects every file from the recovery point on, and the directory,
        whatever was marked synced (the per-file fsyncs that follow a failed syncfs)."""
        self._check_usable()
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        fds: list[int] = []
        if target > self._recovery_point or every_file:
            for segment in self._segments[self._segment_slot(self._recovery_point) :]:
                if segment.base_offset >= target and segment is not self._segments[-1]:
                    break
                active = segment is self._segments[-1]
                fds.extend(segment.sync_fds(include_indexes=include_active_indexes or not active,
                                            descriptors=descriptors, every_file=every_file))
        directory = self.directory if (self._directory_dirty or every_file) and descriptors else None
        self._directory_dirty = False
        return FlushTask(target, self._truncation_epoch, fds, directory)

    def complete_flush(self, task: FlushTask) -> None:
        """On the loop, after ``task.run()`` succeeded: advances the recovery point."""
        if task.synced:
            LOG_FLUSH_TIME.observe(task.seconds)
        if task.truncation_epoch == self._truncation_epoch:
            self._recovery_point = max(self._recovery_point, min(task.up_to, self.log_end_offset))
        self._last_flush_ms = self._clock()

    def fail_flush(self, task: FlushTask, exc: BaseException) -> LogStorageError:
        """On the loop, after ``task.run()`` raised: takes the log offline (see LogStorageError)."""
        self._failure = exc
        logger.error("%s: fsync failed, log is offline: %s", self.directory, exc)
        return LogStorageError(f"{self.directory}: fsync failed: {exc}")

    def flush(self, up_to: int | None = None, *, include_active_indexes: bool = False) -> None:
        """fsyncs everything below ``up_to`` in this thread (blocking) and advances the recovery point."""
        task = self.prepare_flush(up_to, include_active_indexes=include_active_indexes)
        try:
            task.run()
        except OSError as exc:
            raise self.fail_flush(task, exc) from exc
        self.complete_flush(task)

    def close(self, *, flush: bool = True) -> None:
        """Flushes (a clean shutdown leaves recovery_point == log_end_offset) and closes every file;
        ``flush=False`` only closes them, for a log about to be deleted."""
        if self._closed:
            return
        try:
            if flush and self._failure is None:
                self._segments[-1].on_become_inactive()
                self.flush(include_active_indexes=True)
        finally:
            self._closed = True
            for segment in self._segments:
                segment.close()
            for _, segment in self._pending_deletes:
                segment.delete_files()
            self._pending_deletes = []

    def __repr__(self) -> str:
        return (
            f"Log({self.directory!r}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self._segments)})"
        )


# base_offset, batch_length, partition_leader_epoch: the first 16 bytes of a batch, none under the CRC.
BASE_LENGTH_EPOCH = struct.Struct(">qii")
PARTITION_LEADER_EPOCH = struct.Struct(">i")
