"""Random sequences of acquire / acknowledge / lock expiry / release / log start moves / leader changes
keep the share partition's invariants, and the updates it asks to write rebuild its snapshot."""

from __future__ import annotations

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from share_helpers import overlay

from eoslog.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquireMode,
    OffsetRange,
    PersistedState,
    RecordState,
    ShareError,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)

S = RecordState
CONFIG = SharePartitionConfig(delivery_count_limit=3, max_record_locks=25, record_lock_duration_ms=100)
MEMBERS = st.sampled_from(["a", "b", "c"])


@st.composite
def logs(draw):
    """Log batches with holes between some of them (compaction), and which of them were aborted."""
    offset, batches, aborted = draw(st.integers(0, 3)), [], []
    for _ in range(draw(st.integers(1, 12))):
        offset += draw(st.sampled_from([0, 0, 0, 1, 2]))
        batch = OffsetRange(offset, offset + draw(st.integers(0, 5)))
        batches.append(batch)
        if draw(st.integers(0, 4)) == 0:
            aborted.append(batch)
        offset = batch.last_offset + 1
    return batches, aborted


@st.composite
def persisted_states(draw):
    """What a share coordinator may hold: runs in any persisted state (Acquired too, from an older writer),
    at any count up to the limit, with gaps, some of it below the start offset."""
    offset, batches = draw(st.integers(0, 4)), []
    for _ in range(draw(st.integers(0, 6))):
        offset += draw(st.sampled_from([0, 0, 1, 3]))
        last = offset + draw(st.integers(0, 3))
        state = draw(st.sampled_from([S.AVAILABLE, S.ACQUIRED, S.ACKNOWLEDGED, S.ARCHIVED]))
        batches.append(StateBatch(offset, last, state, draw(st.integers(0, CONFIG.delivery_count_limit))))
        offset = last + 1
    start = draw(st.integers(0, max(0, offset)))
    return PersistedState(start, draw(st.integers(0, 3)), tuple(batches))


def per_offset(p: SharePartition) -> dict[int, tuple]:
    return {o: (r.state, r.delivery_count, r.member_id, r.lock_deadline_ms)
            for r in p.in_flight for o in range(r.first_offset, r.last_offset + 1)}


