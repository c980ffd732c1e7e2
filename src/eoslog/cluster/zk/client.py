"""The one place eoslog talks to ZooKeeper (kazoo), in Kafka's layout (cluster/zk/layout.py).

Contract
- Methods here are blocking kazoo calls: the broker runs them in a worker thread (``asyncio.to_thread``)
  so a slow or absent ZooKeeper never stalls the event loop.
- Every write that carries a decision is conditional: partition state on its znode version, and the
  controller's writes also on the ``/controller_epoch`` znode version, in one ZooKeeper transaction, so a
  deposed controller or leader can never overwrite a newer decision (Kafka's KAFKA-5083 rule).
- :meth:`read_view` reads the whole cluster view and leaves a one-shot watch on everything it read;
  any change calls ``on_change`` (from kazoo's thread), and the owner reads again.
"""

from __future__ import annotations

import logging
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

log = logging.getLogger(__name__)

# Operations per ZooKeeper transaction when deleting a topic: ~50 bytes each, well inside the server's
# 1 MiB request limit (jute.maxbuffer).
TRANSACTION_OPS = 5000


class ZooKeeper:
    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int | None = None) -> None:
        self.connect_string = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or max(session_timeout_ms, 6000)
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self.on_change: Callable[[], None] = lambda: None
        self.on_state: Callable[[str], None] = lambda state: None
        self.client.add_listener(self._state_listener)

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

    def _watch(self, _event) -> None:
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

    def read_view(self) -> ClusterView:
        """Everything, with a watch left on each znode read (pipelined: one round trip per level)."""
        client, watch = self.client, self._watch
        view = ClusterView()
        for child in client.get_children(layout.BROKER_IDS, watch=watch):
            try:
                data, _ = client.get(layout.broker_path(int(child)), watch=watch)
                view.brokers[int(child)] = BrokerRegistration.decode(int(child), data)
            except (NoNodeError, ValueError):
                continue
        try:
            data, _ = client.get(layout.CONTROLLER, watch=watch)
            view.controller_id = layout.decode_controller(data)
        except NoNodeError:
            if client.exists(layout.CONTROLLER, watch=watch) is not None:
                self.on_change()  # elected between the two calls: read again
        topics = client.get_children(layout.BROKER_TOPICS, watch=watch)
        topic_reads = {t: client.get_async(layout.topic_path(t), watch=watch) for t in topics}
        config_reads = {t: client.get_async(layout.topic_config_path(t), watch=watch) for t in topics}
        for topic, result in topic_reads.items():
            try:
                data, _ = result.get()
                view.topics[topic] = TopicAssignment.decode(topic, data)
            except NoNodeError:
                continue
            except layout.LayoutError:
                log.exception("ignoring topic %s: its assignment znode is unreadable", topic)
                view.unreadable_topics.add(topic)
                continue
            try:
                view.configs[topic] = layout.decode_topic_config(topic, config_reads[topic].get()[0])
            except NoNodeError:
                view.configs[topic] = {}
        state_reads = {}
        for topic, assignment in view.topics.items():
            for partition in assignment.replicas:
                path = layout.partition_state_path(topic, partition)
                state_reads[(topic, partition)] = (path, client.get_async(path, watch=watch))
        for key, (path, result) in state_reads.items():
            try:
                data, stat = result.get()
            except NoNodeError:
                # Created by the controller soon. If it appeared between the two calls, the watch we just
                # set would only fire on its next change: read it now instead.
                if client.exists(path, watch=watch) is None:
                    continue
                try:
                    data, stat = client.get(path, watch=watch)
                except NoNodeError:
                    continue
            view.states[key] = PartitionState.decode(path, data, stat.version)
        return view

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
        """``path`` and every znode below it, children before their parents."""
        below = []
        for child in self.client.get_children(path):
            below.extend(self._subtree(f"{path}/{child}"))
        below.append(path)
        return below

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
