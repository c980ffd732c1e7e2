"""LogDirectory: every partition log of one data directory (the local part of Kafka's LogManager).

Contract:
- Owns ``data_dir``: holds an exclusive ``flock`` on ``<data_dir>/.lock`` from ``open`` to ``close``, so a
  second broker process (or a second LogDirectory in this one) fails fast with LogDirectoryLockedError
  instead of corrupting the logs. The lock dies with the process, so a crash never leaves it stale.
- Owns the partition directories ``<topic>-<partition>/``, the two checkpoint files and the
  ``.clean-shutdown`` marker; creates and deletes partitions; writes the checkpoints from ``checkpoint()``,
  from ``run_maintenance`` and at ``close``, the recovery points also after group-commit rounds (at most
  once per ``checkpoint_after_sync_ms``, see ``_synced``), and the marker last at ``close`` (it tells the
  next open that every log was closed, so no segment needs rebuilding).
- Always true: ``logs`` holds exactly the open partition logs; a checkpoint never names a recovery point
  above what was fsync'ed (it is taken from ``Log.recovery_point``).
- Called from the event-loop thread; ``checkpoint()`` and ``close()`` block on fsync, ``run_maintenance``
  does its fsyncs in worker threads. ``make_logs`` and ``remove_detached`` are the blocking halves of
  creating and deleting partitions, made to run in a worker thread (see each).
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from eoslog.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
    TopicPartition,
)
from eoslog.log.config import LogConfig
from eoslog.log.data_dir_format import unusable
from eoslog.log.errors import CorruptCheckpointError, LogDirectoryLockedError, LogError
from eoslog.log.flush_task import fsync_directory
from eoslog.log.flusher import GroupCommit

if TYPE_CHECKING:
    from eoslog.log.log import Log

logger = logging.getLogger("eoslog.log")

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"  # written last by close(), removed first by open()
DELETE_DIR_SUFFIX = "-delete"  # a partition directory being deleted: <topic>-<partition>.<uuid>-delete

# The recovery-point checkpoint follows the group commit: written after a round that synced data, at most
# once per this many ms (a trailing write covers the rounds in between). Why: after a crash, recovery can
# tell rot in fsync'ed data (kept and refused) from a torn tail (cut) only below the recovery point, and a
# checkpoint written once a minute left up to a minute of acknowledged, synced data where a flipped bit
# makes recovery cut the log and drop every acknowledged batch after it (docs/durability.md,
# "Corruption"). Throttled because each write is two fsyncs (file and directory); its cost on the produce
# path is in docs/benchmarks.md, "Recovery point after each sync". None: only the periodic checkpoint.
CHECKPOINT_AFTER_SYNC_MS = 200


def _now_ms() -> int:
    return int(time.time() * 1000)


def _remove_tree(path: str) -> None:
    # shutil is imported here, by the first deletion, not by every start: it imports bz2, lzma and more.
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _lock(data_dir: str) -> int:
    path = os.path.join(data_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
        os.close(fd)
        who = f" (held by process {holder})" if holder else ""
        raise LogDirectoryLockedError(
            f"data directory {data_dir} is already in use{who}: another broker or LogDirectory holds "
            f"the lock on {path}; stop it or choose another data directory"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


class LogDirectory:
    def __init__(
        self,
        data_dir: str,
        config: LogConfig,
        lock_fd: int,
        *,
        config_for: Callable[[str], LogConfig] | None,
        clock: Callable[[], int],
        syncfs: bool = True,
        scrub: bool = False,
        checkpoint_after_sync_ms: int | None = CHECKPOINT_AFTER_SYNC_MS,
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.logs: dict[TopicPartition, Log] = {}
        # One flush round for the whole directory (a syncfs) where the kernel makes that safe; see flusher.py.
        self.group_commit = GroupCommit(directory=data_dir, syncfs=syncfs)
        self._lock_fd = lock_fd
        self._config_for = config_for
        self._clock = clock
        self._recovery_points = OffsetCheckpointFile(os.path.join(data_dir, RECOVERY_POINT_CHECKPOINT))
        self._log_start_offsets = OffsetCheckpointFile(os.path.join(data_dir, LOG_START_OFFSET_CHECKPOINT))
        self._clean_shutdown = False
        self._scrub = scrub  # CRC-check every segment at open (loader.py)
        self._closed = False
        self._checkpoint_lock = threading.Lock()
        self._snapshots_taken = 0
        self._recovery_written = 0  # sequence of the snapshot each file holds (see _write_checkpoints)
        self._starts_written = 0
        self._after_sync_ms = checkpoint_after_sync_ms
        self._after_sync_busy = False  # a write after a sync is scheduled or running
        self._after_sync_again = False  # a round synced since that write took its snapshot
        self._after_sync_last = float("-inf")  # time.monotonic() of the last such write
        self.checkpoints_after_sync = 0  # written (for tests and benchmarks)
        if checkpoint_after_sync_ms is not None:
            self.group_commit.on_synced = self._synced

    @classmethod
    def open(
        cls,
        data_dir: str,
        config: LogConfig | None = None,
        *,
        config_for: Callable[[str], LogConfig] | None = None,
        clock: Callable[[], int] | None = None,
        syncfs: bool = True,
        scrub: bool = False,
        checkpoint_after_sync_ms: int | None = CHECKPOINT_AFTER_SYNC_MS,
    ) -> LogDirectory:
        """Locks ``data_dir`` (created when missing), removes half-deleted partitions and opens (recovers)
        every partition log. ``config_for(topic)`` gives per-topic configs; else ``config`` for all."""
        data_dir = os.path.abspath(data_dir)
        try:
            os.makedirs(data_dir, exist_ok=True)
            lock_fd = _lock(data_dir)
        except OSError as exc:  # not writable, not a directory: one line that names it (not a traceback)
            raise unusable(Path(data_dir), exc) from exc
        directory = cls(
            data_dir, config or LogConfig(), lock_fd, config_for=config_for, clock=clock or _now_ms,
            syncfs=syncfs, scrub=scrub, checkpoint_after_sync_ms=checkpoint_after_sync_ms,
        )
        try:
            directory._load()
        except BaseException:
            directory._release()
            raise
        return directory

    def _read_checkpoint(self, checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read()
        except CorruptCheckpointError as exc:
            # Atomic writes make this a disk fault, not a crash; recovering every segment from scratch
            # is slower but safe, so we do that rather than refuse to start.
            logger.error("%s; ignoring it and recovering every log from its first segment", exc)
            return {}

    def _load(self) -> None:
        marker = os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE)
        self._clean_shutdown = os.path.exists(marker)
        if self._clean_shutdown:
            # Gone (durably) before anything is written, so a crash from here on counts as unclean.
            os.unlink(marker)
            fsync_directory(self.data_dir)
        recovery_points = self._read_checkpoint(self._recovery_points)
        start_offsets = self._read_checkpoint(self._log_start_offsets)
        for name in sorted(os.listdir(self.data_dir)):
            path = os.path.join(self.data_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                logger.info("%s: finishing deletion of %s", self.data_dir, name)
                _remove_tree(path)
                continue
            # Here, not at the top: a new data directory opens (and the broker listens) without the log's
            # record and segment code, which its first partition, or the warm-up once serving, loads.
            from eoslog.log.log import Log, parse_topic_partition

            key = parse_topic_partition(path)
            if key is None:
                logger.warning("%s: ignoring %s (not <topic>-<partition>)", self.data_dir, name)
                continue
            self.logs[key] = Log.open(
                path,
                self._config_of(key[0]),
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=start_offsets.get(key, 0),
                clean_shutdown=self._clean_shutdown,
                clock=self._clock,
                scrub=self._scrub,
            )

    @property
    def clean_shutdown(self) -> bool:
        """Whether every log was closed cleanly before this open (nothing was recovered from a crash)."""
        return self._clean_shutdown

    def _config_of(self, topic: str) -> LogConfig:
        return self._config_for(topic) if self._config_for is not None else self.config

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created (directory fsync'ed) when it does not exist yet."""
        self._check_open()
        log = self.logs.get((topic, partition))
        if log is not None:
            return log
        (log,) = self.make_logs(topic, [partition], config or self._config_of(topic))
        self.adopt(log)
        return log

    def make_logs(self, topic: str, partitions: Iterable[int], config: LogConfig) -> list[Log]:
        """Creates new, empty partition logs and fsyncs the data directory once, without registering them.

        Blocking (a mkdir and four file creations per partition: 1-4 s for 1,000 on a plain disk), and
        safe in a worker thread while the loop serves: it reads no shared state and only claims
        directories that do not exist (``mkdir``, so an existing one fails instead of being adopted).
        ``adopt`` registers the logs, on the loop's thread; on failure nothing made is left open."""
        self._check_open()
        if not topic or "/" in topic or topic in (".", ".."):
            raise LogError(f"invalid topic {topic!r}")
        from eoslog.log.log import Log

        made: list[Log] = []
        try:
            for partition in partitions:
                if partition < 0:
                    raise LogError(f"invalid partition {partition} of topic {topic!r}")
                path = os.path.join(self.data_dir, f"{topic}-{partition}")
                try:
                    os.mkdir(path)
                except FileExistsError:
                    raise LogError(f"{path} already exists") from None
                made.append(Log.open(path, config, clock=self._clock))
            fsync_directory(self.data_dir)
        except BaseException:
            self.discard_logs(made)
            raise
        return made

    def discard_logs(self, logs: list[Log]) -> None:
        """Closes and removes logs from ``make_logs`` that will not be adopted (the topic was not made)."""
        for log in logs:
            log.close(flush=False)
            _remove_tree(log.directory)

    def adopt(self, log: Log) -> None:
        """Registers a log from ``make_logs`` (loop thread)."""
        self._check_open()
        from eoslog.log.log import parse_topic_partition

        key = parse_topic_partition(log.directory)
        if key is None or key in self.logs:
            raise LogError(f"{log.directory} cannot join {self.data_dir}: {key} is already open")
        self.logs[key] = log

    def delete_log(self, topic: str, partition: int) -> bool:
        """Closes and removes a partition log; returns whether it existed. Blocking: see ``detach_log``
        for the part a caller that must not block does on the loop."""
        doomed = self.detach_log(topic, partition)
        if doomed is None:
            return False
        self.remove_detached([doomed])
        return True

    def detach_log(self, topic: str, partition: int) -> str | None:
        """Closes a partition log without flushing it (its data is going), unregisters it and renames its
        directory to ``*.<uuid>-delete``; returns that path for ``remove_detached``, or None when there
        was no such log. Cheap (no fsync), so the loop can detach 1,000 logs at once. A crash before the
        rename is durable leaves the old name, which ``PartitionRegistry.remove_orphan_logs`` removes at
        the next start since the topic registry no longer names it; a crash after leaves a ``-delete``
        directory, which the next open removes. FileRegions of the log become invalid: the caller stops
        serving the partition before detaching it."""
        self._check_open()
        log = self.logs.pop((topic, partition), None)
        if log is None:
            return None
        log.close(flush=False)
        self.group_commit.forget(log)
        doomed = f"{log.directory}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.rename(log.directory, doomed)
        return doomed

    def remove_detached(self, doomed: list[str]) -> None:
        """Makes the renames of ``detach_log`` durable (one directory fsync), then removes the directories.
        Blocking; safe in a worker thread."""
        fsync_directory(self.data_dir)
        for path in doomed:
            _remove_tree(path)

    # ---- checkpoints and background work --------------------------------------------------------

    def _snapshot(self, *, starts: bool = True
                  ) -> tuple[int, dict[TopicPartition, int], dict[TopicPartition, int] | None]:
        self._snapshots_taken += 1
        recovery = {key: log.recovery_point for key, log in self.logs.items()}
        start_offsets = {key: log.log_start_offset for key, log in self.logs.items()} if starts else None
        return self._snapshots_taken, recovery, start_offsets

    def _write_checkpoints(self, sequence: int, recovery: dict, starts: dict | None) -> None:
        # The maintenance loop and the writes after a sync run in worker threads while close() may write
        # from the loop's thread: all use the same temp files, so one writer at a time, and a snapshot
        # older than the one a file already holds is dropped (a late worker must not roll it back). Each
        # file has its own sequence: a write after a sync holds only recovery points.
        with self._checkpoint_lock:
            if sequence > self._recovery_written:
                self._recovery_points.write(recovery)
                self._recovery_written = sequence
            if starts is not None and sequence > self._starts_written:
                self._log_start_offsets.write(starts)
                self._starts_written = sequence

    def _write_recovery_points_after_sync(self, sequence: int, recovery: dict) -> None:
        with self._checkpoint_lock:
            if self._closed:  # close() wrote the last one; the directory may be gone by now
                return
        self._write_checkpoints(sequence, recovery, None)

    def _synced(self) -> None:
        """GroupCommit's ``on_synced`` (loop thread): a round moved recovery points, so the checkpoint
        is written again, at most once per ``checkpoint_after_sync_ms``; rounds meanwhile are covered by
        the next write, whose snapshot is taken when it starts."""
        if self._closed:
            return
        if self._after_sync_busy:
            self._after_sync_again = True
            return
        self._after_sync_busy = True
        loop = asyncio.get_running_loop()
        delay = self._after_sync_last + self._after_sync_ms / 1000 - time.monotonic()
        if delay > 0:
            loop.call_later(delay, self._write_after_sync, loop)
        else:
            self._write_after_sync(loop)

    def _write_after_sync(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._closed:
            self._after_sync_busy = False
            return
        self._after_sync_last = time.monotonic()
        self._after_sync_again = False
        sequence, recovery, _ = self._snapshot(starts=False)
        written = loop.run_in_executor(None, self._write_recovery_points_after_sync, sequence, recovery)
        written.add_done_callback(self._written_after_sync)

    def _written_after_sync(self, written: asyncio.Future) -> None:
        self._after_sync_busy = False
        failure = None if written.cancelled() else written.exception()
        if failure is not None:
            # The previous checkpoint stays (atomic writes): recovery re-reads more after a crash, which
            # is safe. The next round tries again.
            logger.error("%s: writing the recovery-point checkpoint failed: %s", self.data_dir, failure)
        elif not written.cancelled():
            self.checkpoints_after_sync += 1
        if self._after_sync_again:
            self._synced()

    def checkpoint(self) -> None:
        """Writes both checkpoint files now (blocking)."""
        self._check_open()
        self._write_checkpoints(*self._snapshot())

    async def run_maintenance(
        self,
        *,
        checkpoint_interval_ms: int = 60_000,
        retention_check_interval_ms: int = 300_000,
        flush_check_interval_ms: int = 1_000,
    ) -> None:
        """Runs until cancelled: flushes logs whose flush.messages / flush.ms is due, applies retention
        and deferred file deletion, and writes the checkpoints, each at its Kafka-style interval."""
        loop = asyncio.get_running_loop()
        next_checkpoint = next_retention = self._clock()
        while not self._closed:
            now = self._clock()
            retention_due = now >= next_retention
            for log in list(self.logs.values()):
                # One log's failure (offline after a write error, say) must not stop the others' upkeep.
                try:
                    if log.flush_due(now):
                        await self.group_commit.flush(log)
                    deleted = log.apply_retention(now) if retention_due else log.delete_expired_files(now)
                    if retention_due and deleted:
                        logger.info("%s: retention removed %d segments", log.directory, deleted)
                except Exception:  # noqa: BLE001
                    logger.exception("%s: maintenance failed; will retry", log.directory)
            if retention_due:
                next_retention = now + retention_check_interval_ms
            if now >= next_checkpoint:
                await loop.run_in_executor(None, self._write_checkpoints, *self._snapshot())
                next_checkpoint = now + checkpoint_interval_ms
            await asyncio.sleep(min(flush_check_interval_ms, checkpoint_interval_ms) / 1000)

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"{self.data_dir}: log directory is closed")

    def _release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = -1
        self.group_commit.close()

    def close(self) -> None:
        """Closes every log (each flushes), writes the checkpoints and releases the lock."""
        if self._closed:
            return
        try:
            errors = []
            for log in self.logs.values():
                try:
                    log.close()
                except LogError as exc:
                    errors.append(exc)
            self._write_checkpoints(*self._snapshot())
            self._closed = True
            if errors:
                raise errors[0]
            fd = os.open(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE), os.O_WRONLY | os.O_CREAT, 0o644)
            os.fsync(fd)
            os.close(fd)
            fsync_directory(self.data_dir)
        finally:
            self._closed = True
            self._release()
