"""The replica manager: which local partition replicas lead, which follow, and how (Kafka's
ReplicaManager in ZooKeeper mode). The one replica layer of both modes: the API handlers and the
coordinators ask it the same questions whether or not ZooKeeper is configured.

Contract
- Without ZooKeeper this broker is a cluster of one (``sole_broker``): it leads every partition, from
  the moment the partition is opened, with an ISR of itself; its high watermark is what is durable
  here, it has no follower to wait for and none fetches from it.
- Runs on the broker's event loop. ZooKeeper is read by the cluster service (cluster/service.py), which
  hands every new :class:`ClusterView` to :meth:`apply_view`; decisions there are the controller's
  (leader, epoch) and the leaders' (ISR). This broker changes only the ISR of partitions it leads, by a
  conditional write through :meth:`ZooKeeper.write_isr_as_leader`.
- A leader's high watermark is the minimum log end offset over the ISR, never past what is durable here
  (cluster/isr.py). A follower appends what it fetched, exactly as the leader has it, and takes the
  leader's high watermark capped by its own log.
- Becoming a follower starts with truncation by leader epoch (KIP-101/279, in the fetcher): never to the
  high watermark, so two quick failovers lose nothing acknowledged.
- Losing leadership fails every acks=all producer still waiting with NOT_LEADER_OR_FOLLOWER: what it
  wrote may be truncated, so it must not be acknowledged.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from eoslog.cluster.broker_client import PLAINTEXT_LINK, BrokerLink
from eoslog.cluster.isr import RESTARTED_BROKER_EPOCH, UNKNOWN_BROKER_EPOCH, LeaderIsr
from eoslog.cluster.zk.layout import NO_LEADER, ClusterView, PartitionState
from eoslog.log.checkpoint import make_durable
from eoslog.log.leader_epoch import LeaderEpochCache
from eoslog.protocol.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    KafkaError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
    error_for_code,
)

if TYPE_CHECKING:
    from eoslog.cluster.partition import Partition
    from eoslog.cluster.replica_fetcher import ReplicaFetcher
    from eoslog.cluster.zk.client import ZooKeeper

log = logging.getLogger(__name__)

LeaderNotAvailableError = error_for_code(ErrorCode.LEADER_NOT_AVAILABLE)
NotEnoughReplicasError = error_for_code(ErrorCode.NOT_ENOUGH_REPLICAS)
NotEnoughReplicasAfterAppendError = error_for_code(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
StaleBrokerEpochError = error_for_code(ErrorCode.STALE_BROKER_EPOCH)
NO_EPOCH = -1


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ReplicationConfig:
    broker_id: int
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_max_bytes: int = 1024 * 1024
    replica_fetch_response_max_bytes: int = 10 * 1024 * 1024
    replica_fetch_backoff_ms: int = 1000
    default_min_insync_replicas: int = 1
    link: BrokerLink = PLAINTEXT_LINK  # inter.broker.listener.name: where and how fetchers connect


@dataclass
class FollowerRole:
    leader: int
    leader_epoch: int


class LocalReplicas(Protocol):
    """Where local replicas' logs live (cluster/registry.py): opened, made and removed."""

    partitions: dict[tuple[str, int], Partition]

    def has_log(self, topic: str, index: int) -> bool: ...

    def open_replica(self, topic: str, index: int) -> Partition:
        """A replica over the log already on disk (loop thread: no file work)."""

    async def open_new_replicas(self, topic: str, indexes: list[int]) -> None:
        """Replicas with new logs, made in a worker thread; each in ``partitions`` once open."""

    def remove_replicas(self, replicas: list[tuple[str, int]]) -> None:
        """Stops serving them at once; their files go in a worker thread."""


