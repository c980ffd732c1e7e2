"""Random interleavings of members (acquire, acknowledge, lock expiry, release), transactions (acknowledge,
COMMIT, ABORT, timeout, zombies) and leader changes, checked against a model of what each transaction
holds: held records never go back before their marker, the marker gives each its final state, a zombie
changes nothing, and a new leader holds the same records again."""

from __future__ import annotations

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from eoslog.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquireMode,
    OffsetRange,
    RecordState,
    SharePartition,
)
from eoslog.share import SharePartitionConfig as Config
from eoslog.share.transactional_acks import PendingAcknowledgements, TransactionOwner, TxnAckError, TxnState

S = RecordState
A = AcknowledgeType
CONFIG = Config(delivery_count_limit=3, max_record_locks=30, record_lock_duration_ms=1000)
TXN_TIMEOUT = 500
MEMBERS = st.sampled_from(["a", "b"])
PRODUCERS = st.sampled_from([1, 2])
TXN_TYPES = st.sampled_from([A.ACCEPT, A.REJECT, A.RELEASE, A.GAP])
MEMBER_TYPES = st.sampled_from([A.ACCEPT, A.RELEASE, A.REJECT])


def final(ack_type: A | None, count: int) -> RecordState:
    """A held record's state after its marker: ``ack_type`` on COMMIT, None on ABORT (a release)."""
    if ack_type in (A.ACCEPT,):
        return S.ACKNOWLEDGED
    if ack_type in (A.REJECT, A.GAP):
        return S.ARCHIVED
    return S.AVAILABLE if count < CONFIG.delivery_count_limit else S.ARCHIVED


