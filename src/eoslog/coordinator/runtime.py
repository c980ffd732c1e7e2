"""The coordinator runtime: what every coordinator over an internal topic needs from the broker, written
once (after Kafka's CoordinatorRuntime).

A coordinator is a pure core (its decisions over values, no I/O) and a *shard*: the object that holds the
core's state for the partitions of its internal topic that this broker leads, and carries out what the
core decides. A shard registers its internal topic here; the runtime then owns, for it:

- **ownership**: which partitions of the topic this broker coordinates. A partition is NOT_OWNED until
  the replica layer says this broker leads it and takes writes there, LOADING until its state is read,
  then OWNED until leadership leaves. A sole broker (no ZooKeeper) leads every partition, also those of
  an internal topic not created yet, which it creates empty on first use: those are OWNED from birth.
- **loading**: a partition this broker now leads is loaded in the background, after the listener
  opened: every queued partition of one shard in one synchronous step of the loop (so no request sees
  half a load, and a shard that recovers across its partitions sees all of them), shards in the order
  they registered (groups before transactions: a transaction's recovery may write markers to
  ``__consumer_offsets``).
- **the epoch-bump rule**: a new leader epoch of a partition this broker led without interruption (in
  ZooKeeper mode an ISR change bumps it) keeps the state in memory. The log was not truncated, and the
  memory is newer than the log: joins waiting for a rebalance, completions of decided transactions in
  flight. Reloading would drop the waiting calls or start a second completion beside the running one.
- **the log**: appends to the internal partitions, each write completed once the high watermark passed
  it (after the group-commit fsync, or the ISR), in append order per partition -- prepare -> log ->
  apply needs the order, since a core applies its writes in the order it issued them.
- **time**: one timer per shard, armed at the shard's next deadline.

Contract
- Only the broker's event loop calls it. Loading starts with :meth:`start`, called once the broker
  serves (a coordinator's load never delays the port); until then partitions led here wait as LOADING.
- A shard is built on first need (its factory is called when a partition of its topic is first led
  here, or on the first request for it), so a broker that never coordinates pays nothing for it.
- The shard interface is :class:`CoordinatorShard`; a new coordinator is a pure core, a shard and one
  ``register`` call (server/broker.py).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from eoslog.protocol.errors import UnknownTopicOrPartitionError

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition, PartitionAppend
    from eoslog.cluster.topics import InternalTopic

log = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Ownership(enum.Enum):
    """Whether this broker coordinates a partition's keys now, as the wire's coordinator errors put it."""

    OWNED = "NONE"
    LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"  # led here, state not read yet: retry here
    NOT_COORDINATOR = "NOT_COORDINATOR"  # led elsewhere (or nowhere): look the coordinator up again


class _State(enum.Enum):
    LOADING = 1
    OWNED = 2


class CoordinatorShard(Protocol):
    """What the runtime asks of a coordinator's shard."""

    def load(self, partitions: dict[int, Partition]) -> None:
        """Reads these partitions' state from their logs (``partition.log.read_batches()``) and takes
        them over; one synchronous step. The partitions are OWNED from the moment it returns."""

    def unload(self, index: int) -> None:
        """Leadership of the partition left: forget its state, answer its waiting calls."""

    def next_deadline_ms(self) -> int | None:
        """When :meth:`on_deadline` should run next (wall-clock ms), or None."""

    def on_deadline(self, now: int) -> Awaitable[None] | None:
        """Timed work; an awaitable is run to its end before the timer is armed again."""

    async def stop(self) -> None:
        """The broker is stopping: cancel what runs, answer what waits."""


class Leadership(Protocol):
    """The replica layer, as the runtime sees it (cluster/replica_manager.py)."""

    sole_broker: bool

    def add_leadership_listener(self, topic: str, became_leader: Callable[[int], None],
                                resigned: Callable[[int], None]) -> None: ...

    def elected(self, topic: str, index: int) -> bool: ...


class Partitions(Protocol):
    """The local partitions and topics, as the runtime sees them (cluster/registry.py)."""

    partitions: dict[tuple[str, int], Partition]
    topics: Any

    def register_internal_topic(self, spec: InternalTopic) -> None: ...

    def ensure_internal_topic(self, name: str) -> Any: ...


