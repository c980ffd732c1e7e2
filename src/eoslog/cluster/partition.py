"""One local replica of a topic partition: its log, high watermark and last stable offset, and its role
(leader from birth on a sole broker; leader or follower on a cluster, as the replica manager decides).

Contract
- Owns its :class:`eoslog.log.Log`; only the broker's event-loop thread calls it (fsyncs run in a worker
  thread through the group commit, never touching partition state).
- ``log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset`` always.
- The high watermark advances only over data that is durable by the topic's flush policy: with fsync on
  acknowledgement (the default) it moves when the group commit that covers the data completes, so a
  consumer can never read a record that a power loss could still take back. Without fsync it follows
  the log end offset at once.
- Waiters (acks=all producers, long-polling fetches) are woken when the high watermark moves; the last
  stable offset only ever moves with it (see ``last_stable_offset``), so read_committed waiters are
  woken by the same call.
- Transactions: ``last_stable_offset = min(first offset of an open transaction, first offset of a
  closed transaction whose marker is not durable yet, high watermark)``. ABORT markers add an entry
  to the aborted-transaction index (``.txnindex``, log/transaction_index.py), which read_committed
  fetches use to tell consumers what to drop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from bisect import bisect_right
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from eoslog.log.leader_epoch import LeaderEpochCache
from eoslog.log.producer_state import CompletedTxn, Duplicate, ProducerStateTable
from eoslog.log.producer_validation import AppendOrigin
from eoslog.log.record_validation import RecordCheck, check_client_batch, validate_records
from eoslog.log.transaction_index import AbortedTransactionIndex, AbortedTxn
from eoslog.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    error_for_code,
)
from eoslog.records.control import read_end_transaction_marker
from eoslog.records.header import HEADER, HEADER_SIZE, LOG_OVERHEAD, iter_headers, read_header

if TYPE_CHECKING:
    from eoslog.log.flusher import GroupCommit
    from eoslog.log.log import Log

log = logging.getLogger(__name__)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class PartitionAppend(NamedTuple):
    """What a Produce response needs about one partition's append (or its duplicate)."""

    first_offset: int
    last_offset: int
    log_append_time: int
    duplicate: bool