class TransactionalAcks(RuleBasedStateMachine):
    @initialize(start=st.integers(0, 5))
    def start(self, start):
        self.value = PendingAcknowledgements.of(SharePartition.initial(CONFIG, start))
        self.now = 0
        self.log_end = start + 40
        self.held: dict[int, tuple[int, A, int]] = {}  # offset -> (producer id, pending type, delivery count)
        self.acquire("a", 8)
        self.acquire("b", 6)
        self.epochs: dict[int, int] = {}  # each producer's newest epoch
        # The epochs the value remembers: a leader change keeps only those of producers holding records
        # (the transaction coordinator's registration check is the fence for the others).
        self.known: dict[int, int] = {}

    def _runs(self):
        return {o: r for r in self.value.partition.in_flight for o in range(r.first_offset, r.last_offset + 1)}

    def _pick(self, data, member):
        """A range of offsets ``member`` holds now (or any range, sometimes, to be refused)."""
        mine = sorted(o for o, r in self._runs().items() if r.member_id == member and r.state is S.ACQUIRED)
        if mine and data.draw(st.integers(0, 9)):
            first = data.draw(st.sampled_from(mine))
            last = first
            while last + 1 in mine and data.draw(st.booleans()):
                last += 1
            return first, last
        p = self.value.partition
        first = data.draw(st.integers(p.start_offset, p.end_offset + 2))
        return first, first + data.draw(st.integers(0, 3))

    @rule(member=MEMBERS, n=st.integers(1, 8))
    def acquire(self, member, n):
        p = self.value.partition.expire_locks(self.now).after
        got = p.acquire(member, p.next_fetch_offset(), [OffsetRange(p.start_offset, self.log_end - 1)],
                        now_ms=self.now, max_records=n, upper_bound=self.log_end,
                        mode=AcquireMode.RECORD_LIMIT)
        self.value = self.value.with_partition(got.after)

    @rule(member=MEMBERS, data=st.data(), ack_type=MEMBER_TYPES)
    def member_acknowledges(self, member, data, ack_type):
        first, last = self._pick(data, member)
        change = self.value.partition.acknowledge(member, [AcknowledgementBatch(first, last, (ack_type,))],
                                                  now_ms=self.now)
        if change.error.value != "NONE":
            assert change.after is self.value.partition
        # A member can never acknowledge what a transaction holds.
        assert not (change.error.value == "NONE" and any(first <= o <= last for o in self.held))
        self.value = self.value.with_partition(change.after)

    @rule(member=MEMBERS, pid=PRODUCERS, data=st.data(), types=st.lists(TXN_TYPES, min_size=1, max_size=4),
          epoch_shift=st.sampled_from([0, 0, 0, -1, 1]))
    def transaction_acknowledges(self, member, pid, data, types, epoch_shift):
        first, last = self._pick(data, member)
        types = types[:1] if len(types) != last - first + 1 else types
        epoch = self.epochs.get(pid, 0) + epoch_shift
        if epoch < 0:
            return
        before = self.value
        runs = self._runs()
        change = before.acknowledge(member, pid, epoch, [AcknowledgementBatch(first, last, tuple(types))],
                                    now_ms=self.now, transaction_timeout_ms=TXN_TIMEOUT)
        event(f"transaction acknowledgement: {change.error.value}")
        if change.error is not TxnAckError.NONE:
            assert change.after is before
            if epoch < self.known.get(pid, -1):
                assert change.error is TxnAckError.PRODUCER_FENCED
            return
        assert epoch >= self.known.get(pid, -1)
        assert before.state_of(pid) is not TxnState.OVERDUE
        assert before.state_of(pid) is None or epoch == before.holds[pid].producer_epoch
        for o in range(max(first, before.partition.start_offset), last + 1):
            run = runs[o]
            assert run.state is S.ACQUIRED and run.member_id == member and run.lock_deadline_ms > self.now
            self.held[o] = (pid, A(types[0] if len(types) == 1 else types[o - first]), run.delivery_count)
        self.epochs[pid] = max(epoch, self.epochs.get(pid, 0))
        self.known[pid] = epoch
        self.value = change.after

    @rule(pid=PRODUCERS, commit=st.booleans(), bump=st.sampled_from([0, 1]), zombie=st.booleans())
    def marker(self, pid, commit, bump, zombie):
        epoch = self.epochs.get(pid, 0) + bump
        if zombie and self.known.get(pid, 0) > 0:
            before = self.value
            change = before.complete(pid, self.known[pid] - 1, commit)
            assert change.error is TxnAckError.PRODUCER_FENCED and change.after is before
            return
        change = self.value.complete(pid, epoch, commit)
        assert change.error is TxnAckError.NONE
        self.value = change.after
        self.epochs[pid] = self.known[pid] = epoch
        p = self.value.partition
        runs = self._runs()
        for o, (owner, ack_type, count) in list(self.held.items()):
            if owner != pid:
                continue
            del self.held[o]
            event(f"held record {'committed' if commit else 'aborted'}, {'gone' if o < p.start_offset else 'kept'}")
            expected = final(ack_type if commit else None, count)
            if o < p.start_offset:
                assert expected.is_done or o < self._dropped_below, (o, expected)
            else:
                assert (runs[o].state, runs[o].delivery_count, runs[o].member_id) == (expected, count, None)
        assert self.value.state_of(pid) is None

    @rule(ms=st.integers(1, 300))
    def time_passes_and_locks_expire(self, ms):
        self.now += ms
        self.value = self.value.with_partition(self.value.partition.expire_locks(self.now).after)
        self.value = self.value.expire_transactions(self.now).after

    @rule(member=MEMBERS)
    def member_leaves(self, member):
        self.value = self.value.with_partition(self.value.partition.release_member(member).after)

    @rule(by=st.integers(1, 4))
    def log_start_moves(self, by):
        target = self.value.partition.start_offset + by
        self._dropped_below = max(self._dropped_below, target)
        self.value = self.value.with_partition(self.value.partition.advance_log_start_offset(target).after)
        self.log_end = max(self.log_end, target + 20)  # the log grows as its start moves

    @rule(now=st.integers(0, 3))
    def leader_changes(self, now):
        if now:  # a leader change takes every member's records back: rarer, so transactions get going
            return
        loaded = SharePartition.load(CONFIG, self.value.partition.snapshot())
        again = PendingAcknowledgements.load(loaded, self.value.persisted_holds(), now_ms=self.now,
                                             transaction_timeout_ms=TXN_TIMEOUT)
        # The same records held by the same producers, at the same epochs; members' locks are gone.
        held_before = {o: r.member_id for o, r in self._runs().items() if isinstance(r.member_id, TransactionOwner)}
        self.value = again
        event(f"leader change with {len(held_before) > 0 and 'held records' or 'nothing held'}")
        assert {o: r.member_id for o, r in self._runs().items()
                if isinstance(r.member_id, TransactionOwner)} == held_before
        assert again.producer_epochs == {pid: h.producer_epoch for pid, h in again.holds.items()}
        self.known = dict(again.producer_epochs)

    _dropped_below = -1

    @invariant()
    def held_records_are_the_models(self):
        if not hasattr(self, "value"):
            return
        p = self.value.partition
        runs = self._runs()
        for o, (pid, _, count) in self.held.items():
            if o < p.start_offset:
                assert o < self._dropped_below  # only a moved log start offset drops a held record
                continue
            assert (runs[o].state, runs[o].member_id, runs[o].delivery_count) == (S.ACQUIRED, TransactionOwner(pid),
                                                                                   count)
        assert {o for o, r in runs.items() if isinstance(r.member_id, TransactionOwner)} == {
            o for o in self.held if o >= p.start_offset}
        assert all(r.delivery_count <= CONFIG.delivery_count_limit for r in runs.values())


TestTransactionalAcks = TransactionalAcks.TestCase
TestTransactionalAcks.settings = settings(max_examples=400, stateful_step_count=50, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
