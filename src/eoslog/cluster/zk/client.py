"""The one place eoslog talks to ZooKeeper (kazoo), in Kafka's layout (cluster/zk/layout.py).

Contract
- Methods here are blocking kazoo calls: the broker runs them in a worker thread (``asyncio.to_thread``)
  so a slow or absent ZooKeeper never stalls the event loop.
- Every write that carries a decision is conditional: partition state on its znode version, and the
  controller's writes also on the ``/controller_epoch`` znode version, in one ZooKeeper transaction, so a
  deposed controller or leader can never overwrite a newer decision (Kafka's KAFKA-5083 rule).
- :meth:`read_view` reads the cluster view and leaves a one-shot watch on everything it read; any change
  calls ``on_change`` (from kazoo's thread), and the owner reads again: only what changed, given the
  previous view, or everything after a new session.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError

from eoslog.cluster.zk import layout
from eoslog.cluster.zk.errors import NotController, ZooKeeperError
from eoslog.cluster.zk.layout import (
    BrokerRegistration,
    ClusterView,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
)
from eoslog.cluster.zk.reconnect import connection_retry

log = logging.getLogger(__name__)

# Operations per ZooKeeper transaction when deleting a topic: ~50 bytes each, well inside the server's
# 1 MiB request limit (jute.maxbuffer).
TRANSACTION_OPS = 5000
_EVERYTHING = ""  # a change read_view cannot place (no path): read everything
# Partition states per controller transaction: up to three creates each (the partitions znode, the
# partition's, its state) of ~150 bytes, ~250 KB in all.
STATES_PER_TRANSACTION = 500


def _drop_topics(view: ClusterView, topics: set[str]) -> None:
    """Takes the topics out of the view (one pass over its states however many topics go)."""
    if not topics:
        return
    for topic in topics:
        view.topics.pop(topic, None)
        view.configs.pop(topic, None)
        view.unreadable_topics.discard(topic)
    for key in [key for key in view.states if key[0] in topics]:
        del view.states[key]


class ZooKeeper:
    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int | None = None) -> None:
        self.connect_string = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or max(session_timeout_ms, 6000)
        # Tries again at least every second (cluster/zk/reconnect.py), not after kazoo's ever longer sleeps.
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                                  connection_retry=connection_retry(session_timeout_ms / 1000))
        self.on_change: Callable[[], None] = lambda: None
        self.on_state: Callable[[str], None] = lambda state: None
        self.client.add_listener(self._state_listener)
        # Paths whose watches fired since the last read_view (kazoo's thread adds, read_view takes).
        self._changes_lock = threading.Lock()
        self._changed: set[str] = set()
        self._read_everything = False

    # ---- connection --------------------------------------------------------------------------------

    def start(self) -> None:
        try:
            with warnings.catch_warnings():
                # kazoo warns when the chroot does not exist yet; we create it just below, as Kafka does.
                warnings.filterwarnings("ignore", message="No chroot path exists")
                self.client.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            self.client.stop()
            raise ZooKeeperError(
                f"cannot reach ZooKeeper at {self.connect_string} within {self.connection_timeout_ms} ms "
                "(zookeeper.connect, zookeeper.connection.timeout.ms)") from None
        # A chroot (host:port/eoslog) is created on first use, as Kafka does.
        for path in layout.PERSISTENT_PATHS:
            self.client.ensure_path(path)

    def stop(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:
            log.debug("closing the ZooKeeper client failed", exc_info=True)

    @property
    def connected(self) -> bool:
        return self.client.state == KazooState.CONNECTED

    def add_state_listener(self, callback: Callable[[str], None]) -> None:
        """Another listener of the connection's states (LOST, SUSPENDED, CONNECTED), called on kazoo's
        thread: it must not block."""
        self.client.add_listener(lambda state: callback(str(state)))

    def _state_listener(self, state: str) -> None:
        # Called on kazoo's connection thread: must not block.
        self.on_state(str(state))

    def _watch(self, event) -> None:
        # kazoo's thread: note what changed (the next read_view reads it again), then tell the owner.
        self._note_change(getattr(event, "path", None))
        self.on_change()

    # ---- cluster id and registration ---------------------------------------------------------------

    def cluster_id(self, proposed: str) -> str:
        """The cluster's id, creating it with ``proposed`` when this is the first broker."""
        try:
            self.client.create(layout.CLUSTER_ID, layout.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = self.client.get(layout.CLUSTER_ID)
            return layout.decode_cluster_id(data)

    def register_broker(self, registration: BrokerRegistration) -> None:
        """Creates the ephemeral ``/brokers/ids/<id>``. A registration left by this broker's previous life
        (same data directory, session not expired yet) is waited out; any other is a duplicate id."""
        path = layout.broker_path(registration.broker_id)
        deadline = time.monotonic() + self.session_timeout_ms / 1000 * 2 + 5
        while True:
            try:
                self.client.create(path, registration.encode(), ephemeral=True)
                return
            except NodeExistsError:
                pass
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == self.client.client_id[0]:
                return  # ours already (a retry after a connection loss)
            existing = BrokerRegistration.decode(registration.broker_id, data)
            if existing.data_dir != registration.data_dir or time.monotonic() > deadline:
                raise ZooKeeperError(
                    f"broker.id {registration.broker_id} is already registered in ZooKeeper by "
                    f"{existing.describe()} (data dir {existing.data_dir or 'unknown'}); "
                    "every broker needs its own broker.id")
            time.sleep(0.2)  # our own previous registration: gone when its session expires

    # ---- the controller ----------------------------------------------------------------------------

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """(controller epoch, epoch znode version) when this broker won the election, else None."""
        try:
            self.client.create(layout.CONTROLLER, layout.encode_controller(broker_id), ephemeral=True)
        except NodeExistsError:
            return None
        while True:
            try:
                data, stat = self.client.get(layout.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self.client.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(1))
                    data, stat = self.client.get(layout.CONTROLLER_EPOCH)
                    return layout.decode_controller_epoch(data), stat.version
                except NodeExistsError:
                    continue
            epoch = layout.decode_controller_epoch(data) + 1
            try:
                stat = self.client.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch), stat.version)
                return epoch, stat.version
            except BadVersionError:
                continue

    def resign_controller(self, broker_id: int) -> None:
        try:
            data, stat = self.client.get(layout.CONTROLLER)
            if layout.decode_controller(data) == broker_id:
                self.client.delete(layout.CONTROLLER, stat.version)
        except (NoNodeError, BadVersionError):
            pass

    def controller_owner(self, broker_id: int) -> str:
        """Who holds ``/controller`` right now, read directly (views can be older than an election):
        "us" (this broker, this session), "stale" (this broker's id from a session we no longer act
        for), "other" (another broker) or "none"."""
        try:
            data, stat = self.client.get(layout.CONTROLLER)
        except NoNodeError:
            return "none"
        if layout.decode_controller(data) != broker_id:
            return "other"
        session_id = self.client.client_id[0] if self.client.client_id else None
        return "us" if stat.ephemeralOwner == session_id else "stale"

    # ---- reading the cluster ------------------------------------------------------------------------

    def read_view(self, previous: ClusterView | None = None) -> ClusterView:
        """The cluster view, with a watch left on each znode read (reads are pipelined).

        With ``previous`` (the last view this client returned), only the znodes whose watches fired
        since are read again, and everything else is taken from ``previous``: an ISR change of one
        partition then costs one read, not one per partition of the cluster (2,000 reads, 1-2 s of a
        worker thread each time, at 1,000 partitions of replication factor 2 and more). Everything is
        read when there is no ``previous``, after ``read_everything_next``, or when a change cannot be
        placed."""
        with self._changes_lock:
            changed, self._changed = self._changed, set()
            everything = previous is None or self._read_everything or _EVERYTHING in changed
            self._read_everything = False
        try:
            if everything:
                return self._read_all()
            return self._read_changes(previous, changed)
        except BaseException:
            with self._changes_lock:  # read them again next time
                self._changed |= changed
                self._read_everything |= everything
            raise

    def read_everything_next(self) -> None:
        """The next ``read_view`` reads everything: a new session has none of the old one's watches."""
        with self._changes_lock:
            self._read_everything = True

    def _note_change(self, path: str | None) -> None:
        with self._changes_lock:
            self._changed.add(path if path else _EVERYTHING)

    def _read_all(self) -> ClusterView:
        view = ClusterView()
        self._read_brokers(view)
        self._read_controller(view)
        self._read_topics(view, self.client.get_children(layout.BROKER_TOPICS, watch=self._watch))
        return view

    def _read_changes(self, previous: ClusterView, changed: set[str]) -> ClusterView:
        placed = (layout.BROKER_IDS, layout.CONTROLLER, layout.BROKER_TOPICS)
        if any(path not in placed and not path.startswith(layout.BROKER_IDS + "/")
               and layout.classify_path(path)[0] == "other" for path in changed):
            return self._read_all()
        view = ClusterView(brokers=dict(previous.brokers), controller_id=previous.controller_id,
                           topics=dict(previous.topics), configs=dict(previous.configs),
                           states=dict(previous.states), unreadable_topics=set(previous.unreadable_topics))
        if any(path == layout.BROKER_IDS or path.startswith(layout.BROKER_IDS + "/") for path in changed):
            view.brokers = {}
            self._read_brokers(view)
        if layout.CONTROLLER in changed:
            self._read_controller(view)
        topics: set[str] = set()
        listings: set[str] = set()
        states: set[tuple[str, int]] = set()
        if layout.BROKER_TOPICS in changed:
            names = set(self.client.get_children(layout.BROKER_TOPICS, watch=self._watch))
            _drop_topics(view, (set(view.topics) | view.unreadable_topics) - names)
            topics |= names - set(view.topics) - view.unreadable_topics
        for path in changed:
            kind, topic, partition = layout.classify_path(path)
            if kind in ("topic", "topic_config"):
                topics.add(topic)
            elif kind == "partitions":
                listings.add(topic)
            elif kind == "state":
                states.add((topic, partition))
        self._read_topics(view, topics)  # everything of these, states included
        self._read_partitions(view, [t for t in listings if t in view.topics and t not in topics], every=False)
        self._read_states(view, {key for key in states if key[0] in view.topics and key[0] not in topics})
        return view

    def _read_brokers(self, view: ClusterView) -> None:
        client, watch = self.client, self._watch
        for child in client.get_children(layout.BROKER_IDS, watch=watch):
            try:
                data, stat = client.get(layout.broker_path(int(child)), watch=watch)
                view.brokers[int(child)] = BrokerRegistration.decode(int(child), data, stat.czxid)
            except (NoNodeError, ValueError):
                continue

    def _read_controller(self, view: ClusterView) -> None:
        client, watch = self.client, self._watch
        try:
            data, _ = client.get(layout.CONTROLLER, watch=watch)
            view.controller_id = layout.decode_controller(data)
        except NoNodeError:
            view.controller_id = -1
            if client.exists(layout.CONTROLLER, watch=watch) is not None:
                # Elected between the two calls: read it again.
                self._note_change(layout.CONTROLLER)
                self.on_change()

    def _read_topics(self, view: ClusterView, topics) -> None:
        """Reads each topic's assignment, config and partition states into ``view``; a topic whose
        assignment is gone leaves the view."""
        client, watch = self.client, self._watch
        topic_reads = {t: client.get_async(layout.topic_path(t), watch=watch) for t in topics}
        config_reads = {t: client.get_async(layout.topic_config_path(t), watch=watch) for t in topics}
        read, gone, unreadable = [], set(), set()
        for topic, result in topic_reads.items():
            try:
                data, _ = result.get()
                assignment = TopicAssignment.decode(topic, data)
            except NoNodeError:
                gone.add(topic)
                continue
            except layout.LayoutError:
                log.exception("ignoring topic %s: its assignment znode is unreadable", topic)
                unreadable.add(topic)
                continue
            view.unreadable_topics.discard(topic)
            view.topics[topic] = assignment
            try:
                view.configs[topic] = layout.decode_topic_config(topic, config_reads[topic].get()[0])
            except NoNodeError:
                view.configs[topic] = {}
            read.append(topic)
        _drop_topics(view, gone | unreadable)
        view.unreadable_topics |= unreadable
        self._read_partitions(view, read, every=True)

    def _read_partitions(self, view: ClusterView, topics, every: bool) -> None:
        """Lists each topic's partition znodes and reads the states of those listed: all of them
        (``every``), or only those the view has no state for. Only partitions whose znode exists have a
        state to read, and the child watch on the partitions znode says when the controller adds more:
        a new topic's first read is a few requests, not two per partition, and the controller's
        transaction creating 500 states costs one listing and 500 reads."""
        client, watch = self.client, self._watch
        listed = {t: client.get_children_async(layout.partitions_path(t), watch=watch) for t in topics}
        present: dict[str, set[int]] = {}
        for topic, result in listed.items():
            try:
                present[topic] = {int(child) for child in result.get() if child.isdigit()}
            except NoNodeError:
                present[topic] = set()
                if client.exists(layout.partitions_path(topic), watch=watch) is not None:
                    self._note_change(layout.partitions_path(topic))  # made between the two calls
                    self.on_change()
        # One pass over the view's states, however many topics were listed.
        for key in [key for key in view.states if key[0] in present and key[1] not in present[key[0]]]:
            del view.states[key]
        self._read_states(view, {(topic, partition) for topic, partitions in present.items()
                                 for partition in view.topics[topic].replicas
                                 if partition in partitions and (every or (topic, partition) not in view.states)})

    def _read_states(self, view: ClusterView, keys) -> None:
        client, watch = self.client, self._watch
        reads = {key: (path, client.get_async(path, watch=watch))
                 for key in keys for path in [layout.partition_state_path(*key)]}
        missing = {}
        for key, (path, result) in reads.items():
            try:
                data, stat = result.get()
            except NoNodeError:
                # Created by the controller soon: watch for it (pipelined, like the reads: a new topic of
                # 1,000 partitions would otherwise cost 1,000 round trips).
                view.states.pop(key, None)
                missing[key] = (path, client.exists_async(path, watch=watch))
                continue
            view.states[key] = PartitionState.decode(path, data, stat.version, stat.mzxid)
        # One that appeared between the two calls: its watch would only fire on its next change, so
        # read it now.
        appeared = {key: (path, client.get_async(path, watch=watch))
                    for key, (path, result) in missing.items() if result.get() is not None}
        for key, (path, result) in appeared.items():
            try:
                data, stat = result.get()
            except NoNodeError:
                continue
            view.states[key] = PartitionState.decode(path, data, stat.version, stat.mzxid)

    def controller_epoch(self) -> tuple[int, int]:
        data, stat = self.client.get(layout.CONTROLLER_EPOCH)
        return layout.decode_controller_epoch(data), stat.version

    # ---- partition state ----------------------------------------------------------------------------

    def write_state_as_controller(self, topic: str, partition: int, state: PartitionState,
                                  epoch_zk_version: int) -> bool:
        """Creates or conditionally replaces a state znode, only while this controller's epoch stands.
        False when the state moved since it was read (the caller reads again); NotController when
        another controller has been elected."""
        path = layout.partition_state_path(topic, partition)
        if state.zk_version < 0 and not self._ensure_partition_parents(topic, partition):
            return False  # the topic was deleted meanwhile: never recreate its znodes
        transaction = self.client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH, epoch_zk_version)
        if state.zk_version < 0:
            transaction.create(path, state.encode())
        else:
            transaction.set_data(path, state.encode(), state.zk_version)
        results = transaction.commit()
        # A failed transaction reports the failing operation's error and RolledBackError for the others.
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise NotController(f"controller epoch znode moved: {results[0]!r}")
        if isinstance(results[1], (BadVersionError, NodeExistsError, NoNodeError)):
            return False
        for result in results:
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise result
        return True

    def write_states_as_controller(self, writes: list[tuple[str, int, PartitionState]],
                                   epoch_zk_version: int) -> list[bool]:
        """Many decisions at once (a new topic's partitions, a broker's leaderships moving): each chunk
        of STATES_PER_TRANSACTION in one transaction checked against the controller epoch, as
        :meth:`write_state_as_controller` checks one. Written one at a time, a 1,000-partition topic took
        3,000 round trips and a watch event per state on every broker. A chunk that fails as a whole (a
        state moved, a topic deleted meanwhile) is written again one state at a time, so every decision
        gets its own outcome. Per write: True when written, False when its state moved."""
        outcomes: list[bool] = []
        for start in range(0, len(writes), STATES_PER_TRANSACTION):
            chunk = writes[start:start + STATES_PER_TRANSACTION]
            if self._commit_states(chunk, epoch_zk_version):
                outcomes.extend(True for _ in chunk)
            else:
                outcomes.extend(self.write_state_as_controller(topic, partition, state, epoch_zk_version)
                                for topic, partition, state in chunk)
        return outcomes

    def _commit_states(self, chunk: list[tuple[str, int, PartitionState]], epoch_zk_version: int) -> bool:
        """One transaction for the whole chunk; False when any write in it fails (nothing written)."""
        parents: dict[str, set[str] | None] = {}  # topic -> existing partition znodes (None: no partitions znode)
        for topic in {topic for topic, _, state in chunk if state.zk_version < 0}:
            try:
                parents[topic] = set(self.client.get_children(layout.partitions_path(topic)))
            except NoNodeError:
                parents[topic] = None
        transaction = self.client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH, epoch_zk_version)
        for topic, partition, state in chunk:
            path = layout.partition_state_path(topic, partition)
            if state.zk_version >= 0:
                transaction.set_data(path, state.encode(), state.zk_version)
                continue
            existing = parents[topic]
            if existing is None:
                # Without makepath: a deleted topic's znode fails the transaction instead of coming back.
                transaction.create(layout.partitions_path(topic), b"")
                existing = parents[topic] = set()
            if str(partition) not in existing:
                transaction.create(f"{layout.partitions_path(topic)}/{partition}", b"")
                existing.add(str(partition))
            transaction.create(path, state.encode())
        results = transaction.commit()
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise NotController(f"controller epoch znode moved: {results[0]!r}")
        return not any(isinstance(result, Exception) for result in results)

    def finish_reassignment_as_controller(self, assignment: TopicAssignment,
                                          states: list[tuple[int, PartitionState]], epoch_zk_version: int) -> bool:
        """Completes reassignments (KIP-455): the new leader/ISR of each partition and the topic's new
        assignment in one transaction, checked against the controller epoch. False when anything moved."""
        transaction = self.client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH, epoch_zk_version)
        for partition, state in states:
            transaction.set_data(layout.partition_state_path(assignment.name, partition), state.encode(),
                                 state.zk_version)
        transaction.set_data(layout.topic_path(assignment.name), assignment.encode())
        results = transaction.commit()
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise NotController(f"controller epoch znode moved: {results[0]!r}")
        return not any(isinstance(r, Exception) for r in results)

    def _ensure_partition_parents(self, topic: str, partition: int) -> bool:
        """Creates ``.../partitions/<p>`` without ``makepath``: a deleted topic's znode must stay deleted."""
        for path in (layout.partitions_path(topic), f"{layout.partitions_path(topic)}/{partition}"):
            try:
                self.client.create(path, b"")
            except NodeExistsError:
                pass
            except NoNodeError:
                return False
        return True

    def write_isr_as_leader(self, topic: str, partition: int, state: PartitionState) -> int | None:
        """The leader's own ISR change (same leader and epoch); the new znode version, or None when the
        state moved (a new controller decision the leader has not seen yet)."""
        try:
            stat = self.client.set(layout.partition_state_path(topic, partition), state.encode(), state.zk_version)
            return stat.version
        except (BadVersionError, NoNodeError):
            return None

    # ---- topics ---------------------------------------------------------------------------------------

    def create_topic(self, assignment: TopicAssignment, configs: dict[str, str]) -> None:
        """Config first, then the assignment the controller watches (Kafka's order), in one transaction."""
        self.client.ensure_path(layout.CONFIG_TOPICS)
        transaction = self.client.transaction()
        transaction.create(layout.topic_config_path(assignment.name), layout.encode_topic_config(configs))
        transaction.create(layout.topic_path(assignment.name), assignment.encode())
        results = transaction.commit()
        for result in results:
            if isinstance(result, NodeExistsError):
                raise NodeExistsError(f"topic {assignment.name} exists")
            if isinstance(result, Exception):
                raise result

    def set_assignment(self, assignment: TopicAssignment) -> None:
        self.client.set(layout.topic_path(assignment.name), assignment.encode())

    def set_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        path = layout.topic_config_path(topic)
        try:
            self.client.set(path, layout.encode_topic_config(configs))
        except NoNodeError:
            self.client.create(path, layout.encode_topic_config(configs), makepath=True)

    def delete_topic(self, topic: str) -> None:
        """Every znode of the topic (its assignment, each partition's state, its config) in one transaction.

        Deleted one by one, the topic kept its assignment while its partitions' states went, the
        controller made those states again as new partitions, and deleting a topic of hundreds of
        partitions chased it for over a minute. A state the controller creates between our listing and the
        commit fails the transaction (NotEmpty): we list again. A topic past TRANSACTION_OPS znodes
        (~2,500 partitions) is deleted in several transactions, children before parents, the topic's
        own znode in the last."""
        root = layout.topic_path(topic)
        config = layout.topic_config_path(topic)
        for attempt in range(50):
            try:
                paths = self._subtree(root)
            except NoNodeError:
                if self.client.exists(root) is None:
                    raise  # gone: nothing to delete (the caller answers UNKNOWN_TOPIC_OR_PARTITION)
                paths = None  # a partition went while we listed: list again
            if paths is not None:
                if self.client.exists(config) is not None:
                    paths.append(config)
                failed = None
                for start in range(0, len(paths), TRANSACTION_OPS):
                    transaction = self.client.transaction()
                    for path in paths[start:start + TRANSACTION_OPS]:
                        transaction.delete(path)
                    failed = next((r for r in transaction.commit()
                                   if isinstance(r, Exception) and not isinstance(r, RolledBackError)), None)
                    if failed is not None:
                        break
                if failed is None:
                    return
                if not isinstance(failed, NotEmptyError | NoNodeError):
                    raise failed
            time.sleep(0.02 * (attempt + 1))
        raise ZooKeeperError(f"could not delete {root}: it keeps getting new children")

    def _subtree(self, path: str) -> list[str]:
        """``path`` and every znode below it, children before their parents. Listed a level at a time,
        each level's listings pipelined: a topic of 2,000 partitions has 4,000 znodes, and listing them
        one round trip after another took seconds. NoNodeError when one went meanwhile."""
        levels = [[path]]
        while levels[-1]:
            listings = [(parent, self.client.get_children_async(parent)) for parent in levels[-1]]
            levels.append([f"{parent}/{child}" for parent, result in listings for child in result.get()])
        return [znode for level in reversed(levels) for znode in level]

    # ---- producer ids -----------------------------------------------------------------------------

    def claim_producer_id_block(self, broker_id: int, size: int) -> tuple[int, int]:
        """[start, end) of a block of producer ids no other broker gets (Kafka's conditional set on
        ``/latest_producer_id_block``)."""
        while True:
            try:
                data, stat = self.client.get(layout.LATEST_PRODUCER_ID_BLOCK)
            except NoNodeError:
                block = ProducerIdBlock(broker_id, 0, size - 1)
                try:
                    self.client.create(layout.LATEST_PRODUCER_ID_BLOCK, block.encode())
                    return 0, size
                except NodeExistsError:
                    continue
            previous = ProducerIdBlock.decode(data)
            start = 0 if previous is None else previous.block_end + 1
            block = ProducerIdBlock(broker_id, start, start + size - 1)
            try:
                self.client.set(layout.LATEST_PRODUCER_ID_BLOCK, block.encode(), stat.version)
                return start, start + size
            except BadVersionError:
                continue

    # ---- users' SCRAM credentials ---------------------------------------------------------------------

    def read_users(self, watch: Callable | None = None) -> dict[str, dict[str, str]]:
        """Every ``/config/users/<user>`` config map, by user name. ``watch`` is left on the children of
        ``/config/changes`` first, so any change written after this read begins fires it."""
        client = self.client
        client.get_children(layout.CONFIG_CHANGES, watch=watch)
        reads = {name: client.get_async(f"{layout.CONFIG_USERS}/{name}")
                 for name in client.get_children(layout.CONFIG_USERS)}
        users = {}
        for name, result in reads.items():
            path = f"{layout.CONFIG_USERS}/{name}"
            try:
                users[layout.desanitize_entity_name(name)] = layout.decode_entity_config(path, result.get()[0])
            except NoNodeError:
                continue
            except layout.LayoutError:
                log.exception("ignoring user znode %s: unreadable", path)
        return users

    def alter_user(self, user: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Rewrites ``/config/users/<user>`` with ``change(current config)`` (deleted when that is empty)
        and announces it with a ``/config/changes`` notification, both in one transaction, conditional on
        the znode's version: a concurrent change by another broker is read and applied to, never lost."""
        self._alter_entity_config(layout.user_config_path(user), layout.user_entity_path(user), change)

    def read_group_configs(self, watch: Callable | None = None) -> dict[str, dict[str, str]]:
        """Every ``/config/groups/<group>`` config map, by group id; ``watch`` is left on the children of
        ``/config/changes`` first, as for users."""
        client = self.client
        client.get_children(layout.CONFIG_CHANGES, watch=watch)
        reads = {name: client.get_async(f"{layout.CONFIG_GROUPS}/{name}")
                 for name in client.get_children(layout.CONFIG_GROUPS)}
        groups = {}
        for name, result in reads.items():
            path = f"{layout.CONFIG_GROUPS}/{name}"
            try:
                groups[layout.desanitize_entity_name(name)] = layout.decode_entity_config(path, result.get()[0])
            except NoNodeError:
                continue
            except layout.LayoutError:
                log.exception("ignoring group config znode %s: unreadable", path)
        return groups

    def alter_group_config(self, group_id: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Rewrites ``/config/groups/<group>`` with ``change(current)``, announced under ``/config/changes``
        in the same transaction (deleted when empty), as for users."""
        self._alter_entity_config(layout.group_config_path(group_id), layout.group_entity_path(group_id), change)

    def read_broker_configs(self, entities: list[str], watch: Callable | None = None) -> dict[str, dict[str, str]]:
        """``/config/brokers/<entity>`` for each entity (absent: {}); ``watch`` is left on the children of
        ``/config/changes`` first, so any change written after this read begins fires it."""
        self.client.get_children(layout.CONFIG_CHANGES, watch=watch)
        reads = {entity: self.client.get_async(layout.broker_config_path(entity)) for entity in entities}
        configs = {}
        for entity, result in reads.items():
            try:
                configs[entity] = layout.decode_entity_config(layout.broker_config_path(entity), result.get()[0])
            except NoNodeError:
                configs[entity] = {}
        return configs

    def alter_broker_config(self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Rewrites ``/config/brokers/<entity>`` (a broker id or ``<default>``) with ``change(current)``,
        announced under ``/config/changes`` in the same transaction (Kafka's AdminZkClient.changeBrokerConfig);
        ``change`` may raise to refuse, and runs again if another broker changed the znode meanwhile."""
        self._alter_entity_config(layout.broker_config_path(entity), layout.broker_entity_path(entity), change)

    def _alter_entity_config(self, path: str, entity_path: str,
                             change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        notification = f"{layout.CONFIG_CHANGES}/{layout.CONFIG_CHANGE_PREFIX}"
        while True:
            try:
                data, stat = self.client.get(path)
                current, version = layout.decode_entity_config(path, data), stat.version
            except NoNodeError:
                current, version = {}, None
            wanted = change(current)
            if version is None and not wanted:
                return
            transaction = self.client.transaction()
            if version is None:
                transaction.create(path, layout.encode_entity_config(wanted))
            elif wanted:
                transaction.set_data(path, layout.encode_entity_config(wanted), version)
            else:
                transaction.delete(path, version)
            transaction.create(notification, layout.encode_config_change(entity_path), sequence=True)
            results = transaction.commit()
            if isinstance(results[0], (BadVersionError, NodeExistsError, NoNodeError)):
                continue  # changed meanwhile: apply to what is there now
            for result in results:
                if isinstance(result, Exception):
                    raise ZooKeeperError(f"writing {path}: {result!r}")
            break
        self._purge_config_changes()

    def _purge_config_changes(self) -> None:
        """Notifications older than Kafka's 15 minutes go (Kafka's readers purge them; ours purge on write,
        since our readers re-read every user and never need an old notification)."""
        cutoff_ms = time.time() * 1000 - layout.CONFIG_CHANGE_EXPIRATION_MS
        children = self.client.get_children(layout.CONFIG_CHANGES)
        stats = {name: self.client.exists_async(f"{layout.CONFIG_CHANGES}/{name}") for name in children}
        for name, result in stats.items():
            stat = result.get()
            if stat is not None and stat.ctime < cutoff_ms:
                try:
                    self.client.delete(f"{layout.CONFIG_CHANGES}/{name}")
                except NoNodeError:
                    pass
