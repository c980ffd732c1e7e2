"""Installing a cleaned segment in place of the segments it replaces, crash-safely (on the event loop).

The steps, each one file operation (docs/storage-format.md, "Cleaning: the swap"):

    (worker) write <base>.log.cleaned, .index.cleaned, .timeindex.cleaned; fsync each
    1  rename <base>.log.cleaned -> <base>.log.swap
    2  fsync the directory                                  <- commit point
    3  rename every replaced segment's three files to *.deleted (unlinked file.delete.delay.ms later)
    4  rename <base>.index.cleaned -> <base>.index, <base>.timeindex.cleaned -> <base>.timeindex
    5  rename <base>.log.swap -> <base>.log; open it as the new segment
    6  fsync the directory
    7  (caller) drop the replaced segments' .txnindex files

Recovery (log/loader.py) at any point: before 2 the ``.cleaned`` files are deleted and the old segments
are untouched; from 2 on a ``.swap`` (if still there) replaces every segment whose base offset lies in its
offset range, and its indexes are rebuilt. Segments of the group beyond the swap's last batch (the
cleaner dropped everything they held) survive such a recovery uncleaned, which loses nothing; step 6
makes the renames durable before step 7 removes the index entries those old segments would need.
"""

from __future__ import annotations

import asyncio
import os

from eoslog.log.cleaner_pass import CleanedGroup, cleaned_paths, remove_cleaned
from eoslog.log.flush_task import fsync_directory
from eoslog.log.log import Log
from eoslog.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)


class SwapRejected(Exception):
    """The log changed while the group was cleaned (retention, truncation): the output was discarded."""


def current_group(log: Log, bases: tuple[int, ...], truncation_epoch: int) -> list[LogSegment]:
    """The live segments a cleaned group replaces, or SwapRejected if they are not all still there."""
    if log.truncation_epoch != truncation_epoch:
        raise SwapRejected("the log was truncated")
    segments = log.segments
    by_base = {s.base_offset: i for i, s in enumerate(segments)}
    slots = [by_base.get(b) for b in bases]
    if None in slots or slots != list(range(slots[0], slots[0] + len(slots))):
        raise SwapRejected(f"segments {list(bases)} are no longer all in the log")
    if slots[-1] >= len(segments) - 1:
        raise SwapRejected("the group reaches the active segment")
    return [segments[i] for i in slots]


async def swap_in(log: Log, cleaned: CleanedGroup, truncation_epoch: int) -> LogSegment:
    """Steps 1-6 above; returns the new segment. Raises SwapRejected (nothing changed, output deleted).

    The two directory fsyncs run in a worker thread (one can take tens of ms while the disk is busy), so
    the loop keeps serving; the group is checked again after the first, since retention or truncation
    may have run meanwhile. The renames themselves are on the loop, where nothing else can interleave."""
    loop = asyncio.get_running_loop()
    directory = log.directory
    base = cleaned.base_offset
    try:
        current_group(log, cleaned.replaced_bases, truncation_epoch)
    except SwapRejected:
        remove_cleaned(directory, base)
        raise
    log_cleaned, index_cleaned, time_index_cleaned = cleaned_paths(directory, base)
    stem = os.path.join(directory, segment_file_name(base))
    swap_path = stem + LOG_SUFFIX + SWAP_SUFFIX
    os.rename(log_cleaned, swap_path)
    await loop.run_in_executor(None, fsync_directory, directory)
    try:
        old = current_group(log, cleaned.replaced_bases, truncation_epoch)
    except SwapRejected:
        # Committed on disk but no longer wanted: back to .cleaned (which recovery discards), then gone.
        os.rename(swap_path, log_cleaned)
        remove_cleaned(directory, base)
        raise
    following = log.segments[log.segments.index(old[-1]) + 1].base_offset

    def install() -> LogSegment:
        os.rename(index_cleaned, stem + INDEX_SUFFIX)
        os.rename(time_index_cleaned, stem + TIME_INDEX_SUFFIX)
        os.rename(swap_path, stem + LOG_SUFFIX)
        segment = LogSegment.open(directory, base, log.config)
        if segment.load_indexes(following) is not None:
            segment.recover()  # the worker fsync'ed what it wrote; this only guards against a lying disk
        return segment

    segment = log.replace_segments(old, install)
    await loop.run_in_executor(None, fsync_directory, directory)
    return segment
