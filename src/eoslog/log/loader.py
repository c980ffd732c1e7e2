"""Opening a partition directory after a clean or an unclean shutdown (Kafka's LogLoader).

What recovery does, in order (docs/storage-format.md, "Recovery"):
1. ``*.deleted`` and ``*.cleaned`` files are removed: a deletion that was under way, a cleaner's unfinished
   output. Index files without their ``.log`` are removed.
2. A ``NNN.log.swap`` is a cleaner's finished output: the segments it replaces are removed and it is
   renamed to ``NNN.log``; its indexes are rebuilt (index ``.swap`` files are dropped).
3. Every segment's index files are loaded and sanity-checked (size a multiple of the entry size, entries
   increasing, positions inside the file, offsets below the next segment). A segment whose indexes fail,
   that holds offsets at or past the recovery point, or that is the last one after an unclean shutdown
   (its indexes are not fsync'ed by routine flushes), is *recovered*: its batches are read back with CRC
   checks, the file is cut at the first incomplete or CRC-failing batch, and both indexes are rebuilt.
   A batch below the recovery point that fails only its CRC was fsync'ed whole, so it is rot, not a
   torn tail: it is kept, reported (``damaged_batches``) and refused to fetches (log/checked_read.py).
   With ``scrub`` (cluster replicas) every segment is checked so, not only the ones listed above.
4. When an unflushed segment had to be cut, every later segment is removed (their data came after a hole).
5. The log start offset is at least the first segment's base offset; segments wholly below it go.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from eoslog.log.config import LogConfig
from eoslog.log.scan import recover_batches
from eoslog.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    OFFSET_DIGITS,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from eoslog.records import CorruptRecordError

logger = logging.getLogger("eoslog.log")


@dataclass
class RecoveryReport:
    """What opening the log changed on disk; empty after a clean shutdown."""

    directory: str
    recovered_segments: list[int] = field(default_factory=list)
    truncated_bytes: int = 0
    rebuilt_indexes: list[tuple[int, str]] = field(default_factory=list)
    deleted_segments: list[int] = field(default_factory=list)
    removed_files: list[str] = field(default_factory=list)
    completed_swaps: list[int] = field(default_factory=list)
    # Base offsets of fsync'ed batches whose CRC fails: kept, refused to readers (docs/durability.md)
    damaged_batches: list[int] = field(default_factory=list)

    @property
    def changed_anything(self) -> bool:
        return bool(
            self.truncated_bytes
            or self.rebuilt_indexes
            or self.deleted_segments
            or self.removed_files
            or self.completed_swaps
            or self.damaged_batches
        )


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    report: RecoveryReport


def _base_offset_of(name: str, suffix: str) -> int | None:
    stem = name[: -len(suffix)]
    if name.endswith(suffix) and len(stem) == OFFSET_DIGITS and stem.isdigit():
        return int(stem)
    return None


def _unlink(directory: str, name: str, report: RecoveryReport) -> None:
    try:
        os.unlink(os.path.join(directory, name))
    except FileNotFoundError:
        return
    report.removed_files.append(name)


def _remove_segment_files(directory: str, base_offset: int) -> None:
    stem = os.path.join(directory, segment_file_name(base_offset))
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        try:
            os.unlink(stem + suffix)
        except FileNotFoundError:
            pass


def _complete_swaps(directory: str, names: list[str], bases: set[int], report: RecoveryReport) -> None:
    for name in names:
        if not name.endswith(SWAP_SUFFIX):
            continue
        original = name[: -len(SWAP_SUFFIX)]
        base = _base_offset_of(original, LOG_SUFFIX)
        if base is None:  # an index .swap: rebuilt from the log anyway
            _unlink(directory, name, report)
            continue
        path = os.path.join(directory, name)
        fd = os.open(path, os.O_RDONLY)
        next_offset = base
        try:
            for header in recover_batches(fd, 0, os.fstat(fd).st_size):
                next_offset = header.next_offset
        except CorruptRecordError as exc:
            # The cleaner fsyncs before renaming to .swap, so a bad swap file is not ours to trust.
            logger.error("%s: discarding unreadable swap file: %s", path, exc)
            os.close(fd)
            _unlink(directory, name, report)
            continue
        os.close(fd)
        for replaced in sorted(b for b in bases if base <= b < max(next_offset, base + 1)):
            _remove_segment_files(directory, replaced)
            bases.discard(replaced)
            report.deleted_segments.append(replaced)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            _unlink(directory, segment_file_name(base) + suffix, report)
        os.rename(path, os.path.join(directory, original))
        bases.add(base)
        report.completed_swaps.append(base)
        logger.warning("%s: completed an interrupted segment swap at base offset %d", directory, base)


def _crc_damage(segment: LogSegment) -> str | None:
    """Why the segment's batches fail a CRC-checked walk, or None when every one passes."""
    try:
        for _ in recover_batches(segment.fd, 0, segment.size):
            pass
    except CorruptRecordError as exc:
        return f"{segment.log_path}: {exc}"
    return None


