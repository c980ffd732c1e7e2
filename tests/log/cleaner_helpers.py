"""Shared helpers for the cleaner tests: a log with small segments, keyed appends, reading it back."""

from __future__ import annotations

import asyncio

from eoslog.log import Log, LogConfig
from eoslog.log.cleaner import CleanerTarget, LogCleaner
from eoslog.records import SimpleRecord, build_batch, build_control_batch, decode_batches
from eoslog.records.control import ControlType

T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(directory, clock=None, **settings) -> Log:
    config = LogConfig(
        segment_bytes=settings.pop("segment_bytes", 2048),
        index_interval_bytes=settings.pop("index_interval_bytes", 256),
        cleanup_policy=frozenset({"compact"}),
        file_delete_delay_ms=settings.pop("file_delete_delay_ms", 0),
        min_cleanable_dirty_ratio=settings.pop("min_cleanable_dirty_ratio", 0.0),
        **settings,
    )
    return Log.open(str(directory), config, clock=clock or Clock())


def put(log: Log, items, *, timestamp=T0, **batch_args) -> int:
    """Appends one batch of (key, value) items (str or None); returns its first offset."""
    records = [
        SimpleRecord(None if k is None else k.encode(), None if v is None else v.encode(), timestamp=timestamp)
        for k, v in items
    ]
    return log.append(build_batch(records, **batch_args)).first_offset


def marker(log: Log, control: ControlType, producer_id: int, epoch: int = 0, timestamp=T0) -> int:
    batch = build_control_batch(control, producer_id, epoch, 0, base_offset=log.log_end_offset, timestamp=timestamp)
    return log.append_as_is(batch).first_offset


def read_all(log: Log, start: int | None = None):
    """Every batch from the log start to the end, decoded."""
    data = log.read(log.log_start_offset if start is None else start, 1 << 30).to_bytes()
    return decode_batches(data)


def records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record, in offset order."""
    out = []
    for batch in read_all(log):
        if batch.header.is_control:
            continue
        out += [(r.offset, r.key, r.value) for r in batch.absolute_records()]
    return out


def latest_by_key(rows) -> dict[bytes, tuple[int, bytes | None]]:
    latest = {}
    for offset, key, value in rows:
        latest[key] = (offset, value)
    return latest


def target_for(log: Log, lso: int | None = None, **kw) -> CleanerTarget:
    return CleanerTarget(("t", 0), log, lambda: log.log_end_offset if lso is None else lso, **kw)


def clean_once(tmp_path, log: Log, clock=None, target=None, **cleaner_args):
    """One cleaner pass over ``log`` (whatever its dirty ratio), run on a fresh event loop."""
    target = target or target_for(log)

    async def run():
        cleaner = LogCleaner(str(tmp_path), lambda: [target], clock=clock or log._clock, **cleaner_args)
        try:
            return await cleaner.clean(target), cleaner
        finally:
            await cleaner.stop()

    return asyncio.run(run())
