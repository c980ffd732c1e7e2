"""The transaction coordinator's I/O shell: carries out the sans-IO core's Decisions on this broker.

Contract
- Owns ``__transaction_state`` (created at start; a single node leads every partition of it), the
  cache of :class:`TransactionMetadata` per partition of that topic, the producer id block file, and
  the tasks that write markers and time transactions out. Only the broker's event loop calls it.
- prepare -> log -> apply (docs/transactions.md, "How the shell carries out a Decision"): a transit is
  appended to the id's ``__transaction_state`` partition and applied only once the high watermark has
  passed it (fsync'ed by the group commit); a failed append aborts the transit.
- The Prepare record is the commit point. Markers then go to every partition of the transaction through
  :meth:`Partition.append_control`, each waited on until durable, and only then is the Complete record
  logged. A crash anywhere in between is finished at the next start from what the log says
  (``log_format.recovery_actions``).
- ``offsets_marker_listeners`` are called as ``listener(partition, producer_id, commit)`` once a marker
  written to ``__consumer_offsets``-``partition`` is durable: the group coordinator publishes or drops
  that producer's pending transactional offsets there.
- The coordinator epoch is the leader epoch of the id's ``__transaction_state`` partition at the time
  this broker loaded it (0 on a single node). Every marker carries it; a partition that has seen a
  marker from a newer coordinator refuses an older one (TRANSACTION_COORDINATOR_FENCED), and a
  completion that meets that refusal stops: a newer coordinator owns the transaction.
- On a cluster, requests for ids of a partition this broker leads but has not loaded yet are answered
  COORDINATOR_LOAD_IN_PROGRESS; ids of partitions led elsewhere, NOT_COORDINATOR. The load itself is
  one step on the loop (the topic is compacted, so it stays small), so no request sees half a load.
- Check-back transactions (eoslog's BeginCheckBack / PollCheckBack / AnswerCheckBack) live in
  ``checkback_service.py`` (``self.check_backs``); the timer hands it every timed-out transaction, and it
  moves check-back ones to Checking instead of aborting them.
- Transaction groups (eoslog's CommitTransactionGroup and siblings) live in ``groups.py``
  (``self.groups``): a transactional id it has *pinned* gets CONCURRENT_TRANSACTIONS from every API here
  and is passed by the timeout, until its group commit is complete.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from eoslog.cluster.broker_client import BrokerClient, BrokerConnectionError
from eoslog.cluster.topics import CONSUMER_OFFSETS, TRANSACTION_STATE
from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.checkback import CheckPolicy
from eoslog.coordinator.transaction.checkback_service import CheckBackService
from eoslog.coordinator.transaction.decisions import Decision, TransactionConfig, TxnError
from eoslog.coordinator.transaction.groups import TransactionGroups
from eoslog.coordinator.transaction.log_format import (
    encode_key,
    encode_value,
    load_state,
    partition_for,
    recovery_actions,
)
from eoslog.coordinator.transaction.metadata import (
    TRANSACTION_VERSION_1,
    TRANSACTION_VERSION_2,
    TopicPartition,
    TransactionMetadata,
    TransactionResult,
    TxnTransitMetadata,
    WriteTxnMarkers,
)
from eoslog.coordinator.transaction.producer_id_block import (
    BLOCK_FILE_NAME,
    ProducerIdBlockAllocator,
    decode_block_file,
    encode_block_file,
)
from eoslog.coordinator.transaction.state import TransactionState
from eoslog.log.checkpoint import write_atomically
from eoslog.log.producer_state import ProducerStateError
from eoslog.protocol.errors import (
    CoordinatorNotAvailableError,
    ErrorCode,
    NotLeaderOrFollowerError,
    error_for_code,
)
from eoslog.protocol.messages import (
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    WriteTxnMarkersRequest,
)
from eoslog.records.batch import iter_batches
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.control import ControlType, build_control_batch

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition
    from eoslog.server.broker import Broker

log = logging.getLogger(__name__)

COORDINATOR_EPOCH = 0
# EndTxn answers once the Complete record is logged (so the client's next AddPartitionsToTxn does not
# meet CONCURRENT_TRANSACTIONS), but never waits longer than this: the decision is already durable.
END_TXN_COMPLETION_WAIT_S = 5.0
MARKER_RETRY_BACKOFF_S = (0.05, 1.0)
API_INIT_PRODUCER_ID, API_ADD_PARTITIONS, API_ADD_OFFSETS, API_END_TXN = 22, 24, 25, 26
END_TXN_V2_SINCE = 5  # EndTxn v5+ speaks transaction version 2 (KIP-890 part 2)
ADD_PARTITIONS_BROKER_VERSION = 5  # AddPartitionsToTxn v4+ is the broker-to-coordinator form
WRITE_TXN_MARKERS_KEY, DESCRIBE_TRANSACTIONS_KEY = 27, 65
LOAD_CHUNK = 8 * 1024 * 1024
SKIP_COORDINATOR_LOAD = "eoslog.test.skip.coordinator.load"  # a test-only fault (server/config.py)

# KIP-890 part 1 on the produce path: how a failed verification is put to the producer. Transient
# coordinator states become NOT_ENOUGH_REPLICAS, the one retriable error every client has always
# retried on Produce (Kafka does the same); a fence is INVALID_PRODUCER_EPOCH, the Produce spelling.
_PRODUCE_VERIFY_ERRORS = {
    TxnError.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    TxnError.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    TxnError.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    TxnError.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    TxnError.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
}


def now_ms() -> int:
    return int(time.time() * 1000)


class TransactionDescription:
    """What DescribeTransactions / ListTransactions / the CLI show of one transactional id."""

    def __init__(self, metadata: TransactionMetadata) -> None:
        self.transactional_id = metadata.transactional_id
        self.state = metadata.state
        self.producer_id = metadata.producer_id
        self.producer_epoch = metadata.producer_epoch
        self.txn_timeout_ms = metadata.txn_timeout_ms
        self.txn_start_timestamp = metadata.txn_start_timestamp
        self.topic_partitions = sorted(metadata.topic_partitions)


def _coordinator_epoch(partition: Partition) -> int:
    """The leader epoch of a __transaction_state partition this broker leads (None on a single node)."""
    epoch = partition.leader_epoch
    return COORDINATOR_EPOCH if epoch is None else max(epoch, COORDINATOR_EPOCH)


class TransactionCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.registry = broker.registry  # topics and partitions (cluster/registry.py)
        config = broker.config
        self.config = TransactionConfig(
            transaction_max_timeout_ms=config.transaction_max_timeout_ms,
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            check_policy=CheckPolicy(max_checks=config.transaction_check_max_checks,
                                     backoff_ms=config.transaction_check_backoff_ms,
                                     backoff_max_ms=config.transaction_check_backoff_max_ms),
            check_lease_ms=config.transaction_check_lease_ms,
        )
        self.num_partitions = config.transaction_state_log_num_partitions
        self._states: dict[int, dict[str, TransactionMetadata]] = {}
        self._block_path = Path(config.data_dir) / BLOCK_FILE_NAME
        self._allocator: ProducerIdBlockAllocator | None = None
        self._zk_block: list[int] | None = None  # [next, end) in cluster mode
        # The __transaction_state partitions served here: None on a single node (all); in a cluster the
        # ones this broker leads. Other transactional ids answer NOT_COORDINATOR.
        self._owned: set[int] | None = None
        self._coordinator_epochs: dict[int, int] = {}  # partition -> leader epoch when loaded (cluster)
        self._loaded: set[int] = set()  # partitions whose ids are in memory (loaded, not unloaded since)
        self._marker_clients: dict[int, BrokerClient] = {}  # cluster mode: markers to other leaders
        self._completions: dict[str, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self._timer: asyncio.Task | None = None
        self._stopping = False
        self.offsets_marker_listeners: list[Callable[[int, int, bool], None]] = []
        self.groups = TransactionGroups(self)
        self.check_backs = CheckBackService(self)

    # ---- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Opens the producer id block file, loads ``__transaction_state`` and finishes what it says was
        decided (markers and Complete records are written in the background)."""
        data = self._block_path.read_bytes() if self._block_path.exists() else None
        self._allocator = ProducerIdBlockAllocator(decode_block_file(data) if data is not None else 0)
        for partition in self.registry.partitions.values():
            self.attach_partition(partition)
        loaded = 0
        # Like Kafka, __transaction_state is created on first use (ensure_state_topic), not at start.
        if self.registry.topics.get(TRANSACTION_STATE) is not None:
            self.ensure_state_topic()
            for index in self.registry.coordinator_partitions(TRANSACTION_STATE, self.num_partitions):
                loaded += self._load(index)
        actions = 0
        for index, states in self._states.items():
            for action in recovery_actions(states, now_ms()):
                actions += 1
                self._spawn_completion(action.markers, action.complete)
        # After every partition is loaded: a group's members live in other partitions than the group.
        actions += self.groups.recover()
        if loaded or actions:
            log.info("transaction coordinator loaded %d transactional ids; finishing %d decided transactions",
                     loaded, actions)
        self._timer = asyncio.get_running_loop().create_task(self._timer_loop())

    def _load(self, index: int) -> int:
        partition = self.registry.partition(TRANSACTION_STATE, index)
        # The coordinator epoch is the partition's leader epoch when this broker began to coordinate it,
        # at start-up as on a later takeover: markers carry it, and a partition refuses markers from an
        # epoch older than one it has seen (a restarted broker that still leads must not write as epoch 0).
        self._coordinator_epochs[index] = _coordinator_epoch(partition)
        records = list(_read_records(partition))
        self._states[index] = load_state(records)
        self.groups.load(records)
        self._loaded.add(index)
        return len(self._states[index])

    def own_partitions(self, partitions: Iterable[int]) -> None:
        """Cluster mode: coordinate only these partitions' transactional ids."""
        self._owned = set(partitions)

    def owns(self, transactional_id: str) -> bool:
        return self._owned is None or self.partition_for(transactional_id) in self._owned

    def coordinated_together(self, a: str, b: str) -> bool:
        """Whether two transactional ids always share a coordinator: on one node every id does; on a
        cluster only ids of one ``__transaction_state`` partition (leadership moves per partition)."""
        return self._owned is None or self.partition_for(a) == self.partition_for(b)

    def not_owned_error(self, transactional_id: str) -> TxnError:
        return self._not_owned_error(transactional_id)

    def _not_owned_error(self, transactional_id: str) -> TxnError:
        """Why this broker does not serve ``transactional_id``: led here but not loaded yet, or led elsewhere."""
        cluster = self.registry.cluster
        if cluster is not None:
            state = cluster.view.states.get((TRANSACTION_STATE, self.partition_for(transactional_id)))
            if state is not None and state.leader == self.broker.config.node_id:
                return TxnError.COORDINATOR_LOAD_IN_PROGRESS
        return TxnError.NOT_COORDINATOR

    def ownership_error(self, transactional_id: str) -> ErrorCode | None:
        """None when this broker coordinates ``transactional_id``; else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS (admin APIs answer it per id)."""
        if self.owns(transactional_id):
            return None
        return ErrorCode[self._not_owned_error(transactional_id).value]

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self._coordinator_epochs.get(self.partition_for(transactional_id), COORDINATOR_EPOCH)

    def unload_partition(self, index: int) -> None:
        """Leadership of ``__transaction_state``-``index`` moved away: forget its ids and stop finishing
        their transactions here (the new leader finishes them from the replicated log)."""
        if self._owned is not None:
            self._owned.discard(index)
        states = self._states.get(index, {})
        for transactional_id in list(states):
            task = self._completions.pop(transactional_id, None)
            if task is not None:
                task.cancel()
        self._states[index] = {}
        self._loaded.discard(index)
        self.groups.unload(index)
        log.info("transaction coordinator gave up %s-%d: %d transactional ids now coordinated elsewhere",
                 TRANSACTION_STATE, index, len(states))

    def load_partition(self, index: int) -> None:
        """This broker now leads ``__transaction_state``-``index``: load it and finish what it decided."""
        if index in self._loaded:
            # A new leader epoch while this broker led all along (the controller dropped a dead follower
            # from the ISR): the log was not truncated, so the ids in memory are exact, and their
            # transits and completions in flight stay valid. Reloading would start a second completion
            # of each decided transaction beside the running one (a late duplicate marker could land
            # in the producer's next transaction). The coordinator epoch stays the one loaded with: no
            # other coordinator wrote markers for this partition meanwhile.
            log.info("transaction coordinator keeps %s-%d: led here without interruption, %d transactional ids, "
                     "coordinator epoch still %d", TRANSACTION_STATE, index, len(self._states.get(index, {})),
                     self._coordinator_epochs[index])
            return
        started = time.monotonic()
        if self._owned is not None:
            self._owned.add(index)
        self.ensure_state_topic()
        if self.broker.config.test_faults.get(SKIP_COORDINATOR_LOAD):
            self._coordinator_epochs[index] = _coordinator_epoch(self.registry.partition(TRANSACTION_STATE, index))
            self._states[index] = {}
            self._loaded.add(index)
            log.warning("test fault: %s-%d served without loading it", TRANSACTION_STATE, index)
            return
        loaded = self._load(index)
        actions = 0
        for action in recovery_actions(self._states[index], now_ms()):
            actions += 1
            self._spawn_completion(action.markers, action.complete)
        actions += self.groups.recover(index)  # its members are coordinated here too
        log.info("transaction coordinator took over %s-%d (coordinator epoch %d): %d transactional ids in "
                 "%.0f ms, finishing %d", TRANSACTION_STATE, index, self._coordinator_epochs[index], loaded,
                 (time.monotonic() - started) * 1000, actions)

    async def stop(self) -> None:
        self._stopping = True
        for client in self._marker_clients.values():
            client.close()
        tasks = [t for t in [self._timer, *self._tasks] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass

    def attach_partition(self, partition: Partition) -> None:
        """Every partition checks transactional batches against this coordinator (KIP-890 part 1)."""
        partition.transaction_verifier = self.verify_partition_in_transaction

    # ---- producer ids -----------------------------------------------------------------------------

    def allocate_producer_id(self) -> int:
        """A never-used producer id; a new block end is fsync'ed first (once per 1000 ids, on the loop:
        one small file write is cheaper than a thread hop)."""
        cluster = getattr(self.broker, "cluster", None)
        if cluster is not None:
            # A cluster hands out producer ids in blocks claimed in ZooKeeper (Kafka's
            # /latest_producer_id_block), so no two brokers ever give out the same id. One claim per
            # 1000 ids, made on the loop: a conditional set on a local ZooKeeper takes about a millisecond.
            if self._zk_block is None or self._zk_block[0] >= self._zk_block[1]:
                try:
                    self._zk_block = list(cluster.zk.claim_producer_id_block(self.broker.config.node_id, 1000))
                except Exception as exc:
                    raise CoordinatorNotAvailableError(f"cannot claim producer ids in ZooKeeper: {exc!r}") from exc
            producer_id = self._zk_block[0]
            self._zk_block[0] += 1
            return producer_id
        assert self._allocator is not None, "the coordinator is not started"
        return self._allocator.allocate_with(self._persist_block)

    def _persist_block(self, block_end: int) -> None:
        write_atomically(self._block_path, encode_block_file(block_end))

    # ---- the cache --------------------------------------------------------------------------------

    def ensure_state_topic(self) -> None:
        """Creates ``__transaction_state`` on first use: the first transactional request, or on a single
        node the first FindCoordinator for a transactional id. In a cluster creation is asked of the
        controller and CoordinatorNotAvailableError raised until the topic exists."""
        if self._states:
            return
        info = self.registry.ensure_internal_topic(TRANSACTION_STATE)
        self.num_partitions = info.partitions
        self._states = {index: {} for index in range(info.partitions)}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _cache(self, transactional_id: str) -> dict[str, TransactionMetadata]:
        self.ensure_state_topic()
        return self._states[self.partition_for(transactional_id)]

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._cache(transactional_id).get(transactional_id)

    def all_metadata(self) -> Iterator[TransactionMetadata]:
        for states in self._states.values():
            yield from states.values()

    def partition_states(self) -> list[dict[str, TransactionMetadata]]:
        """The cache, one dict per ``__transaction_state`` partition served here."""
        return list(self._states.values())

    @staticmethod
    def now_ms() -> int:
        return now_ms()

    # ---- carrying out a Decision ------------------------------------------------------------------

    async def carry_out(self, transactional_id: str, metadata: TransactionMetadata | None,
                        decision: Decision) -> TxnError:
        """Log and apply ``decision``'s transit, then start its markers; the error to answer."""
        return await self._carry_out(transactional_id, metadata, decision)

    async def wait_for_completion(self, transactional_id: str, timeout_s: float) -> bool:
        """Waits (at most ``timeout_s``) until the markers and Complete record of the transaction being
        completed are written; False if that took longer."""
        completion = self._completions.get(transactional_id)
        if completion is None:
            return True
        try:
            await asyncio.wait_for(asyncio.shield(completion), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _carry_out(self, transactional_id: str, metadata: TransactionMetadata | None,
                         decision: Decision) -> TxnError:
        """Steps 1-3 of decisions.py's docstring; returns the error to answer."""
        if decision.transit is None:
            return decision.error
        cache = self._cache(transactional_id)
        if decision.new_metadata is not None:
            metadata = decision.new_metadata
            cache[transactional_id] = metadata
        assert metadata is not None
        try:
            await self._log_transit(metadata, decision.transit)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the client retries on a retriable coordinator error
            log.warning("could not log %s for transactional id %r: %s", decision.transit.state.kafka_name,
                        transactional_id, exc)
            if decision.new_metadata is not None and cache.get(transactional_id) is metadata:
                del cache[transactional_id]
            return TxnError.COORDINATOR_NOT_AVAILABLE
        if metadata.state is TransactionState.DEAD and cache.get(transactional_id) is metadata:
            del cache[transactional_id]
        if decision.write_markers is not None:
            self._spawn_completion(decision.write_markers, None)
        return decision.error

    async def _log_transit(self, metadata: TransactionMetadata, transit: TxnTransitMetadata) -> None:
        """Appends ``transit`` to the id's partition, waits until durable, applies it; on failure the
        transit is aborted and the error raised."""
        try:
            partition = self.registry.partition(TRANSACTION_STATE, self.partition_for(transit.transactional_id))
            batch = build_batch([SimpleRecord(encode_key(transit.transactional_id), encode_value(transit))])
            info = partition.append_internal(batch)
            await partition.wait_for_high_watermark(info.last_offset + 1)
        except BaseException:
            metadata.abort_transition()
            raise
        metadata.complete_transition(transit)

    # ---- markers and completion -------------------------------------------------------------------

    def _spawn_completion(self, markers: WriteTxnMarkers, complete: TxnTransitMetadata | None) -> None:
        task = asyncio.get_running_loop().create_task(self._complete_transaction(markers, complete))
        self._completions[markers.transactional_id] = task
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            if self._completions.get(markers.transactional_id) is t:
                del self._completions[markers.transactional_id]

        task.add_done_callback(done)

    async def _complete_transaction(self, markers: WriteTxnMarkers, complete: TxnTransitMetadata | None) -> None:
        """Markers on every partition, then the Complete record. ``complete`` is a transit recovery
        already prepared (pending on the metadata); otherwise markers_written() prepares one."""
        coordinator_epoch = self.coordinator_epoch(markers.transactional_id)
        codes = await self.write_markers(markers.producer_id, markers.producer_epoch, markers.result,
                                         markers.partitions, coordinator_epoch)
        if ErrorCode.TRANSACTION_COORDINATOR_FENCED in codes.values():
            log.warning("markers of %r (coordinator epoch %d) were refused: a newer coordinator owns it; "
                        "this one stops", markers.transactional_id, coordinator_epoch)
            return
        delay = MARKER_RETRY_BACKOFF_S[0]
        while not self._stopping:
            metadata = self.get(markers.transactional_id)
            if complete is not None:
                transit, complete = complete, None
                if metadata is None or metadata.pending_transit is not transit:
                    return
            else:
                decision = d.markers_written(metadata, markers, now_ms())
                if decision.transit is None:
                    if decision.error is not TxnError.CONCURRENT_TRANSACTIONS:
                        log.warning("markers of %r written, but the id moved on: %s", markers.transactional_id,
                                    decision.error.value)
                        return
                    await asyncio.sleep(delay)
                    continue
                transit = decision.transit
            assert metadata is not None
            try:
                await self._log_transit(metadata, transit)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried: the decision is durable and must complete
                log.warning("could not log %s for %r, retrying: %s", transit.state.kafka_name,
                            markers.transactional_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MARKER_RETRY_BACKOFF_S[1])

    async def write_markers(self, producer_id: int, producer_epoch: int, result: TransactionResult,
                            partitions: Iterable[TopicPartition],
                            coordinator_epoch: int = COORDINATOR_EPOCH, *,
                            follow_leaders: bool = True) -> dict[TopicPartition, ErrorCode]:
        """Writes a ``result`` marker on every partition and waits until each is durable. Storage errors
        are retried; a partition that refuses the marker (a newer epoch or coordinator wrote there) or
        no longer exists is reported and skipped. Also serves the WriteTxnMarkers API."""
        tps = [TopicPartition(tp[0], tp[1]) for tp in partitions]
        outcomes = await asyncio.gather(*(self._write_marker(tp, producer_id, producer_epoch, result,
                                                             coordinator_epoch, follow_leaders) for tp in tps))
        return dict(zip(tps, outcomes))

    async def _write_marker(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                            result: TransactionResult, coordinator_epoch: int, follow_leaders: bool = True) -> ErrorCode:
        """One marker, made durable. The coordinator's own markers follow the partition's leader on a
        cluster (WriteTxnMarkers to another broker, retried across leader moves until done); a
        WriteTxnMarkers request (``follow_leaders=False``) writes here or answers NOT_LEADER_OR_FOLLOWER."""
        delay = MARKER_RETRY_BACKOFF_S[0]
        while True:
            cluster = self.registry.cluster
            if cluster is not None and tp.topic in self.registry.topics.topics:
                state = cluster.view.states.get((tp.topic, tp.partition))
                leader = state.leader if state is not None else -1
                if leader != self.broker.config.node_id:
                    if not follow_leaders:
                        return ErrorCode.NOT_LEADER_OR_FOLLOWER
                    code = await self._write_remote_marker(leader, tp, producer_id, producer_epoch, result,
                                                           coordinator_epoch)
                    # A leader that has not opened the partition yet (its view lags ours) is asked again:
                    # giving up while the topic exists would leave the transaction open there.
                    if code is not None and code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        return code
                    if self._stopping:
                        raise asyncio.CancelledError()
                    await asyncio.sleep(delay)  # no leader yet, or it moved: ask the view again
                    delay = min(delay * 2, MARKER_RETRY_BACKOFF_S[1])
                    continue
            partition = self.registry.partitions.get((tp.topic, tp.partition))
            if partition is None and tp.topic == CONSUMER_OFFSETS:
                self.registry.ensure_internal_topic(CONSUMER_OFFSETS)
                partition = self.registry.partitions.get((tp.topic, tp.partition))
            if partition is None:
                log.warning("no marker for %s-%d (producer %d): the partition is gone", tp.topic, tp.partition,
                            producer_id)
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            batch = build_control_batch(ControlType(result.value), producer_id, producer_epoch, coordinator_epoch)
            try:
                appended = partition.append_control(batch)
                await partition.wait_for_high_watermark(appended.last_offset + 1)
            except ProducerStateError as exc:
                log.warning("%s-%d refused the %s marker of producer %d: %s", tp.topic, tp.partition,
                            result.name, producer_id, exc)
                return ErrorCode[exc.error_name]
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self._stopping:
                    raise
                if not follow_leaders and isinstance(exc, NotLeaderOrFollowerError):
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER
                log.warning("marker for %s-%d failed, retrying: %s", tp.topic, tp.partition, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MARKER_RETRY_BACKOFF_S[1])
                continue
            if tp.topic == CONSUMER_OFFSETS:
                for listener in self.offsets_marker_listeners:
                    try:
                        listener(tp.partition, producer_id, result is TransactionResult.COMMIT)
                    except Exception:
                        log.exception("offsets marker listener failed")
            return ErrorCode.NONE

    def _client_for(self, broker_id: int) -> BrokerClient | None:
        """The connection to another broker's inter-broker listener; None while it has no such endpoint
        registered (not registered, or registered without that listener)."""
        cluster = self.registry.cluster
        address = cluster.link.address(cluster.view.brokers.get(broker_id))
        if address is None:
            return None
        client = self._marker_clients.get(broker_id)
        if client is None or (client.host, client.port) != address:
            if client is not None:
                client.close()
            client = self._marker_clients[broker_id] = BrokerClient(
                *address, f"eoslog-txn-coordinator-{self.broker.config.node_id}", cluster.link)
        return client

    async def _write_remote_marker(self, leader: int, tp: TopicPartition, producer_id: int, producer_epoch: int,
                                   result: TransactionResult, coordinator_epoch: int) -> ErrorCode | None:
        """WriteTxnMarkers v1 to the partition's leader; None when it cannot be reached (retry)."""
        client = self._client_for(leader)
        if client is None:
            return None
        Marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(markers=[Marker(
            producer_id=producer_id, producer_epoch=producer_epoch,
            transaction_result=result is TransactionResult.COMMIT, coordinator_epoch=coordinator_epoch,
            topics=[Marker.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])])])
        try:
            response = await client.request(WRITE_TXN_MARKERS_KEY, 1, request, 30)
        except BrokerConnectionError as exc:
            log.warning("marker for %s-%d: broker %d unreachable (%s), retrying", tp.topic, tp.partition, leader, exc)
            return None
        return ErrorCode(response.markers[0].topics[0].partitions[0].error_code)

    async def verify_partition_remotely(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                        topic: str, partition: int) -> None:
        """KIP-890 part 1 when the transactional id is coordinated by another broker: raises as
        :meth:`verify_partition_in_transaction` does unless ``topic``-``partition`` is in the producer's
        ongoing transaction there."""
        errors = await self.verify_partitions_remotely(transactional_id, producer_id, producer_epoch,
                                                       [(topic, partition)])
        error = errors[(topic, partition)]
        if error is not None:
            raise error

    async def verify_partitions_remotely(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                         partitions: Iterable[tuple[str, int]]
                                         ) -> dict[tuple[str, int], Exception | None]:
        """One DescribeTransactions to the id's coordinator: for each partition None when it is in the
        producer's Ongoing transaction (this producer id and epoch), else the error to answer with."""
        tps = list(partitions)
        try:
            described = await self._describe_remotely(transactional_id)
        except Exception as exc:  # noqa: BLE001 - every partition gets the same answer
            return {tp: exc for tp in tps}
        if (described.producer_id, described.producer_epoch) != (producer_id, producer_epoch):
            error = error_for_code(ErrorCode.INVALID_PRODUCER_EPOCH)(
                f"{transactional_id!r} is producer {described.producer_id} epoch {described.producer_epoch} now, "
                f"not producer {producer_id} epoch {producer_epoch}")
            return {tp: error for tp in tps}
        ongoing = described.transaction_state == TransactionState.ONGOING.kafka_name
        in_txn = {(t.topic, p) for t in described.topics for p in t.partitions}
        return {tp: None if ongoing and tp in in_txn else error_for_code(ErrorCode.INVALID_TXN_STATE)(
                    f"{tp[0]}-{tp[1]} is not in the ongoing transaction of {transactional_id!r} "
                    f"({described.transaction_state})")
                for tp in tps}

    async def _describe_remotely(self, transactional_id: str):
        """The DescribeTransactions answer of the broker that coordinates ``transactional_id``."""
        cluster = self.registry.cluster
        state = cluster.view.states.get((TRANSACTION_STATE, self.partition_for(transactional_id)))
        client = self._client_for(state.leader) if state is not None else None
        if client is None:
            raise error_for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE)(
                f"no coordinator for {transactional_id!r} right now")
        try:
            response = await client.request(DESCRIBE_TRANSACTIONS_KEY, 0, DescribeTransactionsRequest(
                transactional_ids=[transactional_id]), 30)
        except BrokerConnectionError as exc:
            raise error_for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE)(str(exc)) from exc
        described = response.transaction_states[0]
        if described.error_code:
            raise error_for_code(described.error_code)(f"coordinator of {transactional_id!r} answered "
                                                       f"{ErrorCode(described.error_code).name}")
        return described

    # ---- the APIs ---------------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int,
                               producer_id: int, producer_epoch: int, api_version: int) -> tuple[ErrorCode, int, int]:
        """InitProducerId: (error, producer id, epoch)."""
        if transactional_id is None:
            return ErrorCode.NONE, self.allocate_producer_id(), 0
        if not self.owns(transactional_id):
            return _wire(self._not_owned_error(transactional_id), API_INIT_PRODUCER_ID, api_version), -1, -1
        if self.groups.is_pinned(transactional_id):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        metadata = self.get(transactional_id) if transactional_id else None
        decision = d.init_producer_id(metadata, transactional_id, transaction_timeout_ms, now_ms(), self.config,
                                      self.allocate_producer_id, producer_id=producer_id,
                                      producer_epoch=producer_epoch)
        error = await self._carry_out(transactional_id, metadata, decision)
        if error is TxnError.CONCURRENT_TRANSACTIONS and decision.write_markers is not None:
            # An open transaction was just aborted under a bumped epoch (a new instance fencing the old
            # one). The abort completes locally in milliseconds: wait for it and decide again, sparing
            # the client a retry round.
            completion = self._completions.get(transactional_id)
            if completion is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(completion), END_TXN_COMPLETION_WAIT_S)
                except TimeoutError:
                    pass
                else:
                    return await self.init_producer_id(transactional_id, transaction_timeout_ms, producer_id,
                                                       producer_epoch, api_version)
        code = _wire(error, API_INIT_PRODUCER_ID, api_version)
        if code is not ErrorCode.NONE:
            return code, -1, -1
        return code, decision.producer_id, decision.producer_epoch

    async def add_partitions_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partitions: Iterable[TopicPartition], api_version: int
                                    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v0-3: one error per partition. Unknown partitions fail the whole request
        with UNKNOWN_TOPIC_OR_PARTITION for them and OPERATION_NOT_ATTEMPTED for the rest, as Kafka."""
        tps = [TopicPartition(tp[0], tp[1]) for tp in partitions]
        if not self.owns(transactional_id):
            return {tp: _wire(self._not_owned_error(transactional_id), API_ADD_PARTITIONS, api_version) for tp in tps}
        unknown = [tp for tp in tps if not self.registry.exists(tp.topic, tp.partition)]
        if unknown:
            return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in tps}
        if self.groups.is_pinned(transactional_id):
            return {tp: ErrorCode.CONCURRENT_TRANSACTIONS for tp in tps}
        metadata = self.get(transactional_id) if transactional_id else None
        decision = d.add_partitions_to_txn(metadata, transactional_id, producer_id, producer_epoch, tps, now_ms())
        code = _wire(await self._carry_out(transactional_id, metadata, decision), API_ADD_PARTITIONS, api_version)
        return {tp: code for tp in tps}

    async def add_partitions_for_produce(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                         partitions: Iterable[tuple[str, int]]) -> None:
        """Transaction version 2 (KIP-890 part 2): a Produce v12+ adds its partitions to the producer's
        transaction itself; the partition leader asks here before appending. Raises, with the error the
        Produce answers, unless the partitions are now in the ongoing transaction of exactly this
        (producer id, epoch): a delayed Produce of a finished transaction carries the old epoch and is
        refused here, so it can never start or join the next one."""
        tps = [TopicPartition(topic, index) for topic, index in partitions]
        if not self.owns(transactional_id):
            error = self._not_owned_error(transactional_id)
        elif self.groups.is_pinned(transactional_id):
            error = TxnError.CONCURRENT_TRANSACTIONS
        else:
            metadata = self.get(transactional_id) if transactional_id else None
            decision = d.add_partitions_to_txn(metadata, transactional_id, producer_id, producer_epoch, tps,
                                               now_ms(), transaction_version=TRANSACTION_VERSION_2)
            error = await self._carry_out(transactional_id, metadata, decision)
        if error is TxnError.NONE:
            return
        code = _PRODUCE_VERIFY_ERRORS.get(error, ErrorCode[error.value])
        raise error_for_code(code)(
            f"{', '.join(f'{tp.topic}-{tp.partition}' for tp in tps)} could not join the transaction of "
            f"{transactional_id!r} "
            f"(producer {producer_id}, epoch {producer_epoch}): {error.value}")

    async def add_partitions_for_broker(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                        partitions: Iterable[TopicPartition], verify_only: bool,
                                        api_version: int) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ (a partition leader asking for one transaction, KIP-890): verify that
        the partitions are in the producer's ongoing transaction (``verify_only``, part 1), or add them
        for a Produce v12+ (part 2). One error per partition, Kafka's codes: the leader maps them."""
        tps = [TopicPartition(tp[0], tp[1]) for tp in partitions]
        if not self.owns(transactional_id):
            return {tp: _wire(self._not_owned_error(transactional_id), API_ADD_PARTITIONS, api_version) for tp in tps}
        if self.groups.is_pinned(transactional_id):
            return {tp: ErrorCode.CONCURRENT_TRANSACTIONS for tp in tps}
        metadata = self.get(transactional_id) if transactional_id else None
        if verify_only:
            decision = d.verify_partitions_in_txn(metadata, transactional_id, producer_id, producer_epoch, tps)
            return {tp: _wire(decision.partition_errors[tp], API_ADD_PARTITIONS, api_version) for tp in tps}
        unknown = [tp for tp in tps if not self.registry.exists(tp.topic, tp.partition)]
        if unknown:
            return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in tps}
        decision = d.add_partitions_to_txn(metadata, transactional_id, producer_id, producer_epoch, tps, now_ms(),
                                           transaction_version=TRANSACTION_VERSION_2)
        code = _wire(await self._carry_out(transactional_id, metadata, decision), API_ADD_PARTITIONS, api_version)
        return {tp: code for tp in tps}

    async def add_partitions_remotely(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                      partitions: Iterable[tuple[str, int]]
                                      ) -> dict[tuple[str, int], Exception | None]:
        """Transaction version 2 when the transactional id is coordinated by another broker: one
        AddPartitionsToTxn v5 (VerifyOnly false) to that coordinator, as Kafka's partition leaders send.
        For each partition None when it is now in the producer's ongoing transaction, else the error the
        Produce answers with (same shape as :meth:`verify_partitions_remotely`)."""
        tps = list(partitions)
        cluster = self.registry.cluster
        state = cluster.view.states.get((TRANSACTION_STATE, self.partition_for(transactional_id)))
        client = self._client_for(state.leader) if state is not None else None
        if client is None:
            error = error_for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE)(f"no coordinator for {transactional_id!r} now")
            return {tp: error for tp in tps}
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        Transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        request = AddPartitionsToTxnRequest(transactions=[Transaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=False, topics=[Topic(name=name, partitions=ids) for name, ids in by_topic.items()])])
        try:
            response = await client.request(API_ADD_PARTITIONS, ADD_PARTITIONS_BROKER_VERSION, request, 30)
        except BrokerConnectionError as exc:
            error = error_for_code(ErrorCode.COORDINATOR_NOT_AVAILABLE)(str(exc))
            return {tp: error for tp in tps}
        codes: dict[tuple[str, int], int] = {}
        if response.error_code:
            codes = {tp: response.error_code for tp in tps}
        else:
            for result in response.results_by_transaction:
                for topic in result.topic_results:
                    for partition in topic.results_by_partition:
                        codes[(topic.name, partition.partition_index)] = partition.partition_error_code
        out: dict[tuple[str, int], Exception | None] = {}
        for tp in tps:
            code = ErrorCode(codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR))
            if code is ErrorCode.NONE:
                out[tp] = None
                continue
            if code is ErrorCode.PRODUCER_FENCED:
                code = ErrorCode.INVALID_PRODUCER_EPOCH  # the Produce spelling of a fence
            out[tp] = error_for_code(code)(f"{tp[0]}-{tp[1]} could not join the transaction of "
                                           f"{transactional_id!r} (producer {producer_id}, epoch "
                                           f"{producer_epoch}): {code.name}")
        return out

    async def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 group_id: str, api_version: int) -> ErrorCode:
        if not self.owns(transactional_id):
            return _wire(self._not_owned_error(transactional_id), API_ADD_OFFSETS, api_version)
        if self.groups.is_pinned(transactional_id):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        metadata = self.get(transactional_id) if transactional_id else None
        decision = d.add_offsets_to_txn(metadata, transactional_id, producer_id, producer_epoch, group_id,
                                        now_ms(), self.config)
        return _wire(await self._carry_out(transactional_id, metadata, decision), API_ADD_OFFSETS, api_version)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                      api_version: int) -> ErrorCode:
        return (await self.end_txn_and_identity(transactional_id, producer_id, producer_epoch, committed,
                                                api_version))[0]

    async def end_txn_and_identity(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                   committed: bool, api_version: int) -> tuple[ErrorCode, int, int]:
        """EndTxn: (error, producer id, epoch). v5+ is transaction version 2: the answer carries the
        identity the producer continues with (epoch + 1); earlier versions answer (-1, -1)."""
        code = await self._end_txn(transactional_id, producer_id, producer_epoch, committed, api_version)
        if isinstance(code, tuple):
            return code
        return code, -1, -1

    async def _end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                       api_version: int) -> ErrorCode | tuple[ErrorCode, int, int]:
        if not self.owns(transactional_id):
            return _wire(self._not_owned_error(transactional_id), API_END_TXN, api_version)
        if self.groups.is_pinned(transactional_id):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        metadata = self.get(transactional_id) if transactional_id else None
        result = TransactionResult.COMMIT if committed else TransactionResult.ABORT
        version = TRANSACTION_VERSION_2 if api_version >= END_TXN_V2_SINCE else TRANSACTION_VERSION_1
        decision = d.end_txn(metadata, transactional_id, producer_id, producer_epoch, result, now_ms(),
                             transaction_version=version, allocate_producer_id=self.allocate_producer_id)
        error = await self._carry_out(transactional_id, metadata, decision)
        if error is TxnError.NONE and decision.write_markers is not None:
            completion = self._completions.get(transactional_id)
            if completion is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(completion), END_TXN_COMPLETION_WAIT_S)
                except TimeoutError:
                    log.warning("EndTxn of %r answered before its markers were all written", transactional_id)
        code = _wire(error, API_END_TXN, api_version)
        if version >= TRANSACTION_VERSION_2 and code is ErrorCode.NONE:
            return code, decision.producer_id, decision.producer_epoch
        return code

    def verify_partition_in_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                        topic: str, partition: int) -> None:
        """KIP-890 part 1, for Partition.append: raises unless the partition is in the producer's ongoing
        transaction. A transaction being widened (AddPartitionsToTxn pending) still accepts batches for
        the partitions it already has."""
        tp = TopicPartition(topic, partition)
        if self.groups.is_pinned(transactional_id):
            # A group commit holds this transaction: a write now would race its markers.
            raise error_for_code(_PRODUCE_VERIFY_ERRORS[TxnError.CONCURRENT_TRANSACTIONS])(
                f"the transaction of {transactional_id!r} is being committed by its transaction group")
        metadata = self.get(transactional_id) if transactional_id else None
        if (metadata is not None and metadata.state is TransactionState.ONGOING
                and metadata.pending_state in (None, TransactionState.ONGOING)
                and (metadata.producer_id, metadata.producer_epoch) == (producer_id, producer_epoch)
                and tp in metadata.topic_partitions):
            return
        decision = d.verify_partitions_in_txn(metadata, transactional_id or "", producer_id, producer_epoch, [tp])
        error = decision.partition_errors.get(tp, TxnError.INVALID_TXN_STATE)
        if error is TxnError.NONE:
            return
        code = _PRODUCE_VERIFY_ERRORS.get(error, ErrorCode[error.value])
        raise error_for_code(code)(
            f"{topic}-{partition} is not in the ongoing transaction of {transactional_id!r} "
            f"(producer {producer_id}, epoch {producer_epoch}): {error.value}")

    # ---- admin: ListTransactions / DescribeTransactions --------------------------------------------

    def describe(self, transactional_id: str) -> TransactionDescription | None:
        metadata = self.get(transactional_id)
        if metadata is None or metadata.state is TransactionState.DEAD:
            return None
        return TransactionDescription(metadata)

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int = -1, pattern: str | None = None) -> list[TransactionDescription]:
        """ListTransactions' filters: Kafka state names, producer ids, running longer than
        ``min_duration_ms`` (KIP-994), transactional id regex (full match)."""
        wanted_states = set(states)
        wanted_pids = set(producer_ids)
        regex = re.compile(pattern) if pattern else None
        now = now_ms()
        out = []
        for metadata in self.all_metadata():
            if metadata.state is TransactionState.DEAD:
                continue
            if wanted_states and metadata.state.kafka_name not in wanted_states:
                continue
            if wanted_pids and metadata.producer_id not in wanted_pids:
                continue
            if min_duration_ms >= 0 and (metadata.state not in (TransactionState.ONGOING, TransactionState.CHECKING)
                                         or now - metadata.txn_start_timestamp < min_duration_ms):
                continue
            if regex is not None and not regex.fullmatch(metadata.transactional_id):
                continue
            out.append(TransactionDescription(metadata))
        return sorted(out, key=lambda t: t.transactional_id)

    # ---- timers -----------------------------------------------------------------------------------

    async def _timer_loop(self) -> None:
        interval_ms = self.broker.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        # Kafka checks id expiration hourly; a shorter expiration setting (tests) is checked more often.
        expiration_every_ms = min(3_600_000, max(interval_ms, self.config.transactional_id_expiration_ms // 10))
        last_expiration = now_ms()
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await self.abort_timed_out_transactions()
                if now_ms() - last_expiration >= expiration_every_ms:
                    last_expiration = now_ms()
                    await self.expire_transactional_ids()
                self._maintain_partitions()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator timer failed")

    async def abort_timed_out_transactions(self) -> list[str]:
        """Aborts (epoch + 1) every Ongoing transaction older than its timeout, or moves it to Checking if
        it is a check-back transaction; returns the ids."""
        aborted = []
        for states in list(self._states.values()):
            for transactional_id in d.expired_transactions(states, now_ms()):
                metadata = states.get(transactional_id)
                if metadata is None or self.groups.is_pinned(transactional_id):
                    continue
                if await self.check_backs.time_out(transactional_id, metadata) is TxnError.NONE:
                    aborted.append(transactional_id)
        await self.check_backs.tick()
        return aborted

    async def expire_transactional_ids(self) -> list[str]:
        expired = []
        for states in list(self._states.values()):
            for transactional_id in d.expired_transactional_ids(states, now_ms(), self.config):
                metadata = states.get(transactional_id)
                if metadata is None or self.groups.is_pinned(transactional_id):
                    continue
                decision = d.expire_transactional_id(metadata, now_ms(), self.config)
                if decision.transit is not None and \
                        await self._carry_out(transactional_id, metadata, decision) is TxnError.NONE:
                    expired.append(transactional_id)
        if expired:
            log.info("expired %d idle transactional ids", len(expired))
        if self._states:
            groups = await self.groups.expire(now_ms(), self.config.transactional_id_expiration_ms)
            if groups:
                log.info("expired %d idle transaction groups", len(groups))
        return expired

    def _maintain_partitions(self) -> None:
        """Housekeeping on the partitions' transaction side: drop ``.txnindex`` files of deleted segments
        and forget producers silent for producer.id.expiration.ms (Kafka's LogManager does both)."""
        now = now_ms()
        for partition in list(self.registry.partitions.values()):
            partition.maintain_transaction_index()
            partition.producer_state.remove_expired(now, self.broker.config.producer_id_expiration_ms)


def _wire(error: TxnError, api_key: int, api_version: int) -> ErrorCode:
    return ErrorCode[d.error_for_version(error, api_key, api_version).value]


def _read_records(partition: Partition) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) of every record of a partition, in log order (control batches skipped)."""
    partition_log = partition.log
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        result = partition_log.read(offset, LOAD_CHUNK, min_one_batch=True)
        if not result.regions:
            return
        data = b"".join(os.pread(r.fd, r.length, r.position) for r in result.regions)
        for batch in iter_batches(data):
            header = batch.header
            if header.next_offset <= offset:
                continue
            offset = header.next_offset
            if header.is_control:
                continue
            for record in batch.records:
                if record.key is not None:
                    yield record.key, record.value
