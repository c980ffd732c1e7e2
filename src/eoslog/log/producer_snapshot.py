"""The ``.snapshot`` file: a partition's producer state at one offset, so recovery need not replay the
whole log.

The byte layout, the checksum and what recovery does with a damaged file are documented once, in
docs/producer-state.md; the constants below are that table. Encoding and decoding are pure; the file
functions at the bottom are the only I/O of the producer state code.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterable
from pathlib import Path

from eoslog.log.producer_entry import NUM_BATCHES_TO_RETAIN, BatchMetadata, ProducerEntry
from eoslog.records.checksum import crc32c

log = logging.getLogger(__name__)

# docs/producer-state.md, "File layout".
MAGIC = b"EOPS"
VERSION = 1
FILE_HEADER = struct.Struct(">4shIqi")  # magic, version, crc, snapshot_offset, entry_count
CRC_START = 10  # the CRC covers every byte after the crc field
ENTRY = struct.Struct(">qhiqqB")  # producer_id, producer_epoch, coordinator_epoch, last_timestamp,
#                                   current_txn_first_offset (-1 = none), batch_count
BATCH = struct.Struct(">iiqiq")  # first_seq, last_seq, last_offset, offset_delta, timestamp
NO_TXN = -1

SUFFIX = ".snapshot"
TEMP_SUFFIX = ".snapshot.tmp"
_NAME = re.compile(r"^(\d{20})\.snapshot$")
_TEMP_NAME = re.compile(r"^(\d{20})\.snapshot\.tmp$")


class CorruptSnapshotError(ValueError):
    """The bytes are not a valid producer snapshot (short, wrong magic or version, CRC mismatch, ...)."""


def encode_snapshot(offset: int, entries: Iterable[ProducerEntry]) -> bytes:
    """The whole file for the producer state covering every batch below ``offset``."""
    body = bytearray()
    count = 0
    for entry in sorted(entries, key=lambda e: e.producer_id):  # sorted: same state, same bytes
        txn = NO_TXN if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        body += ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            entry.coordinator_epoch,
            entry.last_timestamp,
            txn,
            len(entry.batch_metadata),
        )
        for batch in entry.batch_metadata:
            body += BATCH.pack(
                batch.first_seq, batch.last_seq, batch.last_offset, batch.offset_delta, batch.timestamp
            )
        count += 1
    tail = struct.pack(">qi", offset, count) + body
    return FILE_HEADER.pack(MAGIC, VERSION, crc32c(tail), offset, count)[:CRC_START] + tail


def decode_snapshot(data: bytes | bytearray | memoryview) -> tuple[int, list[ProducerEntry]]:
    """(snapshot offset, entries) from a whole file; raises CorruptSnapshotError on any damage."""
    data = memoryview(data)
    if len(data) < FILE_HEADER.size:
        raise CorruptSnapshotError(
            f"snapshot is {len(data)} bytes, shorter than its {FILE_HEADER.size}-byte header"
        )
    magic, version, crc, offset, count = FILE_HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptSnapshotError(f"bad magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise CorruptSnapshotError(f"unsupported snapshot version {version}")
    actual = crc32c(data[CRC_START:])
    if actual != crc:
        raise CorruptSnapshotError(f"CRC mismatch (stored {crc:#010x}, computed {actual:#010x})")
    if offset < 0 or count < 0:
        raise CorruptSnapshotError(f"negative snapshot offset {offset} or entry count {count}")
    entries = []
    position = FILE_HEADER.size
    for _ in range(count):
        if position + ENTRY.size > len(data):
            raise CorruptSnapshotError(f"entry at byte {position} runs past the end ({len(data)} bytes)")
        producer_id, epoch, coordinator_epoch, last_timestamp, txn, batch_count = ENTRY.unpack_from(
            data, position
        )
        position += ENTRY.size
        if batch_count > NUM_BATCHES_TO_RETAIN:
            raise CorruptSnapshotError(
                f"producer {producer_id} has {batch_count} batches, at most 5 are kept"
            )
        if position + batch_count * BATCH.size > len(data):
            raise CorruptSnapshotError(
                f"batches of producer {producer_id} run past the end ({len(data)} bytes)"
            )
        batches = []
        for _ in range(batch_count):
            first_seq, last_seq, last_offset, offset_delta, timestamp = BATCH.unpack_from(data, position)
            position += BATCH.size
            if offset_delta < 0:
                raise CorruptSnapshotError(f"producer {producer_id}: negative offset delta {offset_delta}")
            batches.append(
                BatchMetadata(first_seq, last_seq, last_offset - offset_delta, last_offset, timestamp)
            )
        entries.append(
            ProducerEntry(
                producer_id, epoch, batches, coordinator_epoch, last_timestamp, None if txn == NO_TXN else txn
            )
        )
    if position != len(data):
        raise CorruptSnapshotError(f"{len(data) - position} unexpected bytes after the last entry")
    return offset, entries


# ---------------------------------------------------------------------------------------------------
# Files. Names are the snapshot offset, zero-padded to 20 digits like segment files.


def snapshot_path(directory: str | os.PathLike, offset: int) -> Path:
    return Path(directory) / f"{offset:020d}{SUFFIX}"


def list_snapshots(directory: str | os.PathLike) -> list[tuple[int, Path]]:
    """(offset, path) of every snapshot file in ``directory``, oldest first."""
    found = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        match = _NAME.match(name)
        if match:
            found.append((int(match.group(1)), Path(directory) / name))
    found.sort()
    return found


def write_snapshot_file(directory: str | os.PathLike, offset: int, entries: Iterable[ProducerEntry]) -> Path:
    """Writes the snapshot atomically: temporary file, fsync, rename over the final name, fsync directory.

    A crash leaves either no file, a stray ``.snapshot.tmp`` (removed by the next load), or the whole
    file: never a torn ``.snapshot``.
    """
    data = encode_snapshot(offset, entries)
    path = snapshot_path(directory, offset)
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    fsync_directory(directory)
    return path


def read_snapshot_file(path: str | os.PathLike) -> tuple[int, list[ProducerEntry]]:
    """Reads and checks one file; its name must agree with the offset stored inside."""
    path = Path(path)
    match = _NAME.match(path.name)
    if not match:
        raise CorruptSnapshotError(f"{path.name} is not a snapshot file name")
    offset, entries = decode_snapshot(path.read_bytes())
    if offset != int(match.group(1)):
        raise CorruptSnapshotError(f"{path.name} holds the state at offset {offset}")
    return offset, entries


def load_latest_snapshot_file(
    directory: str | os.PathLike, at_or_below: int | None = None
) -> tuple[int, list[ProducerEntry]] | None:
    """The newest valid snapshot at or below ``at_or_below`` (any offset if None), or None.

    Damaged snapshots met on the way are logged and deleted, then the next older one is tried: a bad
    snapshot only costs a longer replay of the log, never wrong state. Stray temporary files from an
    interrupted write are deleted too.
    """
    remove_temporary_files(directory)
    for offset, path in reversed(list_snapshots(directory)):
        if at_or_below is not None and offset > at_or_below:
            continue
        try:
            return read_snapshot_file(path)
        except (CorruptSnapshotError, OSError) as error:
            log.warning("deleting damaged producer snapshot %s: %s", path, error)
            _unlink(path)
    return None


def delete_snapshot_files(
    directory: str | os.PathLike, *, below: int | None = None, above: int | None = None
) -> list[int]:
    """Deletes snapshots with offset < ``below`` and/or > ``above``; returns the deleted offsets."""
    deleted = []
    for offset, path in list_snapshots(directory):
        if (below is not None and offset < below) or (above is not None and offset > above):
            _unlink(path)
            deleted.append(offset)
    return deleted


def retain_newest_snapshot_files(directory: str | os.PathLike, count: int) -> list[int]:
    """Keeps the ``count`` newest snapshots and deletes the rest; returns the deleted offsets."""
    snapshots = list_snapshots(directory)
    doomed = snapshots[: max(0, len(snapshots) - count)]
    for _, path in doomed:
        _unlink(path)
    return [offset for offset, _ in doomed]


def remove_temporary_files(directory: str | os.PathLike) -> None:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if _TEMP_NAME.match(name):
            _unlink(Path(directory) / name)


def fsync_directory(directory: str | os.PathLike) -> None:
    """Makes a rename or unlink in ``directory`` durable (POSIX needs the directory itself synced)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