class ReplicaManager:
    def __init__(self, config: ReplicationConfig, local: LocalReplicas, zk: ZooKeeper | None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.local = local
        self.partitions = local.partitions  # the broker's map of local replicas (leaders and followers)
        self.zk = zk
        # Without ZooKeeper this broker is a cluster of one: it leads every partition, including those of
        # topics not created yet, from the moment the partition is opened.
        self.sole_broker = zk is None
        # Replicas whose new logs a worker thread is making: not served yet, and not asked for again.
        self._opening: set[tuple[str, int]] = set()
        # The topic id each local replica (open or opening) was made for: a view whose topic has another
        # id shows a topic deleted and made again, even when no view showed it gone (views coalesce).
        self._incarnations: dict[tuple[str, int], uuid.UUID] = {}
        self.on_replicas_opened: Callable[[], None] = lambda: None  # the service reads the view again
        self.on_leaders_writable: Callable[[], None] = lambda: None  # the service wakes whoever waits
        self._new_leaders: list[tuple[tuple[str, int], Partition, int]] = []  # this view's, until durable
        self.view = ClusterView()
        self._broker_epochs: dict[int, int] = {}  # KIP-903: each live broker's registration czxid, by the view
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.leaders: dict[tuple[str, int], LeaderIsr] = {}
        self.followers: dict[tuple[str, int], FollowerRole] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.min_isr_for: Callable[[str], int] = lambda topic: config.default_min_insync_replicas
        self.fenced = False  # our ZooKeeper session is gone: lead nothing until it is back
        self.isr_shrinks = 0  # ISR changes this broker wrote as leader, for the metrics endpoint
        self.isr_expands = 0
        self._isr_task: asyncio.Task | None = None
        self._isr_writes: set[tuple[str, int]] = set()
        self._tasks: set[asyncio.Task] = set()
        # topic -> (became_leader(index), resigned(index)) listeners: the coordinator runtime registers
        # its internal topics here (coordinator/runtime.py); called once a new leadership takes writes,
        # and when it ends.
        self._leadership: dict[str, list[tuple[Callable[[int], None], Callable[[int], None]]]] = {}
        # resigned(topic, index) of any topic: the share-partition manager drops what it kept of the partition.
        self.resign_listeners: list[Callable[[str, int], None]] = []

    # ---- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._isr_task = asyncio.get_running_loop().create_task(self._isr_loop())

    async def stop(self) -> None:
        for tp in list(self.leaders):
            self._resign(tp, "broker shutting down")
        if self._isr_task is not None:
            self._isr_task.cancel()
        for task in list(self._tasks):
            task.cancel()
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()

    def fence(self, reason: str) -> None:
        """The ZooKeeper session expired: the controller may already have moved leadership, so stop
        leading (no acks=all write may be confirmed on a guess) and stop following until a new view."""
        if self.fenced:
            return
        log.warning("no longer acting as leader or follower: %s", reason)
        self.fenced = True
        for tp in list(self.leaders):
            self._resign(tp, reason)
        for tp in list(self.followers):
            self._stop_following(tp)

    # ---- applying ZooKeeper's decisions ----------------------------------------------------------------

    def apply_view(self, view: ClusterView) -> None:
        self.view = view
        self._broker_epochs = {b: r.czxid for b, r in view.brokers.items() if r.czxid >= 0}
        self.fenced = False
        wanted: set[tuple[str, int]] = set()
        new_logs: dict[str, list[int]] = {}
        # A replica of an earlier incarnation of a topic is not this one's (its records, epochs and
        # state are the deleted topic's): it goes, and the loop below makes the new one.
        stale = [tp for tp in self.partitions if tp not in self._opening and (assignment := view.topics.get(tp[0]))
                 is not None and self._incarnations.get(tp, assignment.topic_id) != assignment.topic_id]
        if stale:
            self._remove(stale)
        for topic, assignment in view.topics.items():
            for index, replicas in assignment.replicas.items():
                if self.broker_id not in replicas:
                    continue
                tp = (topic, index)
                wanted.add(tp)
                if tp not in self.partitions:
                    if tp in self._opening:
                        continue
                    self._incarnations[tp] = assignment.topic_id
                    if not self.local.has_log(topic, index):
                        # Files to make: in a worker thread, so a 1,000-partition topic does not stop the
                        # loop for seconds. Its state is applied by the view read once they are open.
                        # Marked opening now, not when the worker starts: a view applied meanwhile must
                        # not ask for the same files again.
                        new_logs.setdefault(topic, []).append(index)
                        self._opening.add(tp)
                        continue
                    self.local.open_replica(topic, index)
                state = view.states.get(tp)
                if state is None:
                    continue
                self._apply_state(tp, replicas, state)
        removed = [tp for tp in self.partitions if tp not in wanted and tp[0] not in view.unreadable_topics]
        if removed:
            # Deleted topic, or a replica moved elsewhere: this copy is no longer part of the cluster.
            self._remove(removed)
        if self._new_leaders:
            new_leaders, self._new_leaders = self._new_leaders, []
            self._spawn(self._take_writes(new_leaders))
        if new_logs:
            self._spawn(self._open_new(new_logs))
        for broker_id, fetcher in list(self.fetchers.items()):
            address = self.config.link.address(view.brokers.get(broker_id))
            if address is not None:
                fetcher.set_address(*address)
            if not fetcher.partitions:
                self._tasks.add(asyncio.get_running_loop().create_task(fetcher.stop()))
                del self.fetchers[broker_id]

    def _remove(self, replicas: list[tuple[str, int]]) -> None:
        for tp in replicas:
            self._forget(tp)
            self._incarnations.pop(tp, None)
        self.local.remove_replicas(replicas)

    async def _open_new(self, new_logs: dict[str, list[int]]) -> None:
        opened = False
        for topic, indexes in new_logs.items():
            opening = {(topic, index) for index in indexes}
            try:
                await self.local.open_new_replicas(topic, indexes)
                opened = True
            except Exception:
                # Not read again at once (a full disk would make that a loop): the next view tries again.
                log.exception("opening %d new replica(s) of %s failed", len(indexes), topic)
                for tp in opening - self.partitions.keys():
                    self._incarnations.pop(tp, None)
            finally:
                self._opening -= opening
        if opened:
            # Their states (and any deletion meanwhile) are applied from a fresh read, through the one
            # path every view takes; a fenced broker applies nothing until its session is back anyway.
            self.on_replicas_opened()

    def serves(self, topic: str) -> bool:
        """Every replica of ``topic`` this broker's view places here is open, and takes writes where it
        leads (CreateTopics waits for it)."""
        assignment = self.view.topics.get(topic)
        if assignment is None:
            return False
        for index, replicas in assignment.replicas.items():
            if self.broker_id not in replicas:
                continue
            partition = self.partitions.get((topic, index))
            if partition is None or ((topic, index) in self.leaders and not partition.writable):
                return False
        return True

    def _spawn(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _apply_state(self, tp: tuple[str, int], replicas: tuple[int, ...], state: PartitionState) -> None:
        previous = self.states.get(tp)
        if previous is not None and (previous.leader_epoch > state.leader_epoch or (
                previous.leader_epoch == state.leader_epoch and state.zk_version < previous.zk_version)):
            return  # a read from before our own ISR write; ZooKeeper has the newer state
        self.states[tp] = state
        partition = self.partitions[tp]
        if state.leader == self.broker_id:
            leader = self.leaders.get(tp)
            if leader is not None and leader.leader_epoch == state.leader_epoch:
                # Same epoch: an ISR change (ours, read back), or replicas added by a reassignment.
                if leader.pending is None or tuple(leader.pending) == state.isr:
                    leader.commit(state.isr)
                leader.set_replicas(replicas, now_ms())
                self._update_high_watermark(partition)
                self._remove_restarted(tp)
                return
            if self._before_registration(state):
                # Elected in an earlier life of this broker, which ended in a crash (the controller has
                # not seen it restart yet): the log it started with may lack what that life acknowledged
                # (unsynced writes lost with the power), and followers would truncate to it. Lead nothing until the controller, which
                # treats a leader registered after its state as restarted, decides again in a new epoch.
                log.info("%s: not leading epoch %d: it was decided before this broker registered; waiting "
                         "for the controller to elect again", partition.name, state.leader_epoch)
                if tp in self.leaders:
                    self._resign(tp, "leadership from before this broker registered")
                self._stop_following(tp)
                return
            self._become_leader(tp, partition, replicas, state)
        elif state.leader == NO_LEADER:
            if tp in self.leaders:
                self._resign(tp, "partition offline")
            self._stop_following(tp)
        else:
            role = self.followers.get(tp)
            if role is not None and role.leader == state.leader and role.leader_epoch == state.leader_epoch:
                return
            if tp in self.leaders:
                self._resign(tp, f"broker {state.leader} leads epoch {state.leader_epoch}")
            self._become_follower(tp, partition, state)

    def _before_registration(self, state: PartitionState) -> bool:
        own = self.view.brokers.get(self.broker_id)
        return own is not None and state.zxid >= 0 and own.czxid > state.zxid and not own.clean_start

    def _become_leader(self, tp, partition: Partition, replicas, state: PartitionState) -> None:
        self._stop_following(tp)
        end = partition.log_end_offset
        # The new epoch's entry is written and made durable in a worker thread, for every partition this
        # view makes us lead at once (1,000 file writes and 2,000 fsyncs stopped the loop for seconds).
        # A new leader takes writes only once it is durable. One that goes on leading in a new epoch
        # (the controller took a dead follower out of the ISR) keeps taking them: a crash before the
        # entry is durable leaves batches of the new epoch past the old epoch's entry, which a follower's
        # truncation by epoch treats as the old epoch's and fetches again, the same bytes at the same
        # offsets (cluster/replica_fetcher.py); pausing writes there would fail coordinators' appends.
        keeps_leading = tp in self.leaders and partition.writable
        partition.leader_epochs.assign(state.leader_epoch, end, durable=False)
        self.leaders[tp] = LeaderIsr.become_leader(self.broker_id, state.leader_epoch, end, replicas,
                                                   state.isr, now_ms(), self._isr_broker_epochs(state))
        partition.become_leader(state.leader_epoch, self._update_high_watermark, take_writes=keeps_leading)
        log.info("%s: leader for epoch %d from offset %d, ISR %s, high watermark %d",
                 partition.name, state.leader_epoch, end, list(state.isr), partition.high_watermark)
        self._update_high_watermark(partition)
        self._new_leaders.append((tp, partition, state.leader_epoch))

    async def _take_writes(self, new_leaders: list[tuple[tuple[str, int], Partition, int]]) -> None:
        """New leaders start taking writes once their epoch entries are durable."""
        try:
            await asyncio.to_thread(_write_epochs, [partition.leader_epochs for _, partition, _ in new_leaders])
        except OSError:
            log.exception("cannot make the leader-epoch checkpoints of %d new leaderships durable; they take "
                          "no writes", len(new_leaders))
            return
        for tp, partition, epoch in new_leaders:
            leader = self.leaders.get(tp)
            if leader is None or leader.leader_epoch != epoch or self.partitions.get(tp) is not partition:
                continue  # moved on meanwhile
            partition.take_writes()
            self._notify_became_leader(tp)
        self.on_leaders_writable()

    def _isr_broker_epochs(self, state: PartitionState) -> dict[int, int]:
        """Each ISR member's broker epoch as the state knows it: its registration's, unless it registered
        after the state was written, following an unclean shutdown (the controller's rule, cluster/
        controller.py ``_registered_since``): then it is restarted, and its first fetch says so."""
        epochs = {}
        for replica in state.isr:
            registration = self.view.brokers.get(replica)
            if registration is None or registration.czxid < 0:
                continue
            restarted = state.zxid >= 0 and registration.czxid > state.zxid and not registration.clean_start
            epochs[replica] = RESTARTED_BROKER_EPOCH if restarted else registration.czxid
        return epochs

    def broker_epoch(self) -> int:
        """This broker's own epoch, which its fetches carry (UNKNOWN_BROKER_EPOCH before its view has it)."""
        own = self.view.brokers.get(self.broker_id)
        return own.czxid if own is not None and own.czxid >= 0 else UNKNOWN_BROKER_EPOCH

    def _remove_restarted(self, tp) -> None:
        """KIP-903: an ISR member that restarted since it was caught up leaves the ISR now, not after
        replica.lag.time.max.ms: it fetches at once and looks in sync, but what it acknowledged before
        may be gone with its page cache, and a state naming it could make it leader on a short log."""
        leader = self.leaders.get(tp)
        if leader is None or leader.pending is not None or tp in self._isr_writes:
            return  # after the write in flight: _write_isr looks again
        restarted = leader.restarted_members(self._broker_epochs)
        if restarted:
            self._change_isr(tp, leader.isr, "")  # which takes the restarted members out

    def _become_follower(self, tp, partition: Partition, state: PartitionState) -> None:
        self._stop_following(tp)
        partition.become_follower()
        self.followers[tp] = FollowerRole(state.leader, state.leader_epoch)
        registration = self.view.brokers.get(state.leader)
        fetcher = self.fetchers.get(state.leader)
        if fetcher is None:
            # Imported here: only a cluster has followers, and a sole broker starts without its code.
            from eoslog.cluster.replica_fetcher import ReplicaFetcher

            # No address yet (the leader not registered, or without our listener): the fetcher waits for one.
            host, port = self.config.link.address(registration) or ("", 0)
            fetcher = self.fetchers[state.leader] = ReplicaFetcher(self, state.leader, host, port)
            fetcher.start()
        log.info("%s: follower of broker %d in epoch %d", partition.name, state.leader, state.leader_epoch)
        fetcher.add_partition(tp, partition, state.leader_epoch)

    def _stop_following(self, tp) -> None:
        role = self.followers.pop(tp, None)
        if role is not None:
            fetcher = self.fetchers.get(role.leader)
            if fetcher is not None:
                fetcher.remove_partition(tp)

    def _resign(self, tp, reason: str) -> None:
        leader = self.leaders.pop(tp, None)
        partition = self.partitions.get(tp)
        if leader is None or partition is None:
            return
        log.info("%s: no longer leader (%s)", partition.name, reason)
        partition.resign(NotLeaderOrFollowerError(f"{partition.name}: leadership moved ({reason})"))
        for _, resigned in self._leadership.get(tp[0], ()):
            resigned(tp[1])
        for listener in self.resign_listeners:
            listener(*tp)

    def _forget(self, tp) -> None:
        if tp in self.leaders:
            self._resign(tp, "replica removed")
        self._stop_following(tp)
        self.states.pop(tp, None)

    # ---- leadership, for the coordinator runtime ------------------------------------------------------

    def add_leadership_listener(self, topic: str, became_leader: Callable[[int], None],
                                resigned: Callable[[int], None]) -> None:
        """``became_leader(index)`` once a partition of ``topic`` led here takes writes (also again on a
        new leader epoch of a leadership that never stopped), ``resigned(index)`` when it stops."""
        self._leadership.setdefault(topic, []).append((became_leader, resigned))

    def _notify_became_leader(self, tp: tuple[str, int]) -> None:
        for became_leader, _ in self._leadership.get(tp[0], ()):
            became_leader(tp[1])

    def leader_of(self, topic: str, index: int) -> int:
        """The broker that leads the partition by this broker's view (NO_LEADER when none does); this
        one, on a sole broker."""
        if self.sole_broker:
            return self.broker_id
        state = self.view.states.get((topic, index))
        return state.leader if state is not None else NO_LEADER

    def partition_opened(self, partition: Partition) -> None:
        """A local replica was opened (the registry calls this for each): a sole broker leads it now."""
        if self.sole_broker:
            self._notify_became_leader((partition.topic, partition.index))

    def elected(self, topic: str, index: int) -> bool:
        """The cluster view names this broker leader of the partition, whether or not it takes writes yet
        (its leader epoch being made durable, its log being opened); always, on a sole broker."""
        if self.sole_broker:
            return True
        state = self.view.states.get((topic, index))
        return state is not None and state.leader == self.broker_id

    # ---- what the request handlers ask ----------------------------------------------------------------

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        """The partition for a client's produce, fetch or list-offsets: only its leader serves it; a
        ``current_leader_epoch`` the client names (Fetch, KIP-320) must be this leader's."""
        if self.sole_broker:  # first: the produce and fetch hot paths of a single node
            partition = self.partitions.get((topic, index))
            if partition is None:
                raise UnknownTopicOrPartitionError(f"{topic}-{index} does not exist on this broker")
            return partition
        tp = (topic, index)
        if tp in self.leaders:
            if current_leader_epoch >= 0:
                self.check_current_leader_epoch(tp, current_leader_epoch)
            return self.partitions[tp]
        assignment = self.view.topics.get(topic)
        if assignment is None or index not in assignment.replicas:
            raise UnknownTopicOrPartitionError(f"{topic}-{index} does not exist")
        state = self.view.states.get(tp)
        if state is None or state.leader == NO_LEADER:
            raise LeaderNotAvailableError(f"{topic}-{index} has no leader right now")
        if state.leader == self.broker_id:
            raise NotLeaderOrFollowerError(f"{topic}-{index}: the replica here is still being opened")
        raise NotLeaderOrFollowerError(f"{topic}-{index} is led by broker {state.leader}, not {self.broker_id}")

    def check_current_leader_epoch(self, tp, current_leader_epoch: int) -> None:
        """KIP-320: a request naming an older epoch is fenced, a newer one is not known here yet."""
        leader = self.leaders.get(tp)
        if leader is None or current_leader_epoch < 0:
            return
        if current_leader_epoch < leader.leader_epoch:
            raise FencedLeaderEpochError(f"epoch {current_leader_epoch} is older than {leader.leader_epoch}")
        if current_leader_epoch > leader.leader_epoch:
            raise UnknownLeaderEpochError(f"epoch {current_leader_epoch} is newer than {leader.leader_epoch}")

    def check_enough_replicas(self, partition: Partition) -> None:
        """acks=all, before appending: fewer in-sync replicas than min.insync.replicas is refused."""
        leader = self.leaders.get((partition.topic, partition.index))
        if leader is None:
            return
        required = self.min_isr_for(partition.topic)
        if len(leader.isr) < required:
            raise NotEnoughReplicasError(
                f"{partition.name}: {len(leader.isr)} in-sync replicas {list(leader.isr)}, "
                f"min.insync.replicas is {required}")

    def check_enough_replicas_after_append(self, partition: Partition) -> None:
        leader = self.leaders.get((partition.topic, partition.index))
        if leader is None:
            if self.sole_broker:
                return  # an ISR of one: what is durable here is acknowledged
            raise NotLeaderOrFollowerError(f"{partition.name}: leadership moved while waiting")
        required = self.min_isr_for(partition.topic)
        if len(leader.isr) < required:
            raise NotEnoughReplicasAfterAppendError(
                f"{partition.name}: written, but the ISR shrank to {list(leader.isr)} (min.insync.replicas {required})")

    def is_leader(self, topic: str, index: int) -> bool:
        return (topic, index) in self.leaders

    def replicated(self, partition: Partition) -> bool:
        """Whether an acks=all answer for this partition depends on followers (its ISR may shrink below
        min.insync.replicas after the append): every partition a cluster leads, none of a sole broker's."""
        return (partition.topic, partition.index) in self.leaders

    def check_follower(self, replica_id: int) -> None:
        """A replica's Fetch is possible only on a broker with followers (a sole broker still answers a
        replica's OffsetForLeaderEpoch, as it always did: from its log end)."""
        if self.sole_broker:
            raise NotLeaderOrFollowerError("this single-node broker has no followers")

    # ---- the leader's side of replication --------------------------------------------------------------

    def follower_fetch(self, replica_id: int, topic: str, index: int, fetch_offset: int,
                       current_leader_epoch: int, broker_epoch: int = UNKNOWN_BROKER_EPOCH) -> Partition:
        """Validates a follower's fetch and records where it is; returns the partition to read.
        ``broker_epoch``: the follower's registration czxid (Fetch v15+ ReplicaState.ReplicaEpoch)."""
        tp = (topic, index)
        partition = self.leader_partition(topic, index)
        self.check_current_leader_epoch(tp, current_leader_epoch)
        leader = self.leaders[tp]
        if replica_id not in leader.followers:
            raise NotLeaderOrFollowerError(f"broker {replica_id} is not a replica of {partition.name}")
        if fetch_offset > partition.log_end_offset:
            from eoslog.protocol.errors import OffsetOutOfRangeError

            raise OffsetOutOfRangeError(
                f"{partition.name}: replica {replica_id} fetches {fetch_offset}, past the log end "
                f"{partition.log_end_offset}")
        if leader.is_stale(replica_id, broker_epoch):
            raise StaleBrokerEpochError(f"{partition.name}: broker {replica_id} fetches under broker epoch "
                                        f"{broker_epoch}, older than its {leader.followers[replica_id].broker_epoch}")
        restarted = leader.record_fetch(replica_id, fetch_offset, partition.log_end_offset, now_ms(), broker_epoch)
        self._update_high_watermark(partition)
        if restarted:
            log.info("%s: broker %d fetches under a new broker epoch %d: it restarted", partition.name,
                     replica_id, broker_epoch)
            self._remove_restarted(tp)
        registered = self._broker_epochs.get(replica_id, UNKNOWN_BROKER_EPOCH)
        if leader.pending is None and leader.may_join(replica_id, partition.high_watermark, registered):
            self._change_isr(tp, (*leader.isr, replica_id), f"broker {replica_id} caught up")
        return partition

    def _update_high_watermark(self, partition: Partition) -> None:
        leader = self.leaders.get((partition.topic, partition.index))
        if leader is not None:
            partition.advance_high_watermark(leader.high_watermark(partition.local_durable_end))

    def offset_for_leader_epoch(self, topic: str, index: int, current_leader_epoch: int,
                                leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetForLeaderEpoch, from the leader's epoch cache."""
        tp = (topic, index)
        partition = self.leader_partition(topic, index)
        if self.sole_broker:
            # No leader epochs are kept without replication: every batch is "epoch 0" to a client asking.
            return (0, partition.log_end_offset) if leader_epoch >= 0 else (NO_EPOCH, NO_EPOCH)
        self.check_current_leader_epoch(tp, current_leader_epoch)
        return partition.leader_epochs.end_offset_for(leader_epoch, partition.log_end_offset)

    # ---- ISR changes -----------------------------------------------------------------------------------

    async def _isr_loop(self) -> None:
        interval = max(self.config.replica_lag_time_max_ms / 4, 50) / 1000
        while True:
            await asyncio.sleep(interval)
            now = now_ms()
            for tp, leader in list(self.leaders.items()):
                if leader.pending is not None or tp in self._isr_writes:
                    continue
                lagging = leader.out_of_sync(now, self.config.replica_lag_time_max_ms)
                if lagging:
                    self._change_isr(tp, tuple(r for r in leader.isr if r not in lagging),
                                     f"brokers {list(lagging)} fell behind for replica.lag.time.max.ms")
                else:
                    self._remove_restarted(tp)

    def _change_isr(self, tp, isr: tuple[int, ...], reason: str) -> None:
        leader = self.leaders[tp]
        state = self.states.get(tp)
        if state is None or tp in self._isr_writes:
            return
        # Whatever the change, a state this leader writes never names a member that restarted since it
        # was caught up: written after its new registration, the state would vouch for it (the
        # controller trusts members registered before a state's last write).
        restarted = leader.restarted_members(self._broker_epochs)
        if restarted:
            isr = tuple(r for r in isr if r not in restarted)
            restart = f"brokers {list(restarted)} restarted (a new broker epoch): out until caught up again"
            reason = f"{reason}; {restart}" if reason else restart
        if isr == leader.isr:
            return
        leader.propose(isr)
        self._isr_writes.add(tp)
        proposed = PartitionState(self.broker_id, leader.leader_epoch, isr, state.controller_epoch, state.zk_version)
        task = asyncio.get_running_loop().create_task(self._write_isr(tp, proposed, reason))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_isr(self, tp, proposed: PartitionState, reason: str) -> None:
        try:
            version = await asyncio.to_thread(self.zk.write_isr_as_leader, tp[0], tp[1], proposed)
        except Exception as exc:  # noqa: BLE001 - ZooKeeper unreachable: keep the old ISR, try later
            log.warning("%s-%d: ISR change to %s not written (%r); keeping %s", tp[0], tp[1],
                        list(proposed.isr), exc, list(self.leaders[tp].isr) if tp in self.leaders else [])
            version = None
        finally:
            self._isr_writes.discard(tp)
        leader = self.leaders.get(tp)
        if leader is None or leader.leader_epoch != proposed.leader_epoch:
            return
        if version is None:
            leader.pending = None  # ZooKeeper moved on; the next view says what is true
            return
        previous = leader.isr
        leader.commit(proposed.isr)
        # Kafka's IsrShrinksPerSec / IsrExpandsPerSec, as counters (cluster/replication_metrics.py).
        if len(proposed.isr) < len(previous):
            self.isr_shrinks += 1
        elif len(proposed.isr) > len(previous):
            self.isr_expands += 1
        self.states[tp] = PartitionState(proposed.leader, proposed.leader_epoch, proposed.isr,
                                         proposed.controller_epoch, version)
        log.info("%s-%d: ISR is now %s (%s)", tp[0], tp[1], list(proposed.isr), reason)
        partition = self.partitions.get(tp)
        if partition is not None:
            self._update_high_watermark(partition)
        self._remove_restarted(tp)  # a member that restarted while this write was in flight

    # ---- for describe tools --------------------------------------------------------------------------

    def describe(self) -> dict:
        return {
            "leading": sorted(f"{t}-{p}" for t, p in self.leaders),
            "following": sorted(f"{t}-{p}" for t, p in self.followers),
            "fenced": self.fenced,
        }


def _write_epochs(caches: list[LeaderEpochCache]) -> None:
    """New leaders' epoch entries on disk, durable (a worker thread)."""
    for cache in caches:
        cache.write_pending()
    make_durable([cache.path for cache in caches])


__all__ = ["KafkaError", "ReplicaManager", "ReplicationConfig"]
