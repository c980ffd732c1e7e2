"""The transaction coordinator's shard: carries out the pure core's Decisions (decisions.py) on this
broker, over ``__transaction_state``, on the coordinator runtime (coordinator/runtime.py). Its APIs are
in apis.py, its markers in markers.py; what extensions may use of it is engine.py's
:class:`TransactionEngine`, which this class is.

Contract
- Owns the cache of :class:`TransactionMetadata` per ``__transaction_state`` partition coordinated
  here, and the tasks that complete decided transactions. Which partitions are coordinated here, when
  they load and unload, the order of the appends and the timer are the runtime's. Only the broker's
  event loop calls it.
- prepare -> log -> apply (docs/transactions.md, "How the shard carries out a Decision"): a transit is
  appended to the id's ``__transaction_state`` partition and applied only once the high watermark has
  passed it (fsync'ed by the group commit); a failed append aborts the transit.
- The Prepare record is the commit point. Markers then go to every partition of the transaction
  (markers.py), each waited on until durable, and only then is the Complete record logged. A crash
  anywhere in between is finished at the next load from what the log says (``log_format.recovery_actions``).
- The coordinator epoch is the leader epoch of the id's ``__transaction_state`` partition at the time
  this broker loaded it (0 on a single node). Every marker carries it; a partition that has seen a
  marker from a newer coordinator refuses an older one (TRANSACTION_COORDINATOR_FENCED), and a
  completion that meets that refusal stops: a newer coordinator owns the transaction.
- Requests for ids of a partition this broker leads but has not loaded yet are answered
  COORDINATOR_LOAD_IN_PROGRESS; ids of partitions led elsewhere, NOT_COORDINATOR (the runtime says
  which). A load is one step on the loop (the topic is compacted, so it stays small), so no request
  sees half a load.
- Admission: every API, the produce path's check and the timer ask :meth:`admit` before moving an id:
  ownership first, then each registered extension's guard (transaction groups hold the members of a
  group commit: CONCURRENT_TRANSACTIONS until it completes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from eoslog.cluster.topics import TRANSACTION_STATE
from eoslog.coordinator.runtime import CoordinatorRuntime, Ownership, now_ms
from eoslog.coordinator.transaction import decisions as d
from eoslog.coordinator.transaction.apis import TransactionApis
from eoslog.coordinator.transaction.decisions import Decision, TransactionConfig, TxnError
from eoslog.coordinator.transaction.engine import CheckingListener, TransactionExtension
from eoslog.coordinator.transaction.log_format import (
    encode_key,
    encode_value,
    load_state,
    partition_for,
    recovery_actions,
)
from eoslog.coordinator.transaction.markers import TransactionMarkerChannel
from eoslog.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata, WriteTxnMarkers
from eoslog.coordinator.transaction.producer_ids import ProducerIds
from eoslog.coordinator.transaction.state import TransactionState
from eoslog.protocol.errors import ErrorCode
from eoslog.records.batch import decode_batch
from eoslog.records.builder import SimpleRecord, build_batch

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition
    from eoslog.log.log import Log

log = logging.getLogger(__name__)

COORDINATOR_EPOCH = 0
MARKER_RETRY_BACKOFF_S = (0.05, 1.0)
SKIP_COORDINATOR_LOAD = "eoslog.test.skip.coordinator.load"  # a test-only fault (server/config.py)
E = TypeVar("E")


@dataclass(frozen=True)
class TransactionShardConfig:
    """What the shard needs besides the core's :class:`TransactionConfig` (broker settings, by Kafka's
    names: transaction.abort.timed.out.transaction.cleanup.interval.ms)."""

    core: TransactionConfig
    abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    test_faults: dict[str, Any] = field(default_factory=dict)  # eoslog.test.* (server/config.py)


def _coordinator_epoch(partition: Partition) -> int:
    """The leader epoch of a __transaction_state partition this broker leads (None on a single node)."""
    epoch = partition.leader_epoch
    return COORDINATOR_EPOCH if epoch is None else max(epoch, COORDINATOR_EPOCH)


class TransactionShard(TransactionApis):
    def __init__(self, runtime: CoordinatorRuntime, config: TransactionShardConfig, producer_ids: ProducerIds,
                 markers: TransactionMarkerChannel, exists: Any) -> None:
        """``exists(topic, index)``: whether a partition exists anywhere in the cluster (what a
        transaction may name; cluster/registry.py)."""
        self.runtime = runtime
        self.config = config.core
        self.test_faults = config.test_faults
        self.producer_ids = producer_ids
        self.markers = markers
        self.exists = exists
        self._tick_interval_ms = config.abort_timed_out_transaction_cleanup_interval_ms
        # Kafka checks id expiration hourly; a shorter expiration setting (tests) is checked more often.
        self._expiration_every_ms = min(3_600_000, max(self._tick_interval_ms,
                                                       self.config.transactional_id_expiration_ms // 10))
        self._next_tick_ms = now_ms() + self._tick_interval_ms
        self._next_expiration_ms = now_ms() + self._expiration_every_ms
        self._states: dict[int, dict[str, TransactionMetadata]] = {}
        self._coordinator_epochs: dict[int, int] = {}  # partition -> leader epoch when loaded
        self._completions: dict[str, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False
        self._extensions: list[TransactionExtension] = []
        self._checking_listeners: list[CheckingListener] = []

    # ---- extensions -------------------------------------------------------------------------------

    def register(self, extension: TransactionExtension) -> None:
        """An extension (engine.py) that loads, guards and times with this coordinator from now on."""
        self._extensions.append(extension)

    def extension(self, kind: type[E]) -> E:
        """The registered extension of that class (its API handlers find it here)."""
        for extension in self._extensions:
            if isinstance(extension, kind):
                return extension
        raise LookupError(f"no {kind.__name__} is registered with the transaction coordinator")

    def add_checking_listener(self, listener: CheckingListener) -> None:
        self._checking_listeners.append(listener)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- the runtime's calls ---------------------------------------------------------------------

    def load(self, partitions: dict[int, Partition]) -> None:
        """Takes over these ``__transaction_state`` partitions: reads their ids, then finishes what they
        say was decided (markers and Complete records, in the background), then lets the extensions
        resume what they decided (after all of them are loaded: on a single node a transaction group's
        members may live in other partitions than the group)."""
        loaded = actions = 0
        for index, partition in partitions.items():
            # The coordinator epoch is the partition's leader epoch when this broker began to coordinate
            # it, at start-up as on a later takeover: markers carry it, and a partition refuses markers
            # from an epoch older than one it has seen (a restarted broker that still leads must not
            # write as epoch 0). A new epoch of a leadership that never stopped keeps it (the runtime
            # keeps the cache then): no other coordinator wrote markers for this partition meanwhile.
            self._coordinator_epochs[index] = _coordinator_epoch(partition)
            if self.test_faults.get(SKIP_COORDINATOR_LOAD):
                self._states[index] = {}
                log.warning("test fault: %s-%d served without loading it", TRANSACTION_STATE, index)
                continue
            records = list(_read_records(partition.log))
            self._states[index] = load_state(records)
            for extension in self._extensions:
                extension.load(index, records)
            loaded += len(self._states[index])
            for action in recovery_actions(self._states[index], now_ms()):
                actions += 1
                self._spawn_completion(action.markers, action.complete)
        for index in partitions:
            for extension in self._extensions:
                actions += extension.recover(index)
        log.info("transaction coordinator took over %s partitions %s (coordinator epochs %s): %d transactional "
                 "ids, finishing %d decided transactions", TRANSACTION_STATE, sorted(partitions),
                 sorted({self._coordinator_epochs[i] for i in partitions}), loaded, actions)

    def unload(self, index: int) -> None:
        """Leadership of ``__transaction_state``-``index`` moved away: forget its ids and stop finishing
        their transactions here (the new leader finishes them from the replicated log)."""
        states = self._states.pop(index, {})
        for transactional_id in list(states):
            task = self._completions.pop(transactional_id, None)
            if task is not None:
                task.cancel()
        for extension in self._extensions:
            extension.unload(index)
        log.info("transaction coordinator gave up %s-%d: %d transactional ids now coordinated elsewhere",
                 TRANSACTION_STATE, index, len(states))

    def next_deadline_ms(self) -> int:
        return self._next_tick_ms

    def on_deadline(self, now: int) -> Coroutine[Any, Any, None]:
        self._next_tick_ms = now + self._tick_interval_ms
        return self._timed_work(now)

    async def stop(self) -> None:
        self._stopping = True
        self.markers.stopping = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass

    # ---- ownership and admission --------------------------------------------------------------------

    def owns(self, transactional_id: str) -> bool:
        return self.runtime.owns(TRANSACTION_STATE, self.partition_for(transactional_id))

    def coordinated_together(self, a: str, b: str) -> bool:
        """Whether two transactional ids always share a coordinator: on a sole broker every id does; on a
        cluster only ids of one ``__transaction_state`` partition (leadership moves per partition)."""
        return self.runtime.sole_broker or self.partition_for(a) == self.partition_for(b)

    def _not_owned_error(self, transactional_id: str) -> TxnError:
        """Why this broker does not serve ``transactional_id``: led here but not loaded yet, or led elsewhere."""
        ownership = self.runtime.ownership(TRANSACTION_STATE, self.partition_for(transactional_id))
        return TxnError.NOT_COORDINATOR if ownership is Ownership.OWNED else TxnError[ownership.value]

    def ownership_error(self, transactional_id: str) -> ErrorCode | None:
        """None when this broker coordinates ``transactional_id``; else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS (admin APIs answer it per id)."""
        if self.owns(transactional_id):
            return None
        return ErrorCode[self._not_owned_error(transactional_id).value]

    def _guard_refusal(self, transactional_id: str | None) -> TxnError | None:
        """The first extension guard that holds the id (e.g. a transaction group committing it)."""
        if not transactional_id:
            return None
        for extension in self._extensions:
            refusal = extension.admit(transactional_id)
            if refusal is not None:
                return refusal
        return None

    def admit(self, transactional_id: str) -> TxnError | None:
        """Why no request may move ``transactional_id`` now (not coordinated here, or held by a guard)."""
        if not self.owns(transactional_id):
            return self._not_owned_error(transactional_id)
        return self._guard_refusal(transactional_id)

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self._coordinator_epochs.get(self.partition_for(transactional_id), COORDINATOR_EPOCH)

    # ---- the cache --------------------------------------------------------------------------------

    def ensure_state_topic(self) -> None:
        """Creates ``__transaction_state`` on first use: the first transactional request, or on a single
        node the first FindCoordinator for a transactional id. In a cluster creation is asked of the
        controller and CoordinatorNotAvailableError raised until the topic exists."""
        self.runtime.ensure_topic(TRANSACTION_STATE)

    @property
    def num_partitions(self) -> int:
        return self.runtime.partition_count(TRANSACTION_STATE)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _cache(self, transactional_id: str) -> dict[str, TransactionMetadata]:
        self.ensure_state_topic()
        return self._states.setdefault(self.partition_for(transactional_id), {})

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        self.ensure_state_topic()
        states = self._states.get(self.partition_for(transactional_id))
        return states.get(transactional_id) if states is not None else None

    def all_metadata(self) -> Iterator[TransactionMetadata]:
        for states in self._states.values():
            yield from states.values()

    def partition_states(self) -> list[dict[str, TransactionMetadata]]:
        """The cache, one dict per ``__transaction_state`` partition served here."""
        return list(self._states.values())

    @staticmethod
    def now_ms() -> int:
        return now_ms()

    def write_durably(self, key: str, batch: bytes) -> asyncio.Future:
        self.ensure_state_topic()
        return self.runtime.write_durably(TRANSACTION_STATE, self.partition_for(key), batch)

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
        """Steps 1-3 of decisions.py's docstring; returns the error to answer.

        Once prepared, a decision is logged and applied (or fails as a whole) whatever happens to the
        request that made it, as in Kafka: the broker cancels a closed connection's requests
        (server/network.py), and a cancelled EndTxn must not leave its Prepare record in the log with
        the id's memory rolled back, where a time-out or InitProducerId could still abort a transaction
        the log says commits. So the append and apply run in a task of the shard, shielded from the
        caller; :meth:`stop` cancels and awaits it like the shard's other tasks, and an unloaded
        partition's append fails on its own (no longer leader)."""
        if decision.transit is None:
            return decision.error
        if self._stopping:  # stop() is cancelling the shard's tasks: a new one would outlive it
            return await self._log_and_apply(transactional_id, metadata, decision)
        return await asyncio.shield(self.spawn(self._log_and_apply(transactional_id, metadata, decision)))

    async def _log_and_apply(self, transactional_id: str, metadata: TransactionMetadata | None,
                             decision: Decision) -> TxnError:
        assert decision.transit is not None
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
            batch = build_batch([SimpleRecord(encode_key(transit.transactional_id), encode_value(transit))])
            await self.runtime.write_durably(TRANSACTION_STATE, self.partition_for(transit.transactional_id), batch)
        except BaseException:
            metadata.abort_transition()
            raise
        metadata.complete_transition(transit)

    # ---- markers and completion -------------------------------------------------------------------

    def complete(self, markers: WriteTxnMarkers) -> asyncio.Task:
        """The task completing ``markers``' transaction: the running one, or a new one."""
        running = self._completions.get(markers.transactional_id)
        return running if running is not None else self._spawn_completion(markers, None)

    def completion(self, transactional_id: str) -> asyncio.Task | None:
        return self._completions.get(transactional_id)

    def _spawn_completion(self, markers: WriteTxnMarkers, complete: TxnTransitMetadata | None) -> asyncio.Task:
        task = self.spawn(self._complete_transaction(markers, complete))
        self._completions[markers.transactional_id] = task

        def done(t: asyncio.Task) -> None:
            if self._completions.get(markers.transactional_id) is t:
                del self._completions[markers.transactional_id]

        task.add_done_callback(done)
        return task

    async def _complete_transaction(self, markers: WriteTxnMarkers, complete: TxnTransitMetadata | None) -> None:
        """Markers on every partition, then the Complete record. ``complete`` is a transit recovery
        already prepared (pending on the metadata); otherwise markers_written() prepares one."""
        coordinator_epoch = self.coordinator_epoch(markers.transactional_id)
        codes = await self.markers.write(markers.producer_id, markers.producer_epoch, markers.result,
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

    # ---- timers -----------------------------------------------------------------------------------

    async def _timed_work(self, now: int) -> None:
        """Every transaction.abort.timed.out.transaction.cleanup.interval.ms: time-outs and the
        extensions' periodic work; id expiration less often."""
        await self.abort_timed_out_transactions()
        expiration_due = now >= self._next_expiration_ms
        if expiration_due:
            self._next_expiration_ms = now + self._expiration_every_ms
            await self.expire_transactional_ids()
        for extension in self._extensions:
            await extension.on_timer(now_ms(), expiration_due)

    async def abort_timed_out_transactions(self) -> list[str]:
        """Aborts (epoch + 1) every Ongoing transaction older than its timeout, or moves it to Checking if
        it is a check-back transaction; returns the ids."""
        timed_out = []
        for states in list(self._states.values()):
            for transactional_id in d.expired_transactions(states, now_ms()):
                metadata = states.get(transactional_id)
                if metadata is None or self._guard_refusal(transactional_id) is not None:
                    continue
                if await self._time_out(transactional_id, metadata) is TxnError.NONE:
                    timed_out.append(transactional_id)
        return timed_out

    async def _time_out(self, transactional_id: str, metadata: TransactionMetadata) -> TxnError | None:
        """A transaction past its timeout: Checking for a check-back transaction, the usual abort for a
        plain one. None when there was nothing to do."""
        decision = d.time_out_transaction(metadata, now_ms())
        transit = decision.transit
        if transit is None:
            return None
        if transit.state is not TransactionState.CHECKING:
            log.info("aborting transaction of %r (producer %d): older than its timeout of %d ms",
                     transactional_id, metadata.producer_id, metadata.txn_timeout_ms)
            return await self._carry_out(transactional_id, metadata, decision)
        error = await self._carry_out(transactional_id, metadata, decision)
        if error is decision.error:  # logged
            for listener in self._checking_listeners:
                listener(transactional_id, transit, "transaction timeout")
        return error

    async def expire_transactional_ids(self) -> list[str]:
        expired = []
        for states in list(self._states.values()):
            for transactional_id in d.expired_transactional_ids(states, now_ms(), self.config):
                metadata = states.get(transactional_id)
                if metadata is None or self._guard_refusal(transactional_id) is not None:
                    continue
                decision = d.expire_transactional_id(metadata, now_ms(), self.config)
                if decision.transit is not None and \
                        await self._carry_out(transactional_id, metadata, decision) is TxnError.NONE:
                    expired.append(transactional_id)
        if expired:
            log.info("expired %d idle transactional ids", len(expired))
        return expired


def _read_records(partition_log: Log) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) of every record of a partition, in log order (control batches skipped)."""
    for data, header in partition_log.read_batches():
        if header.is_control:
            continue
        for record in decode_batch(data, header.position).records:
            if record.key is not None:
                yield record.key, record.value
