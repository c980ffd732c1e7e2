"""Builders for share partition tests: runs, partitions, and the share coordinator's way of laying an
update over a snapshot (step 2 writes the real one; this is the test's independent model of it)."""

from __future__ import annotations

from eoslog.share import (
    AcknowledgementBatch,
    InFlightBatch,
    OffsetRange,
    PersistedState,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)

S = RecordState
LIMIT = 3
LOCK_MS = 1000
CONFIG = SharePartitionConfig(delivery_count_limit=LIMIT, max_record_locks=100, record_lock_duration_ms=LOCK_MS)


def run(first, last, state, count=0, member=None, deadline=None) -> InFlightBatch:
    if state is S.ACQUIRED:
        member = "m" if member is None else member
        deadline = LOCK_MS if deadline is None else deadline
    return InFlightBatch(first, last, state, count, member, deadline)


def partition(*runs, start=None, end=None, config=CONFIG, epoch=0) -> SharePartition:
    start = runs[0].first_offset if start is None else start
    end = (runs[-1].last_offset + 1 if runs else start) if end is None else end
    return SharePartition(config, start, end, epoch, tuple(runs))


def batches(*pairs) -> list[OffsetRange]:
    return [OffsetRange(first, last) for first, last in pairs]


def ack(first, last, *types) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(types))


def offsets(p: SharePartition) -> dict[int, tuple]:
    """offset -> (state, delivery count, member): the state offset by offset, for readable asserts."""
    return {o: (r.state, r.delivery_count, r.member_id)
            for r in p.in_flight for o in range(r.first_offset, r.last_offset + 1)}


def overlay(state: PersistedState, update: PersistedState) -> PersistedState:
    """``update`` laid over ``state`` as the share coordinator combines them: the update's batches win,
    offsets below the new start offset are dropped."""
    per_offset = {}
    for batch in state.state_batches + update.state_batches:
        for o in range(batch.first_offset, batch.last_offset + 1):
            per_offset[o] = (batch.delivery_state, batch.delivery_count)
    batches_out: list[StateBatch] = []
    for o in sorted(o for o in per_offset if o >= update.start_offset):
        value = per_offset[o]
        last = batches_out[-1] if batches_out else None
        if last and last.last_offset + 1 == o and (last.delivery_state, last.delivery_count) == value:
            batches_out[-1] = last._replace(last_offset=o)
        else:
            batches_out.append(StateBatch(o, o, *value))
    return PersistedState(update.start_offset, update.state_epoch, tuple(batches_out))
