"""The leader-epoch cache of a partition replica (Kafka's LeaderEpochFileCache; KIP-101, KIP-279).

Contract
- Entries ``(epoch, start_offset)`` strictly increase in both fields; epoch E covers offsets from its
  start offset up to the next entry's start (the latest epoch: up to the log end offset).
- Persisted as ``leader-epoch-checkpoint`` in the partition directory after every change, atomically
  (format: docs/storage-format.md); durable before ``assign`` returns, unless the caller syncs it
  itself (``durable=False``). A damaged file is logged and treated as empty: the replica then
  truncates by the leader's answers, which is safe, instead of refusing to open the log.
- Only the broker's event-loop thread calls it, except ``write_pending`` (any thread).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from eoslog.log.checkpoint import TEMP_SUFFIX, replace_file, write_atomically

log = logging.getLogger(__name__)

FILE_NAME = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._entries: list[tuple[int, int]] = list(entries or [])
        # Changes are numbered; ``_written`` is the number the file holds. ``write_pending`` may run in a
        # worker thread while the loop changes entries: the lock keeps the two from writing the file at
        # once, and the numbers keep an older content from being written over a newer one.
        self._version = 0
        self._written = 0
        self._file_lock = threading.Lock()

    @classmethod
    def new(cls, directory: str | os.PathLike) -> LeaderEpochCache:
        """The cache of a log just made (no file yet): nothing to read."""
        return cls(Path(directory) / FILE_NAME)

    @classmethod
    def open(cls, directory: str | os.PathLike) -> LeaderEpochCache:
        path = Path(directory) / FILE_NAME
        return cls(path, _read(path))

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    def assign(self, epoch: int, start_offset: int, *, durable: bool = True) -> None:
        """Epoch ``epoch`` starts at ``start_offset``. Lower epochs and a repeat of the latest are
        ignored; entries at or past ``start_offset`` are dropped (a tail that diverged).

        ``durable=False`` changes only the memory: the caller writes the file (``write_pending``) and
        makes it durable (``checkpoint.make_durable``) in a worker thread, and says what may happen
        meanwhile (cluster/replica_manager.py: a new leader takes no write until then). A leader taking
        1,000 partitions at once then writes and syncs them off the loop."""
        if epoch < 0:
            return
        latest = self.latest_epoch
        if latest is not None and epoch <= latest:
            return
        kept = [(e, o) for e, o in self._entries if o < start_offset]
        if len(kept) != len(self._entries):
            log.warning("%s: epoch %d at %d drops entries %s", self.path, epoch, start_offset,
                        self._entries[len(kept):])
        kept.append((epoch, start_offset))
        self._entries = kept
        self._persist(durable)

    def epoch_for_offset(self, offset: int) -> int | None:
        found = None
        for epoch, start in self._entries:
            if start <= offset:
                found = epoch
            else:
                break
        return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's answer to OffsetForLeaderEpoch: (the largest epoch <= requested, where it ends)."""
        if not self._entries or requested_epoch < 0:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        latest = self._entries[-1][0]
        if requested_epoch == latest:
            return latest, log_end_offset
        if requested_epoch > latest:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch < self._entries[0][0]:
            # Older than anything we know: ends where our first epoch starts.
            return requested_epoch, self._entries[0][1]
        for index, (epoch, _start) in enumerate(self._entries):
            following = self._entries[index + 1]
            if following[0] > requested_epoch:
                return epoch, following[1]
        return latest, log_end_offset  # unreachable: requested < latest

    def truncate_from_end(self, end_offset: int) -> None:
        kept = [(e, o) for e, o in self._entries if o < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        if not self._entries or self._entries[0][1] >= start_offset:
            return
        kept = [(e, o) for e, o in self._entries if o > start_offset]
        covering = [(e, o) for e, o in self._entries if o <= start_offset][-1]
        self._entries = [(covering[0], start_offset), *kept]
        self._persist()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._persist()

    def _persist(self, durable: bool = True) -> None:
        self._version += 1
        if durable:
            with self._file_lock:
                version, data = self._version, self._encode()
                write_atomically(self.path, data)
                self._written = version

    def write_pending(self) -> None:
        """Writes the entries if the file does not hold them yet, without fsync (``checkpoint.make_durable``
        follows). Safe in a worker thread while the loop changes the cache."""
        with self._file_lock:
            version = self._version  # read before the entries: at worst the file is newer than its number
            if self._written >= version:
                return
            replace_file(self.path, self._encode())
            self._written = version

    def _encode(self) -> bytes:
        entries = self._entries
        lines = [str(VERSION), str(len(entries)), *(f"{e} {o}" for e, o in entries)]
        return ("\n".join(lines) + "\n").encode()


def _read(path: Path) -> list[tuple[int, int]]:
    Path(str(path) + TEMP_SUFFIX).unlink(missing_ok=True)  # a write that never got renamed
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    try:
        lines = text.split("\n")
        if int(lines[0]) != VERSION:
            raise ValueError(f"version {lines[0]!r}")
        count = int(lines[1])
        entries = [tuple(int(x) for x in lines[2 + i].split()) for i in range(count)]
        if any(len(e) != 2 for e in entries):
            raise ValueError("an entry needs an epoch and an offset")
        return [(e[0], e[1]) for e in entries]
    except (ValueError, IndexError) as exc:
        log.warning("%s is damaged (%s); starting with no leader epochs (the leader's answers decide "
                    "truncation)", path, exc)
        return []


def divergence_offset(local: LeaderEpochCache, local_log_end_offset: int, leader_epoch: int,
                      leader_end_offset: int) -> int | None:
    """Where a follower truncates given the leader's OffsetForLeaderEpoch answer (KIP-279); None when the
    leader knows no epoch of ours (fall back to the high watermark)."""
    if leader_epoch == UNDEFINED_EPOCH or leader_end_offset == UNDEFINED_OFFSET:
        return None
    _, local_end = local.end_offset_for(leader_epoch, local_log_end_offset)
    if local_end == UNDEFINED_OFFSET:
        local_end = local_log_end_offset
    return min(leader_end_offset, local_end, local_log_end_offset)
