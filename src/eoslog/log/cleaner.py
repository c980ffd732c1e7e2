"""LogCleaner: compacts logs whose cleanup.policy contains ``compact`` (Kafka's LogCleaner + its manager).

Contract:
- Owns ``<data_dir>/cleaner-offset-checkpoint`` (Kafka's name and format: per partition, the first dirty
  offset, i.e. everything below it has been cleaned once), one worker thread and, during a pass, one
  child process (log.cleaner.process=true, the default; cleaner_worker.py). Nothing else writes
  ``*.cleaned`` files or swaps segments.
- Runs as one asyncio task on the broker's loop (``run``). Choosing a log, planning a pass (dup'ing the
  segments' descriptors) and swapping cleaned segments in happen on the loop, between other work; the
  CPU-heavy part (transaction scan, offset map, rewriting batches) runs in the child process (or, with
  ``process=False``, in the worker thread, whose GIL the loop then shares) over non-active segments
  only, which never change, so produce and fetch are never blocked by it. One pass at a time, one log at
  a time.
- Never cleans at or past ``CleanerTarget.last_stable_offset()`` nor the active segment; never moves an
  offset (batches keep their offsets; gaps appear); a swap loses nothing at any crash point
  (cleaner_swap.py).
- Choice of log (Kafka's grabFilthiestCompactedLog): among compacted logs whose dirty ratio is at least
  ``min.cleanable.dirty.ratio``, or whose oldest dirty batch is older than ``max.compaction.lag.ms``, or
  whose earliest pending delete horizon has passed, the one with the highest dirty ratio.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

from eoslog.log.checkpoint import OffsetCheckpointFile, TopicPartition
from eoslog.log.cleaner_offset_map import DEFAULT_BUFFER_SIZE
from eoslog.log.cleaner_pass import (
    CleanerStats,
    CleaningAborted,
    CleaningPlan,
    PassState,
    SegmentSource,
    clean_group,
    close_sources,
    prepare,
)
from eoslog.log.cleaner_swap import SwapRejected, swap_in
from eoslog.log.cleaner_worker import WORKER_COMMAND, CleanerProcess, ProcessPass, WorkerDied
from eoslog.log.config import LONG_MAX
from eoslog.log.errors import CorruptCheckpointError, LogError
from eoslog.log.log import Log
from eoslog.records import CorruptRecordError
from eoslog.records.header import HEADER, HEADER_SIZE

logger = logging.getLogger("eoslog.log.cleaner")

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_BACKOFF_MS = 15_000  # Kafka's log.cleaner.backoff.ms


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class CleanerTarget:
    """What the cleaner needs from a partition (the partition layer builds it; tests build it by hand)."""

    topic_partition: TopicPartition
    log: Log
    last_stable_offset: Callable[[], int]
    # (producer_id, marker offset) of every aborted-transaction index entry: their markers must stay
    referenced_markers: Callable[[], frozenset[tuple[int, int]]] = lambda: frozenset()
    # producer ids whose last batch must survive (None: every producer id found in the log)
    active_producers: Callable[[], frozenset[int] | None] = lambda: None
    # called on the loop after a swap with the replaced base offsets (drop their .txnindex files)
    after_swap: Callable[[list[int]], None] = lambda bases: None

    @classmethod
    def for_partition(cls, partition: Any) -> CleanerTarget:
        """Adapts a cluster.partition.Partition: LSO, aborted-transaction index, producer state."""
        index = getattr(partition, "transaction_index", None)
        producer_state = getattr(partition, "producer_state", None)

        def referenced() -> frozenset[tuple[int, int]]:
            if index is None:
                return frozenset()
            return frozenset((e.producer_id, e.last_offset) for e in index.all_entries())

        def active() -> frozenset[int] | None:
            if producer_state is None:
                return None
            return frozenset(e.producer_id for e in producer_state.entries())

        def after_swap(replaced: list[int]) -> None:
            # Every aborted transaction whose marker lies in the replaced segments had all its data
            # removed by this pass, so their index entries are obsolete (and would mislead consumers once
            # a later pass drops the marker). The new segment starts with no entries.
            if index is not None:
                gone = set(replaced)
                index.retain_segments([s.base_offset for s in partition.log.segments if s.base_offset not in gone])

        return cls(
            (partition.topic, partition.index),
            partition.log,
            lambda: partition.last_stable_offset,
            referenced,
            active,
            after_swap,
        )


class CleanableRange(NamedTuple):
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    max_lag_due: bool

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def _first_batch_timestamp(segment: Any) -> int:
    raw = segment.read_bytes(0, HEADER_SIZE)
    return HEADER.unpack_from(raw)[8] if len(raw) == HEADER_SIZE else -1


def cleanable_range(log: Log, checkpointed: int | None, last_stable_offset: int, now_ms: int) -> CleanableRange:
    """Kafka's cleanableOffsets: the dirty section starts at the checkpoint (reset to the log start when
    out of range) and ends at the first of: the LSO, the active segment, the first segment newer than
    min.compaction.lag.ms. Bytes are counted over whole segments, as the pass rewrites whole segments."""
    config = log.config
    segments = log.segments
    first_dirty = checkpointed if checkpointed is not None else log.log_start_offset
    if not log.log_start_offset <= first_dirty <= log.log_end_offset:
        first_dirty = log.log_start_offset
    first_uncleanable = min(last_stable_offset, segments[-1].base_offset)
    if config.min_compaction_lag_ms > 0:
        for segment in segments[:-1]:
            if segment.next_offset > first_dirty and segment.largest_timestamp > now_ms - config.min_compaction_lag_ms:
                first_uncleanable = min(first_uncleanable, segment.base_offset)
                break
    first_dirty = min(first_dirty, first_uncleanable)
    clean = dirty = 0
    max_lag_due = False
    for segment in segments[:-1]:
        if segment.next_offset <= first_dirty:
            clean += segment.size
        elif segment.next_offset <= first_uncleanable:
            if dirty == 0 and config.max_compaction_lag_ms < LONG_MAX:
                first_timestamp = _first_batch_timestamp(segment)
                max_lag_due = 0 <= first_timestamp < now_ms - config.max_compaction_lag_ms
            dirty += segment.size
    return CleanableRange(first_dirty, first_uncleanable, clean, dirty, max_lag_due)


@dataclass
class PassResult:
    topic_partition: TopicPartition
    stats: CleanerStats
    groups_swapped: int
    size_before: int
    size_after: int
    first_dirty_offset: int


class LogCleaner:
    def __init__(
        self,
        data_dir: str,
        targets: Callable[[], list[CleanerTarget]],
        *,
        backoff_ms: int = DEFAULT_BACKOFF_MS,
        map_budget: int = DEFAULT_BUFFER_SIZE,
        clock: Callable[[], int] = _now_ms,
        process: bool = True,
        worker_command: tuple[str, ...] = WORKER_COMMAND,
    ) -> None:
        self.data_dir = data_dir
        self._targets = targets
        self.backoff_ms = backoff_ms
        self.map_budget = map_budget
        self._clock = clock
        self._checkpoint = OffsetCheckpointFile(os.path.join(data_dir, CLEANER_OFFSET_CHECKPOINT))
        try:
            self._first_dirty: dict[TopicPartition, int] = self._checkpoint.read()
        except CorruptCheckpointError as exc:
            logger.error("%s; cleaning every compacted log from its start", exc)
            self._first_dirty = {}
        self._next_horizon: dict[TopicPartition, int] = {}
        self._skip_until: dict[TopicPartition, int] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eoslog-cleaner")
        # log.cleaner.process: the pass's CPU work in a child process (cleaner_worker.py) instead of the
        # thread, whose GIL holds the loop up (docs/benchmarks.md, "Compaction").
        self.process = process
        self._worker_command = worker_command
        self._child: CleanerProcess | None = None
        self._stopping = False
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self.passes: list[PassResult] = []  # the most recent ones, for tools and tests
        self.passes_completed = 0  # for the metrics endpoint (log/cleaner_metrics.py)
        self.bytes_reclaimed = 0

    # ---- choosing a log ---------------------------------------------------------------------------

    def first_dirty_offset(self, topic_partition: TopicPartition) -> int | None:
        return self._first_dirty.get(topic_partition)

    def cleanable_ranges(self, now_ms: int) -> list[tuple[CleanerTarget, CleanableRange]]:
        """Every compacted log's dirty section as the next pass would see it (for the metrics endpoint;
        unlike grab_filthiest it rolls nothing)."""
        return [(target, cleanable_range(target.log, self._first_dirty.get(target.topic_partition),
                                         target.last_stable_offset(), now_ms))
                for target in self._targets() if target.log.config.compacts]

    def grab_filthiest(self, now_ms: int | None = None) -> tuple[CleanerTarget, CleanableRange] | None:
        now = self._clock() if now_ms is None else now_ms
        best: tuple[float, CleanerTarget, CleanableRange] | None = None
        for target in self._targets():
            log = target.log
            if not log.config.compacts or self._skip_until.get(target.topic_partition, 0) > now:
                continue
            self._maybe_roll_for_max_lag(log, now)
            found = cleanable_range(
                log, self._first_dirty.get(target.topic_partition), target.last_stable_offset(), now
            )
            horizon = self._next_horizon.get(target.topic_partition)
            horizon_due = horizon is not None and horizon <= now
            ratio = found.dirty_ratio
            eligible = found.dirty_bytes > 0 and (
                ratio >= log.config.min_cleanable_dirty_ratio or found.max_lag_due
            )
            if not (eligible or horizon_due):
                continue
            priority = ratio + (2.0 if found.max_lag_due else 0.0) + (1.0 if horizon_due else 0.0)
            if best is None or priority > best[0]:
                best = (priority, target, found)
        return None if best is None else (best[1], best[2])

    @staticmethod
    def _maybe_roll_for_max_lag(log: Log, now_ms: int) -> None:
        # KIP-354: data in the active segment can only be compacted once it rolls.
        lag = log.config.max_compaction_lag_ms
        active = log.active_segment
        if lag < LONG_MAX and active.size > 0:
            first = _first_batch_timestamp(active)
            if 0 <= first < now_ms - lag:
                log.roll(now_ms)

    # ---- one pass ---------------------------------------------------------------------------------

    async def clean(self, target: CleanerTarget, found: CleanableRange | None = None) -> PassResult | None:
        """Cleans ``target`` once now (whatever its dirty ratio); None when the pass was abandoned."""
        loop = asyncio.get_running_loop()
        log, key = target.log, target.topic_partition
        now = self._clock()
        if found is None:
            found = cleanable_range(log, self._first_dirty.get(key), target.last_stable_offset(), now)
        plan = self._plan(target, found, now)
        size_before = log.size
        epoch = log.truncation_epoch
        stopping = lambda: self._stopping
        swapped = 0
        child: CleanerProcess | None = None
        try:
            if self.process:
                child = self._child = CleanerProcess(plan, self._executor, self._worker_command)
                state: PassState | ProcessPass = await child.prepare()
            else:
                state = await loop.run_in_executor(self._executor, prepare, plan, stopping)
            for i, group in enumerate(state.groups):
                if child is not None:
                    cleaned = await child.clean_group(i)
                else:
                    cleaned = await loop.run_in_executor(self._executor, clean_group, state, group, stopping)
                try:
                    await swap_in(log, cleaned, epoch)
                except SwapRejected as exc:
                    logger.info("%s: cleaning abandoned: %s", log.directory, exc)
                    return None
                target.after_swap(list(cleaned.replaced_bases))
                swapped += 1
        except (CleaningAborted, CorruptRecordError) as exc:
            logger.warning("%s: cleaning pass stopped: %s", log.directory, exc)
            return None
        except WorkerDied as exc:
            # Nothing of the unfinished group was installed; the groups swapped before it stay (each swap is
            # whole). The checkpoint does not move, so the next pass redoes the rest.
            logger.warning("%s: cleaning pass lost its process (%d group(s) swapped): %s", log.directory,
                           swapped, exc)
            self._skip_until[key] = now + self.backoff_ms
            return None
        finally:
            if child is not None:
                self._child = None
                child.close()
            # In the worker, after whatever it may still be doing (a cancelled await does not stop it).
            try:
                self._executor.submit(close_sources, plan)
            except RuntimeError:  # executor shut down: the worker has finished
                close_sources(plan)
        new_first_dirty = state.map_end + 1
        progressed = new_first_dirty > found.first_dirty_offset or swapped
        self._first_dirty[key] = new_first_dirty
        if state.next_horizon_ms is not None:
            self._next_horizon[key] = state.next_horizon_ms
        else:
            self._next_horizon.pop(key, None)
        if not progressed:
            self._skip_until[key] = now + self.backoff_ms
        await loop.run_in_executor(self._executor, self._write_checkpoint)
        result = PassResult(key, state.stats, swapped, size_before, log.size, new_first_dirty)
        self.passes = (self.passes + [result])[-32:]
        self.passes_completed += 1
        self.bytes_reclaimed += max(size_before - log.size, 0)
        logger.info(
            "%s: cleaned %d segment group(s): %d -> %d bytes, %d of %d records kept, first dirty offset %d, "
            "%.3f s",
            log.directory, swapped, size_before, log.size, state.stats.records_kept,
            state.stats.records_read, new_first_dirty, state.stats.elapsed_s,
        )
        return result

    def _plan(self, target: CleanerTarget, found: CleanableRange, now_ms: int) -> CleaningPlan:
        segments = []
        try:
            for segment in target.log.segments:
                segments.append(
                    SegmentSource(
                        segment.base_offset,
                        os.dup(segment.fd),
                        segment.size,
                        segment.next_offset,
                        segment.offset_index.entries,
                        segment.time_index.entries,
                    )
                )
        except BaseException:
            for source in segments:
                os.close(source.fd)
            raise
        return CleaningPlan(
            target.log.directory,
            target.log.config,
            tuple(segments),
            found.first_dirty_offset,
            found.first_uncleanable_offset,
            now_ms,
            self.map_budget,
            target.referenced_markers(),
            target.active_producers(),
        )

    def _write_checkpoint(self) -> None:
        live = {t.topic_partition for t in self._targets()}
        self._checkpoint.write({k: v for k, v in self._first_dirty.items() if k in live})

    # ---- the background task ----------------------------------------------------------------------

    async def run(self) -> None:
        """Cleans the filthiest log, again and again; sleeps ``backoff_ms`` when none needs it."""
        self._wakeup = asyncio.Event()
        while not self._stopping:
            chosen = None
            try:
                chosen = self.grab_filthiest()
                if chosen is not None:
                    await self.clean(*chosen)
            except LogError as exc:
                logger.error("log cleaner: %s", exc)
            except Exception:
                logger.exception("log cleaner failed; backing off")
                if chosen is not None:
                    self._skip_until[chosen[0].topic_partition] = self._clock() + self.backoff_ms
                chosen = None
            if chosen is None:
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), self.backoff_ms / 1000)
                except TimeoutError:
                    pass

    def wakeup(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def start(self) -> asyncio.Task:
        """Starts ``run`` as a task on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self.run(), name="eoslog-log-cleaner")
        return self._task

    async def stop(self) -> None:
        """Stops after the current batch of the current pass (its output is discarded)."""
        self._stopping = True
        self.wakeup()
        if self._child is not None:
            self._child.kill()  # the pass reads EOF and stops; its unfinished group is deleted
        if self._task is not None:
            try:
                await self._task
            except (asyncio.CancelledError, Exception) as exc:  # noqa: BLE001 - stopping anyway
                logger.debug("log cleaner task ended with %r", exc)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._executor.shutdown, True)