class _Registration:
    """One internal topic's shard and the runtime's bookkeeping for it."""

    def __init__(self, topic: str, default_partitions: int, factory: Callable[[], Any]) -> None:
        self.topic = topic
        self.default_partitions = default_partitions
        self.factory = factory
        self.shard: Any = None
        self.states: dict[int, _State] = {}
        self.pending: set[int] = set()
        self.partition_count: int | None = None  # fixed once the topic exists
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at_ms: int | None = None
        self.timed_work: asyncio.Task | None = None


class _Write:
    __slots__ = ("callback", "end", "error", "info", "partition", "settled")

    def __init__(self, partition: Partition | None, info: PartitionAppend | None, error: BaseException | None,
                 callback: Callable[[BaseException | None, PartitionAppend | None], None]) -> None:
        self.partition = partition
        self.info = info
        self.error = error
        self.callback = callback
        self.end = info.last_offset + 1 if info is not None else -1
        self.settled = error is not None


class _WriteQueue:
    """One internal partition's writes waiting for the high watermark, oldest first."""

    __slots__ = ("draining", "waiting", "writes")

    def __init__(self) -> None:
        self.writes: deque[_Write] = deque()
        self.draining = False  # a drain is scheduled
        self.waiting = False  # the head's high-watermark callback is registered