class SharePartitionMachine(RuleBasedStateMachine):
    @initialize(log=logs(), persisted=persisted_states())
    def start(self, log, persisted):
        """A leader takes the share partition over from what the share coordinator stored."""
        self.log, self.aborted = log
        self.p = SharePartition.load(CONFIG, persisted)
        assert self.p.acquired_count() == 0
        self.stored = self.p.snapshot()  # the share coordinator's view: every update laid over the snapshot
        self.now = 0
        self.done: dict[int, tuple] = {}  # offset -> (state, count) when first seen done: never changes
        self.counts: dict[int, int] = {}  # offset -> highest delivery count seen: never goes down
        self.bounds = (self.p.start_offset, self.p.end_offset)

    def apply(self, change):
        if change.update is not None:
            self.stored = overlay(self.stored, change.update)
        self.p = change.after

    @rule(member=MEMBERS, max_records=st.integers(1, 15), mode=st.sampled_from(AcquireMode),
          read=st.integers(1, 6), headroom=st.integers(-3, 30))
    def acquire(self, member, max_records, mode, read, headroom):
        before = per_offset(self.p)
        fetch_offset = self.p.next_fetch_offset()
        batches = [b for b in self.log if b.last_offset >= fetch_offset][:read]
        upper_bound = fetch_offset + headroom
        change = self.p.acquire(member, fetch_offset, batches, now_ms=self.now, max_records=max_records,
                                upper_bound=upper_bound, aborted=self.aborted, mode=mode)
        acquired = [o for r in change.acquired_records for o in range(r.first_offset, r.last_offset + 1)]
        for records in change.acquired_records:
            for o in range(records.first_offset, records.last_offset + 1):
                previous = before.get(o)
                if previous is None:  # new: never handed out before
                    assert o >= self.p.end_offset and records.delivery_count == 1
                else:  # only an Available record below the limit goes out, never one somebody holds
                    assert previous[0] is S.AVAILABLE and previous[1] < CONFIG.delivery_count_limit
                    assert records.delivery_count == previous[1] + 1
                assert o < upper_bound and o not in self.done
                assert not any(a.first_offset <= o <= a.last_offset for a in self.aborted)
        if mode is AcquireMode.RECORD_LIMIT:
            assert len(acquired) <= max_records
        event(f"acquire: {'some' if acquired else 'none'}, archived {'some' if change.archived else 'none'}")
        self.apply(change)

    @rule(member=MEMBERS, data=st.data())
    def acknowledge(self, member, data):
        low, high = self.p.start_offset - 2, self.p.end_offset + 2
        batches, offset = [], low
        for _ in range(data.draw(st.integers(1, 3))):
            if max(offset, 0) > high:
                break
            first = data.draw(st.integers(max(offset, 0), high))
            last = data.draw(st.integers(first, min(first + 6, high)))
            one_type = data.draw(st.booleans())
            types = data.draw(st.lists(st.sampled_from(list(AcknowledgeType)), min_size=1 if one_type else
                                       last - first + 1, max_size=1 if one_type else last - first + 1))
            batches.append(AcknowledgementBatch(first, last, tuple(types)))
            offset = last + 1
        before = per_offset(self.p)
        change = self.p.acknowledge(member, batches, now_ms=self.now)
        if change.error is ShareError.NONE:
            # a batch wholly below the start offset names records done already: never answered NONE
            assert all(last >= self.p.start_offset for _, last, _ in batches)
            for first, last, _ in batches:
                for o in range(max(first, self.p.start_offset), last + 1):
                    state, _, owner, deadline = before[o]
                    assert state is S.ACQUIRED and owner == member and deadline > self.now
        else:
            assert change.after == self.p and change.update is None
        event(f"acknowledge any: {change.error.name}")
        self.apply(change)

    @precondition(lambda self: self.p.acquired_count() > 0)
    @rule(data=st.data())
    def acknowledge_what_a_member_holds(self, data):
        """Mostly acquired runs, one after the other: a mix of good batches and refused ones."""
        first_run = data.draw(st.sampled_from([r for r in self.p.in_flight if r.state is S.ACQUIRED]))
        member = first_run.member_id
        later = [r for r in self.p.in_flight if r.first_offset > first_run.last_offset]
        chosen = [first_run] + (sorted(data.draw(st.lists(st.sampled_from(later), max_size=2, unique=True)),
                                       key=lambda r: r.first_offset) if later else [])
        batches = []
        for run in chosen:
            first = data.draw(st.integers(run.first_offset, run.last_offset))
            last = data.draw(st.integers(first, run.last_offset))
            size = 1 if data.draw(st.booleans()) else last - first + 1
            types = data.draw(st.lists(st.sampled_from(list(AcknowledgeType)), min_size=size, max_size=size))
            batches.append(AcknowledgementBatch(first, last, tuple(types)))
        before = per_offset(self.p)
        good = all(before[o][0] is S.ACQUIRED and before[o][2] == member and before[o][3] > self.now
                   for first, last, _ in batches for o in range(first, last + 1))
        change = self.p.acknowledge(member, batches, now_ms=self.now)
        assert change.error is (ShareError.NONE if good else ShareError.INVALID_RECORD_STATE)
        if not good:
            assert change.after == self.p and change.update is None
        event(f"acknowledge held: {change.error.name} ({len(batches)} batches)")
        self.apply(change)

    @rule(elapsed=st.sampled_from([1, 50, 99, 100, 101, 150]))
    def time_passes(self, elapsed):
        """Often to a lock deadline exactly, or just before or after it (the lock is 100 ms)."""
        self.now += elapsed

    @rule()
    def expire_locks(self):
        before = per_offset(self.p)
        change = self.p.expire_locks(self.now)
        for r in change.released:
            assert all(before[o][0] is S.ACQUIRED and before[o][3] <= self.now
                       for o in range(r.first_offset, r.last_offset + 1))
        self.apply(change)
        assert all(r.lock_deadline_ms > self.now for r in self.p.in_flight if r.state is S.ACQUIRED)

    @rule(member=MEMBERS)
    def release_member(self, member):
        self.apply(self.p.release_member(member))
        assert self.p.acquired_count(member) == 0

    @precondition(lambda self: self.p.end_offset > self.p.start_offset)
    @rule(data=st.data())
    def log_start_offset_moves(self, data):
        self.apply(self.p.advance_log_start_offset(data.draw(st.integers(self.p.start_offset, self.p.end_offset + 3))))

    @rule()
    def leader_changes(self):
        """The new leader loads what the share coordinator stored: the same records, no locks."""
        assert self.stored == self.p.snapshot()
        loaded = SharePartition.load(CONFIG, self.stored)
        assert loaded.snapshot() == self.p.snapshot()
        assert loaded.acquired_count() == 0
        self.p = loaded

    @invariant()
    def holds(self):
        p = self.p
        assert (p.start_offset, p.end_offset) >= (0, 0)
        assert p.start_offset >= self.bounds[0] and p.end_offset >= self.bounds[1]  # neither ever goes back
        self.bounds = (p.start_offset, p.end_offset)
        now = per_offset(p)
        assert all(p.start_offset <= o < p.end_offset for o in now)
        assert sorted(now) == list(range(p.start_offset, p.end_offset))
        for o, (state, count, owner, _) in now.items():
            assert count <= CONFIG.delivery_count_limit
            assert count >= self.counts.get(o, 0)
            self.counts[o] = count
            if o in self.done:
                assert (state, count) == self.done[o]  # acknowledged and archived are final
            elif state.is_done:
                self.done[o] = (state, count)
        assert all(o < p.start_offset or o in now for o in self.done)
        assert self.stored.start_offset == p.start_offset and self.stored == p.snapshot()


SharePartitionMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=40, deadline=None, suppress_health_check=list(HealthCheck))
test_share_partition_invariants = SharePartitionMachine.TestCase