class Partition:
    def __init__(self, topic: str, index: int, log_: Log, group_commit: GroupCommit,
                 transaction_verifier: Callable[[str | None, int, int, str, int], None] | None = None,
                 writable: bool = True) -> None:
        self.topic = topic
        self.index = index
        self.log = log_
        self._group_commit = group_commit
        # Everything in the log at open time was recovered from disk: durable enough to serve.
        self.high_watermark = log_.log_end_offset
        self._flush_pending: asyncio.Future | None = None  # the group commit's answer being waited for
        # (offset, callback): callback(None) once the high watermark reaches offset, callback(exc) when
        # the wait fails first; see on_high_watermark.
        self._waiters: list[tuple[int, Callable[[BaseException | None], None]]] = []
        self._fetch_waiters: set[asyncio.Future] = set()
        self.flush_error: BaseException | None = None
        # What the local log holds durably by the topic's flush policy. On a single node the high
        # watermark follows it; on a replicated leader ``high_watermark_policy`` (the replica manager)
        # takes the minimum with the ISR's log end offsets; on a follower the leader sets it.
        self.local_durable_end = self.high_watermark
        self.high_watermark_policy: Callable[[Partition], None] | None = None
        # The leader epoch stamped into appended batches; None on a single node (batches keep theirs).
        self.leader_epoch: int | None = None
        self._leader_epochs: LeaderEpochCache | None = None
        self._replica_fetch_waiters: set[asyncio.Future] = set()
        self.follower_leader_high_watermark: int | None = None
        # False on a replica that is not the leader: nothing but replication may write to its log. A sole
        # broker's partitions lead from birth; a cluster's replica takes writes once the controller makes
        # it leader (become_leader, then take_writes).
        self.writable = writable
        # KIP-890 part 1 (cluster/transaction_verification.py): called as (transactional_id, producer_id,
        # producer_epoch, topic, partition) for each transactional batch; raises when the partition is
        # not part of the producer's ongoing transaction.
        self.transaction_verifier = transaction_verifier
        # Extensions' per-record rules for client batches (log/record_validation.py RecordCheck): each
        # refused record becomes a KIP-467 record error and the batch is not appended.
        self.record_checks: tuple[RecordCheck, ...] = ()
        self.producer_state = ProducerStateTable()
        # Transactions closed by a marker that is not below the high watermark yet: they still hold the
        # last stable offset back (Kafka's "unreplicated transactions"), so a read_committed consumer
        # never reads past a marker a crash could take back.
        self._undurable_txns: list[CompletedTxn] = []
        self.transaction_index = AbortedTransactionIndex.open(log_.directory, self._segment_bases())
        # Traffic counters for the metrics endpoint (cluster/partition_metrics.py): plain integers bumped
        # on the event loop, read there too. Client produce in, consumer fetch out (api/fetch.py), and
        # replication separately, as Kafka's BrokerTopicMetrics keep them apart.
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        self._recover_producer_state()
        log_.on_roll(self._on_roll)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset()
        for txn in self._undurable_txns:
            if first_unstable is None or txn.first_offset < first_unstable:
                first_unstable = txn.first_offset
        if first_unstable is None or first_unstable > self.high_watermark:
            return self.high_watermark
        return first_unstable

    def fetch_upper_bound(self, isolation_level: int) -> int:
        if isolation_level == READ_COMMITTED and not self.test_read_committed_past_lso:
            return self.last_stable_offset
        return self.high_watermark

    # --- writes ------------------------------------------------------------------------------------
    def append(self, records: Any, transactional_id: str | None = None, verified: bool = False) -> PartitionAppend:
        """Validates and appends one Produce request's records for this partition.

        prepare -> log -> apply: the producer-state checks run first and change nothing; the log
        assigns offsets; only then is producer state updated. A retried batch already in the log is
        answered with its original offsets and not written again. Synchronous on purpose: appends of
        one connection happen in arrival order, and nothing else can run between the three steps.
        ``verified``: the caller already checked a transactional batch with its transaction coordinator
        on another broker (api/produce.py), so :attr:`transaction_verifier` is not asked.
        """
        # Headers are parsed once, CRCs and sizes checked first (Kafka's order too: a corrupt batch is
        # refused before its producer state is looked at), then reused by the append.
        self._check_writable()
        view, headers = self.log.check_batches(records)
        if len(headers) != 1:
            raise InvalidRecordError(f"a produce request must carry exactly one record batch per partition, got {len(headers)}")
        header = headers[0]
        if header.is_control:
            raise InvalidRecordError("clients may not write control batches")
        if header.is_transactional and transactional_id is None:
            raise error_for_code(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)(
                "a transactional batch needs the request's transactional id")
        now_ms = int(time.time() * 1000)
        # Kafka's LogValidator, before producer state as in Kafka: the batch's rules, then its records'
        # (a refused record fails the whole batch, naming each bad record: KIP-467).
        check_client_batch(header, self.name)
        validate_records(view, header, self.log.config, topic_partition=self.name, now_ms=now_ms,
                         checks=self.record_checks)
        prepared = self.producer_state.prepare_append(header, now_ms)
        if isinstance(prepared, Duplicate):
            if not self.test_disable_duplicate_detection:
                return PartitionAppend(prepared.first_offset, prepared.last_offset, -1, True)
            prepared = None  # the test fault: append the retry again, producer state untouched
        if header.is_transactional and self.transaction_verifier is not None and not verified:
            self.transaction_verifier(transactional_id, header.producer_id, header.producer_epoch, self.topic, self.index)
        info = self.log.append_checked(view, headers, now_ms=now_ms, leader_epoch=self.leader_epoch)
        if prepared is not None:
            self.producer_state.apply(prepared, info.first_offset, info.last_offset)
        self.bytes_in += view.nbytes
        self.messages_in += header.last_offset_delta + 1
        self._after_append()
        return PartitionAppend(info.first_offset, info.last_offset, info.log_append_time, False)

    # Test-only faults that break exactly-once on purpose (eoslog.test.* broker properties, refused
    # unless EOSLOG_ALLOW_TEST_FAULTS=1; see server/config.py), so the verifier can show it notices.
    test_disable_duplicate_detection = False
    test_read_committed_past_lso = False

    def append_control(self, batch: bytes) -> PartitionAppend:
        """Appends one COMMIT/ABORT control batch (a transaction marker) written by the coordinator.

        prepare -> log -> apply as for client batches (a marker from a stale coordinator or for an older
        producer epoch is refused by the producer-state table); closing a transaction records it until
        the marker is durable, and an ABORT adds its aborted-transaction index entry.
        """
        self._check_writable()
        header = read_header(batch, 0)
        if not header.is_control:
            raise InvalidRecordError("append_control takes a control batch")
        marker = read_end_transaction_marker(batch, 0)
        now_ms = int(time.time() * 1000)
        prepared = self.producer_state.prepare_append(header, now_ms, marker, origin=AppendOrigin.COORDINATOR)
        info = self.log.append(batch, now_ms=now_ms, leader_epoch=self.leader_epoch)
        completed = self.producer_state.apply(prepared, info.first_offset, info.last_offset)
        if completed is not None:
            self._record_completed(completed, self.log.segments[-1].base_offset)
            if completed.last_offset >= self.high_watermark:
                self._undurable_txns.append(completed)
        self._after_append()
        return PartitionAppend(info.first_offset, info.last_offset, info.log_append_time, False)

    def append_internal(self, records: Any) -> PartitionAppend:
        """Appends batches a coordinator built (``__transaction_state`` records, transactional offset
        commits): no client checks, but producer batches still go through producer state (epoch only,
        no sequence numbers) so their transactions hold back the last stable offset."""
        self._check_writable()
        now_ms = int(time.time() * 1000)
        # The log checks every CRC before it writes; here only the header fields matter (and a corrupt
        # batch then fails in log.append, before producer state is touched: prepare changes nothing).
        headers = list(iter_headers(records, verify_crc=False))
        if len(headers) != 1:
            raise InvalidRecordError(f"append_internal takes exactly one batch, got {len(headers)}")
        prepared = self.producer_state.prepare_append(headers[0], now_ms, origin=AppendOrigin.COORDINATOR)
        info = self.log.append(records, now_ms=now_ms, leader_epoch=self.leader_epoch)
        if prepared is not None:
            self.producer_state.apply(prepared, info.first_offset, info.last_offset)
        self._after_append()
        return PartitionAppend(info.first_offset, info.last_offset, info.log_append_time, False)

    # --- roles (cluster/replica_manager.py changes them, through these methods only) -------------------
    def become_leader(self, leader_epoch: int, high_watermark_policy: Callable[[Partition], None],
                      take_writes: bool) -> None:
        """Leads from ``leader_epoch``: appended batches carry it, the high watermark follows the ISR
        (``high_watermark_policy``). Writes are taken at once only when ``take_writes`` (a leadership that
        goes on in a new epoch); a new leader waits for :meth:`take_writes`, once its epoch entry is
        durable."""
        self.leader_epoch = leader_epoch
        self.writable = take_writes
        self.high_watermark_policy = high_watermark_policy

    def take_writes(self) -> None:
        self.writable = True

    def become_follower(self) -> None:
        """Follows the leader: no writes but replication; the high watermark moves with the leader's.

        A replica whose recovery found damaged batches (CRC failures) is cut at the first one, so it
        fetches that batch and the rest again from the leader. Only as a follower: as a leader it may hold
        the only copy, so there the damage is kept and refused to readers (log/checked_read.py)."""
        self.leader_epoch = None
        self.writable = False
        self.high_watermark_policy = Partition._follow_leader_high_watermark
        if self.log.damaged_batches:
            first = self.log.damaged_batches[0]
            log.error("%s: cutting the replica at its damaged batch at offset %d (CRC failure) to fetch it "
                         "again from the leader", self.name, first)
            self.truncate_to(first)

    def resign(self, exc: BaseException) -> None:
        """Leadership moved: stop taking writes, and every acks=all producer still waiting learns it
        (``exc``: NOT_LEADER_OR_FOLLOWER); what it wrote may be truncated, so it is not acknowledged."""
        self.become_follower()
        self.fail_waiters(exc)

    def _follow_leader_high_watermark(self) -> None:
        """A follower's high watermark moves only with the leader's (set by the fetcher)."""
        if self.follower_leader_high_watermark is not None:
            self.set_follower_high_watermark(self.follower_leader_high_watermark)

    # --- replication (cluster/replica_manager.py drives these) --------------------------------------
    @property
    def leader_epochs(self) -> LeaderEpochCache:
        """The leader-epoch cache (``leader-epoch-checkpoint``), opened on first use: a single node never
        needs one."""
        if self._leader_epochs is None:
            self.open_leader_epochs()
        return self._leader_epochs

    def open_leader_epochs(self, new: bool = False) -> None:
        """``new``: the log was just made, there is no file to read (a replica of a new topic)."""
        self._leader_epochs = LeaderEpochCache.new(self.log.directory) if new else LeaderEpochCache.open(self.log.directory)

    def append_as_follower(self, records: Any) -> int:
        """Appends batches fetched from the leader with their offsets and epochs as they are.

        The log checks every CRC first (garbage is refused before anything is written); producer state
        and the aborted-transaction index are then rebuilt from the batch headers exactly as recovery
        does, so a follower that becomes leader has the same idempotence and transaction state.
        Returns the number of batches appended.
        """
        view = memoryview(records)
        info = self.log.append_as_is(view)
        self.replication_bytes_in += len(view)
        cache = self.leader_epochs
        segment_base = self.log.segments[-1].base_offset
        for header in iter_headers(view, verify_crc=False):
            latest = cache.latest_epoch
            if header.partition_leader_epoch >= 0 and (latest is None or header.partition_leader_epoch > latest):
                cache.assign(header.partition_leader_epoch, header.base_offset)
            marker = read_end_transaction_marker(view, header.position) if header.is_control else None
            completed = self.producer_state.replay(header, marker)
            if completed is not None:
                self._record_completed(completed, segment_base)
                if completed.last_offset >= self.high_watermark:
                    self._undurable_txns.append(completed)
        self._after_append()
        return info.batch_count

    def truncate_to(self, offset: int) -> bool:
        """Drops the log from ``offset`` on (a follower's divergent tail, KIP-101/279) and rebuilds what
        was derived from it: leader epochs, producer state, the aborted-transaction index."""
        if offset >= self.log.log_end_offset:
            return False
        self.log.truncate_to(offset)
        self.leader_epochs.truncate_from_end(self.log.log_end_offset)
        self.producer_state.truncate_to(self.log.directory, self.log.log_end_offset)
        self._recover_producer_state()
        end = self.log.log_end_offset
        self._undurable_txns = [t for t in self._undurable_txns if t.last_offset < end]
        self.high_watermark = min(self.high_watermark, end)
        self.local_durable_end = min(self.local_durable_end, end)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The leader's log starts past our end (retention there): start an empty log at ``offset``."""
        self.log.truncate_fully_and_start_at(offset)
        self.leader_epochs.clear()
        self.producer_state.truncate_fully_and_start_at(self.log.directory, offset)
        self.transaction_index.truncate_to(offset)
        self._undurable_txns = []
        self.high_watermark = self.local_durable_end = offset

    async def flush_now(self) -> None:
        """fsync what is appended so far (a follower, before it reports its log end to the leader)."""
        target = self.log.log_end_offset
        await self._group_commit.flush(self.log)
        self._durable(min(target, self.log.log_end_offset))

    def set_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's high watermark: the leader's, capped by what this replica holds durably (the
        fetcher reports the leader's with each fetch)."""
        self.follower_leader_high_watermark = leader_high_watermark
        self._advance_high_watermark(min(leader_high_watermark, self.local_durable_end))

    def read_for_replica(self, offset: int, max_bytes: int) -> Any:
        """A follower reads up to the log end offset, past the high watermark (that is how it moves)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside {self.name}'s range [{self.log_start_offset}, {self.log_end_offset}]")
        return self.log.read(offset, max_bytes, upper_bound=self.log.log_end_offset, min_one_batch=True,
                             verify_crc=True)

    def add_replica_fetch_waiter(self, future: asyncio.Future) -> None:
        self._replica_fetch_waiters.add(future)

    def remove_replica_fetch_waiter(self, future: asyncio.Future) -> None:
        self._replica_fetch_waiters.discard(future)

    def fail_waiters(self, exc: BaseException) -> None:
        """Leadership moved: every acks=all producer still waiting learns it (NOT_LEADER_OR_FOLLOWER)."""
        waiters, self._waiters = self._waiters, []
        for _, callback in waiters:
            callback(exc)
        self.wake_fetchers()
        self._wake_replica_fetchers()

    def _wake_replica_fetchers(self) -> None:
        if self._replica_fetch_waiters:
            waiters, self._replica_fetch_waiters = self._replica_fetch_waiters, set()
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def _check_writable(self) -> None:
        if not self.writable:
            raise NotLeaderOrFollowerError(f"{self.name}: this replica is not the leader")

    def _record_completed(self, completed: CompletedTxn, segment_base: int) -> None:
        if completed.is_aborted:
            lso = self.producer_state.last_stable_offset_after(completed)
            self.transaction_index.append(segment_base, AbortedTxn(
                completed.producer_id, completed.first_offset, completed.last_offset, lso))

    def _segment_bases(self) -> list[int]:
        return [segment.base_offset for segment in self.log.segments]

    def _on_roll(self, new_base_offset: int) -> None:
        # Snapshot at every roll, as Kafka does, so recovery replays at most one segment of headers. The
        # aborted-transaction entries below the snapshot must be durable before it exists.
        self.transaction_index.flush()
        self.producer_state.write_snapshot(self.log.directory, new_base_offset)

    def _recover_producer_state(self) -> None:
        """Newest valid snapshot, then the batch headers of the log tail after it. The aborted-transaction
        index is rebuilt over the same tail (all of it when an index file was damaged)."""
        directory = self.log.directory
        end = self.log.log_end_offset
        start = None
        if not self.transaction_index.damaged:
            start = self.producer_state.load_latest_snapshot(directory, end)
        if start is None:
            start = self.log.log_start_offset
        self.transaction_index.truncate_to(start)
        if start >= end:
            return
        replayed = 0
        bases = self._segment_bases()
        for header, marker in iter_batch_headers(self.log, start):
            completed = self.producer_state.replay(header, marker)
            if completed is not None:
                base = bases[max(bisect_right(bases, completed.last_offset) - 1, 0)]
                self._record_completed(completed, base)
            replayed += 1
        if replayed:
            log.info("%s: rebuilt producer state from offset %d (%d batches replayed)", self.name, start, replayed)

    def _after_append(self) -> None:
        self._wake_replica_fetchers()
        if not self.log.config.fsync_on_ack:
            self._durable(self.log.log_end_offset)
        elif self._flush_pending is None:
            self._request_flush()

    # At most one group-commit request per partition is outstanding; when it is done, the next one covers
    # whatever was appended meanwhile. Callbacks rather than a task per round: with many partitions each
    # acks=all request is usually its partition's only one, so a task (and its shield) per request showed
    # in the loop's profile (docs/benchmarks.md, "One syncfs per round").
    def _request_flush(self) -> None:
        while self.local_durable_end < self.log.log_end_offset:
            target = self.log.log_end_offset
            try:
                pending = self._group_commit.request(self.log)
            except Exception as exc:  # noqa: BLE001 - the same outcome as a failed fsync
                self._flush_failed(exc)
                return
            if pending is not None:
                self._flush_pending = pending
                pending.on_settled(lambda done, target=target: self._flush_done(done, target))
                return
            self._durable(min(target, self.log.log_end_offset))

    def _flush_done(self, done: asyncio.Future, target: int) -> None:
        self._flush_pending = None
        exc = done.exception() if not done.cancelled() else asyncio.CancelledError()
        if exc is not None:
            self._flush_failed(exc)
            return
        self._durable(min(target, self.log.log_end_offset))  # a truncation may have come between
        self._request_flush()

    def _flush_failed(self, exc: BaseException) -> None:
        log.error("fsync of %s failed; acks=all producers get KAFKA_STORAGE_ERROR", self.name, exc_info=exc)
        self.flush_error = exc
        waiters, self._waiters = self._waiters, []
        for _, callback in waiters:
            callback(exc)

    def _durable(self, offset: int) -> None:
        self.local_durable_end = max(self.local_durable_end, offset)
        if self.high_watermark_policy is None:
            self._advance_high_watermark(offset)
        else:
            self.high_watermark_policy(self)

    def advance_high_watermark(self, offset: int) -> None:
        """For the replica manager: the ISR agrees on ``offset`` (never past what is durable here)."""
        self._advance_high_watermark(min(offset, self.local_durable_end))

    def wait_for_high_watermark(self, offset: int) -> asyncio.Future:
        """A future resolved when the high watermark reaches ``offset`` (acks=all)."""
        future = asyncio.get_running_loop().create_future()
        if self.high_watermark >= offset:
            future.set_result(None)
        else:
            self._waiters.append((offset, lambda exc: _settle(future, exc)))
        return future

    def on_high_watermark(self, offset: int, callback: Callable[[BaseException | None], None]) -> None:
        """``wait_for_high_watermark`` without a future (Produce's acks=all, once per request):
        ``callback(None)`` once the high watermark reaches ``offset``, or ``callback(exc)`` when the wait
        fails first (a failed flush, leadership moved). The caller has checked that the high watermark
        is below ``offset``. The callback runs synchronously inside whatever advanced the watermark or
        failed the waits, so it must not raise and must not append to this partition."""
        self._waiters.append((offset, callback))

    def _advance_high_watermark(self, offset: int) -> None:
        if offset <= self.high_watermark:
            return
        self.high_watermark = offset
        if self._undurable_txns:
            self._undurable_txns = [t for t in self._undurable_txns if t.last_offset >= offset]
        if self._waiters:
            # Swapped first: a callback that adds a waiter adds it to the new list, which keeps it.
            waiters, self._waiters = self._waiters, []
            still_waiting = self._waiters
            for waiter in waiters:
                if waiter[0] <= offset:
                    waiter[1](None)
                else:
                    still_waiting.append(waiter)
        self.wake_fetchers()

    def wake_fetchers(self) -> None:
        if self._fetch_waiters:
            waiters, self._fetch_waiters = self._fetch_waiters, set()
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def add_fetch_waiter(self, future: asyncio.Future) -> None:
        self._fetch_waiters.add(future)

    def remove_fetch_waiter(self, future: asyncio.Future) -> None:
        self._fetch_waiters.discard(future)

    # --- reads -------------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, isolation_level: int, min_one_batch: bool) -> Any:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside {self.name}'s range [{self.log_start_offset}, {self.log_end_offset}]"
            )
        upper_bound = self.fetch_upper_bound(isolation_level)
        return self.log.read(offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch,
                             verify_crc=True)

    def aborted_transactions(self, fetch_offset: int, result: Any) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping a read_committed fetch: the
        marker at or past ``fetch_offset``, the data starting before the end of what was read."""
        if result.size == 0:
            return []
        candidates = self.transaction_index.collect(fetch_offset, self.last_stable_offset)
        if not candidates:
            return []
        upper = next_offset_after(result.regions)
        return [(t.producer_id, t.first_offset) for t in candidates if t.first_offset < upper]

    def maintain_transaction_index(self) -> None:
        """Drops the ``.txnindex`` files of segments retention or DeleteRecords removed."""
        self.transaction_index.retain_segments(self._segment_bases())

    def delete_records_before(self, offset: int) -> int:
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records of {self.name} below {offset}: the high watermark is {self.high_watermark}"
            )
        self.log.delete_records_before(offset)
        self.maintain_transaction_index()
        return self.log_start_offset

    async def close(self) -> None:
        while self._flush_pending is not None:
            with contextlib.suppress(Exception):  # a failed flush is already logged
                await asyncio.shield(self._flush_pending)
            await asyncio.sleep(0)  # let _flush_done run (it may request the next round)
        try:
            # A clean shutdown leaves a snapshot at the log end: the next start replays nothing.
            self.transaction_index.close()
            self.producer_state.write_snapshot(self.log.directory, self.log.log_end_offset)
        except OSError:
            log.exception("%s: could not write the producer-state snapshot at shutdown", self.name)


def next_offset_after(regions: Any) -> int:
    """The offset just past the last batch of a read (headers only: 61 bytes per batch are read)."""
    next_offset = -1
    for region in regions:
        position, end = region.position, region.position + region.length
        while position < end:
            # Only the header's first fields are needed; read_header would insist on the whole batch.
            fields = HEADER.unpack(os.pread(region.fd, HEADER_SIZE, position))
            next_offset = fields[0] + fields[6] + 1  # base_offset + last_offset_delta + 1
            position += fields[1] + LOG_OVERHEAD  # batch_length counts from after itself
    return next_offset


def iter_batch_headers(partition_log: Log, start: int):
    """(header, end-transaction marker or None) for every batch from ``start`` to the log end: used only
    at open, for the tail after the newest producer-state snapshot (a control batch's marker lives in
    its one record, so whole batches are read)."""
    for data, header in partition_log.read_batches(start):
        yield header, read_end_transaction_marker(data, header.position) if header.is_control else None


def _settle(future: asyncio.Future, exc: BaseException | None) -> None:
    if not future.done():
        if exc is None:
            future.set_result(None)
        else:
            future.set_exception(exc)