def load_segments(
    directory: str,
    config: LogConfig,
    *,
    recovery_point: int,
    log_start_offset: int,
    clean_shutdown: bool = False,
    now_ms: int,
    scrub: bool = False,
) -> LoadedLog:
    """Runs recovery on ``directory`` (created when missing) and returns its open segments.

    ``scrub``: every segment is read back with CRC checks, not only those recovery re-reads (a cluster
    replica, whose damaged batches the leader can replace: cluster/replica_manager.py)."""
    os.makedirs(directory, exist_ok=True)
    report = RecoveryReport(directory)
    names = sorted(os.listdir(directory))
    for name in names:
        if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
            _unlink(directory, name, report)
    bases = {b for b in (_base_offset_of(n, LOG_SUFFIX) for n in names) if b is not None}
    _complete_swaps(directory, names, bases, report)
    for name in names:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            base = _base_offset_of(name, suffix)
            if base is not None and base not in bases:
                _unlink(directory, name, report)

    ordered = sorted(bases)
    segments: list[LogSegment] = []
    for i, base in enumerate(ordered):
        segment = LogSegment.open(directory, base, config)
        next_base = ordered[i + 1] if i + 1 < len(ordered) else None
        problem = segment.load_indexes(next_base)
        unflushed = next_base is None or next_base > recovery_point
        last_after_crash = next_base is None and not clean_shutdown  # its indexes were not fsync'ed
        if problem is None and segment.next_offset <= recovery_point and not last_after_crash:
            damage = _crc_damage(segment) if scrub else None
            if damage is None:
                segments.append(segment)
                continue
            problem = damage
        if problem is not None and not unflushed:
            logger.warning("%s: rebuilding indexes of segment %d: %s", directory, base, problem)
        if problem is not None:
            report.rebuilt_indexes.append((base, problem))
        damaged_before = len(report.damaged_batches)
        truncated = segment.recover(keep_damaged_below=recovery_point, damaged=report.damaged_batches)
        for damaged in report.damaged_batches[damaged_before:]:
            logger.error(
                "%s: the fsync'ed batch at offset %d of segment %d fails its CRC check: kept, and refused "
                "to every reader until it is replaced", directory, damaged, base,
            )
        segment.offset_index.flush()
        segment.time_index.flush()
        report.recovered_segments.append(base)
        segments.append(segment)
        if truncated:
            report.truncated_bytes += truncated
            logger.warning(
                "%s: segment %d cut by %d bytes at byte %d (next offset %d)",
                directory,
                base,
                truncated,
                segment.size,
                segment.next_offset,
            )
            if unflushed:
                for later in ordered[i + 1 :]:
                    _remove_segment_files(directory, later)
                    report.deleted_segments.append(later)
                break
            # A synced segment cut short (its framing broken) leaves a hole before the next one: a
            # replica that can refetch cuts its log there too (Log.damaged_batches).
            report.damaged_batches.append(segment.next_offset)
    if not segments:
        segments.append(LogSegment.create(directory, log_start_offset, config, now_ms))

    log_end_offset = segments[-1].next_offset
    log_start_offset = max(log_start_offset, segments[0].base_offset)
    if log_start_offset > log_end_offset:
        # The start offset was checkpointed (DeleteRecords) past data that did not survive: start afresh
        # there so offsets below it are never handed out again.
        logger.warning(
            "%s: log start offset %d is past the recovered end %d; starting empty at %d",
            directory,
            log_start_offset,
            log_end_offset,
            log_start_offset,
        )
        for segment in segments:
            segment.delete_files()
            report.deleted_segments.append(segment.base_offset)
        segments = [LogSegment.create(directory, log_start_offset, config, now_ms)]
        log_end_offset = log_start_offset
    while len(segments) > 1 and segments[1].base_offset <= log_start_offset:
        segments[0].delete_files()
        report.deleted_segments.append(segments.pop(0).base_offset)
    if recovery_point > log_end_offset:
        logger.warning(
            "%s: recovery point %d is past the log end %d", directory, recovery_point, log_end_offset
        )
    recovery_point = min(recovery_point, log_end_offset)
    if report.changed_anything:
        logger.warning("%s: recovery: %s", directory, report)
    return LoadedLog(segments, log_start_offset, recovery_point, report)