class CoordinatorRuntime:
    def __init__(self, partitions: Partitions, leadership: Leadership) -> None:
        self._partitions = partitions
        self._leadership = leadership
        self._registrations: dict[str, _Registration] = {}
        self._queues: dict[tuple[str, int], _WriteQueue] = {}
        self._loop: asyncio.AbstractEventLoop | None = None  # the broker's, from start()
        self._stopping = False
        self._load_scheduled = False

    @property
    def sole_broker(self) -> bool:
        return self._leadership.sole_broker

    # ---- registration and lifecycle -----------------------------------------------------------------

    def register(self, internal_topic: InternalTopic, factory: Callable[[], Any]) -> None:
        """A coordinator keeping its state in ``internal_topic`` (created on first use; its configured
        partition count holds until it exists); ``factory()`` builds its shard on first need."""
        topic = internal_topic.name
        self._partitions.register_internal_topic(internal_topic)
        self._registrations[topic] = _Registration(topic, internal_topic.partitions, factory)
        self._leadership.add_leadership_listener(
            topic, lambda index: self._became_leader(topic, index), lambda index: self._resigned(topic, index))

    def shard(self, topic: str) -> Any:
        """The shard of ``topic``, built now if it was not yet."""
        registration = self._registrations[topic]
        if registration.shard is None:
            registration.shard = registration.factory()
            self.schedule(topic)
        return registration.shard

    def built(self, topic: str) -> Any:
        """The shard of ``topic`` if it was built, else None (whoever only has news for a coordinator that
        exists: a marker for the group coordinator's cache)."""
        return self._registrations[topic].shard

    def start(self) -> None:
        """The broker serves: load what is led here, from now on as leadership comes."""
        self._loop = asyncio.get_running_loop()
        self._schedule_loads()
        for topic in self._registrations:
            self.schedule(topic)

    async def stop(self) -> None:
        self._stopping = True
        for registration in self._registrations.values():
            if registration.timer is not None:
                registration.timer.cancel()
            work = registration.timed_work
            if work is not None:
                work.cancel()
                try:
                    await work
                except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                    pass
        # Later registrations first: transactions write markers that the groups' state follows.
        for registration in reversed(list(self._registrations.values())):
            if registration.shard is not None:
                await registration.shard.stop()

    # ---- ownership ----------------------------------------------------------------------------------

    def partition_count(self, topic: str) -> int:
        """How many partitions the internal topic has (keys hash over them): its real size once it
        exists, whatever the configuration says now; the configured size before."""
        registration = self._registrations[topic]
        if registration.partition_count is None:
            info = self._partitions.topics.get(topic) if self._partitions.topics is not None else None
            if info is None:
                return registration.default_partitions
            registration.partition_count = info.partitions
        return registration.partition_count

    def ownership(self, topic: str, index: int) -> Ownership:
        state = self._registrations[topic].states.get(index)
        if state is _State.OWNED:
            return Ownership.OWNED
        if state is _State.LOADING:
            return Ownership.LOAD_IN_PROGRESS
        if self._leadership.sole_broker and self._partitions.topics.get(topic) is None:
            return Ownership.OWNED  # created empty, led here, on first use: nothing to load
        # Led here by the cluster view but not taking writes yet (its epoch being made durable, its log
        # opened): FindCoordinator already names this broker, so "retry here", not "look again".
        if self._leadership.elected(topic, index):
            return Ownership.LOAD_IN_PROGRESS
        return Ownership.NOT_COORDINATOR

    def owns(self, topic: str, index: int) -> bool:
        return self.ownership(topic, index) is Ownership.OWNED

    def owned(self, topic: str) -> list[int]:
        """The partitions of ``topic`` this broker coordinates now (every one on a sole broker before the
        topic exists)."""
        registration = self._registrations[topic]
        if self._leadership.sole_broker and self._partitions.topics.get(topic) is None:
            return list(range(self.partition_count(topic)))
        return sorted(i for i, state in registration.states.items() if state is _State.OWNED)

    def ensure_topic(self, topic: str) -> None:
        """The internal topic, created on first use as in Kafka. A sole broker creates it here, at
        once and empty, and coordinates its partitions from birth; a cluster asks the controller and
        raises CoordinatorNotAvailableError until the topic exists and its leaders load it."""
        registration = self._registrations[topic]
        if registration.partition_count is not None:
            return  # known to exist (internal topics are never deleted)
        info = self._partitions.topics.get(topic)
        if info is not None:
            registration.partition_count = info.partitions
            return
        info = self._partitions.ensure_internal_topic(topic)
        registration.partition_count = info.partitions
        for index in range(info.partitions):
            registration.states[index] = _State.OWNED
            registration.pending.discard(index)

    def partition(self, topic: str, index: int) -> Partition:
        """The local partition of an internal topic, the topic created on first use."""
        partition = self._partitions.partitions.get((topic, index))
        if partition is None:
            self.ensure_topic(topic)
            partition = self._partitions.partitions.get((topic, index))
            if partition is None:
                raise UnknownTopicOrPartitionError(f"{topic}-{index} does not exist on this broker")
        return partition

    # ---- leadership ---------------------------------------------------------------------------------

    def _became_leader(self, topic: str, index: int) -> None:
        registration = self._registrations[topic]
        state = registration.states.get(index)
        if state is _State.OWNED:
            partition = self._partitions.partitions.get((topic, index))
            log.info("coordinator of %s-%d keeps its state: led here without interruption, now in leader epoch %s",
                     topic, index, partition.leader_epoch if partition is not None else None)
            return
        registration.states[index] = _State.LOADING
        registration.pending.add(index)
        self._schedule_loads()

    def _resigned(self, topic: str, index: int) -> None:
        registration = self._registrations[topic]
        registration.pending.discard(index)
        state = registration.states.pop(index, None)
        if state is _State.OWNED and registration.shard is not None:
            registration.shard.unload(index)

    def _schedule_loads(self) -> None:
        if self._loop is None or self._load_scheduled or self._stopping:
            return
        if any(r.pending for r in self._registrations.values()):
            self._load_scheduled = True
            self._loop.call_soon(self._load_next)

    def _load_next(self) -> None:
        """Loads the queued partitions of the first shard that has any (one loop step per shard)."""
        self._load_scheduled = False
        if self._stopping:
            return
        for registration in self._registrations.values():
            if not registration.pending:
                continue
            indexes, registration.pending = sorted(registration.pending), set()
            partitions = {}
            for index in indexes:
                partition = self._partitions.partitions.get((registration.topic, index))
                if registration.states.get(index) is _State.LOADING and partition is not None:
                    partitions[index] = partition
            if partitions:
                self._load(registration, partitions)
            break
        self._schedule_loads()

    def _load(self, registration: _Registration, partitions: dict[int, Partition]) -> None:
        shard = self.shard(registration.topic)
        started = time.monotonic()
        try:
            shard.load(partitions)
        except Exception:
            # Left LOADING (requests retry here) rather than served from a half-read state; the next
            # leadership change tries again.
            log.exception("loading %s partitions %s failed", registration.topic, sorted(partitions))
            return
        for index in partitions:
            registration.states[index] = _State.OWNED
        log.info("coordinator of %s loaded partitions %s in %.0f ms", registration.topic,
                 _ranges(partitions), (time.monotonic() - started) * 1000)
        self.schedule(registration.topic)

    # ---- the log ------------------------------------------------------------------------------------

    def write(self, topic: str, index: int, batch: bytes,
              on_durable: Callable[[BaseException | None, PartitionAppend | None], None]) -> None:
        """Appends ``batch`` to the internal partition now; ``on_durable(error, appended)`` is called once
        the high watermark passed it, or with the error that failed the append or the wait, always later
        (never inside this call) and in append order per partition."""
        partition = None
        try:
            partition = self.partition(topic, index)
            info = partition.append_internal(batch)
            write = _Write(partition, info, None, on_durable)
        except Exception as exc:  # noqa: BLE001 - reported through on_durable, in order
            write = _Write(partition, None, exc, on_durable)
        queue = self._queues.get((topic, index))
        if queue is None:
            queue = self._queues[(topic, index)] = _WriteQueue()
        queue.writes.append(write)
        self._schedule_drain(queue)

    def write_durably(self, topic: str, index: int, batch: bytes) -> asyncio.Future:
        """:meth:`write` as a future of the append, set once it is durable (or failed with the error)."""
        future = asyncio.get_running_loop().create_future()

        def done(error: BaseException | None, info: PartitionAppend | None) -> None:
            if future.done():
                return
            if error is None:
                future.set_result(info)
            else:
                future.set_exception(error)

        self.write(topic, index, batch, done)
        return future

    def _schedule_drain(self, queue: _WriteQueue) -> None:
        if not queue.draining:
            queue.draining = True
            asyncio.get_running_loop().call_soon(self._drain, queue)

    def _drain(self, queue: _WriteQueue) -> None:
        queue.draining = False
        writes = queue.writes
        while writes:
            write = writes[0]
            if not write.settled:
                if write.partition.high_watermark < write.end:
                    if not queue.waiting:
                        queue.waiting = True
                        write.partition.on_high_watermark(write.end, lambda exc, w=write: self._reached(queue, w, exc))
                    return
                write.settled = True
            writes.popleft()
            try:
                write.callback(write.error, write.info if write.error is None else None)
            except Exception:
                log.exception("a coordinator's write callback failed")

    def _reached(self, queue: _WriteQueue, write: _Write, exc: BaseException | None) -> None:
        # Runs inside whatever moved the high watermark (or failed the wait): only note it, the callback
        # runs from the drain (it may append to this very partition).
        queue.waiting = False
        write.settled = True
        write.error = exc
        self._schedule_drain(queue)

    # ---- time ---------------------------------------------------------------------------------------

    def schedule(self, topic: str) -> None:
        """Arms the shard's timer for its next deadline if earlier than the armed one (a deadline that
        moved later just makes the timer fire early and re-arm). Shards call it after each change."""
        registration = self._registrations[topic]
        shard = registration.shard
        if shard is None or self._loop is None or self._stopping or registration.timed_work is not None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self._loop:
            # A shard built from another thread (a test reaching into an embedded broker): arm it on the loop.
            self._loop.call_soon_threadsafe(self.schedule, topic)
            return
        deadline = shard.next_deadline_ms()
        if deadline is None or (registration.timer_at_ms is not None and registration.timer_at_ms <= deadline):
            return
        if registration.timer is not None:
            registration.timer.cancel()
        registration.timer_at_ms = deadline
        delay = max(0.001, (deadline - now_ms()) / 1000)  # never spin on a deadline just passed
        registration.timer = self._loop.call_later(delay, self._on_timer, registration)

    def _on_timer(self, registration: _Registration) -> None:
        registration.timer = None
        registration.timer_at_ms = None
        try:
            work = registration.shard.on_deadline(now_ms())
        except Exception:
            log.exception("timed work of the %s coordinator failed", registration.topic)
            work = None
        if work is None:
            self.schedule(registration.topic)
            return
        registration.timed_work = asyncio.ensure_future(work)
        registration.timed_work.add_done_callback(lambda task: self._timed_work_done(registration, task))

    def _timed_work_done(self, registration: _Registration, task: asyncio.Task) -> None:
        registration.timed_work = None
        if not task.cancelled() and task.exception() is not None:
            log.error("timed work of the %s coordinator failed", registration.topic, exc_info=task.exception())
        self.schedule(registration.topic)


def _ranges(indexes: Iterable[int]) -> str:
    """"0-3, 7" for a log line."""
    out: list[tuple[int, int]] = []
    for index in sorted(indexes):
        if out and out[-1][1] == index - 1:
            out[-1] = (out[-1][0], index)
        else:
            out.append((index, index))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)
