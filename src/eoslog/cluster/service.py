"""A broker's membership of a ZooKeeper-coordinated cluster: connection, registration, the cluster view,
and the two roles that act on it (replica manager on every broker, controller on the elected one).

Contract
- ``start`` fails with :class:`ZooKeeperError` (a clear message, the broker does not start) when
  ZooKeeper cannot be reached, the data directory belongs to another cluster, or the broker id is taken.
- One task reads the whole view whenever a watch fires (reads are coalesced: a burst of changes costs
  one or two reads), then hands it to the replica manager and the controller, in that order.
- Session expiry fences this broker (it leads nothing until it has re-registered and read a fresh view);
  a lost connection alone does not: what the ISR already agreed stays safe, and ISR changes simply wait.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from eoslog.cluster.broker_client import PLAINTEXT_LINK, BrokerLink
from eoslog.cluster.controller import Controller
from eoslog.cluster.replica_manager import LocalReplicas, ReplicaManager, ReplicationConfig
from eoslog.cluster.user_credentials import ClusterCredentials
from eoslog.cluster.zk.client import ZooKeeper, ZooKeeperError
from eoslog.cluster.zk.layout import BrokerRegistration, ClusterView

log = logging.getLogger(__name__)


class ClusterService:
    def __init__(self, config, local: LocalReplicas, link: BrokerLink = PLAINTEXT_LINK) -> None:
        self.config = config
        self.broker_id = config.node_id
        self.link = link  # how this broker reaches the others (inter.broker.listener.name)
        self.zk = ZooKeeper(config.zookeeper_connect, config.zookeeper_session_timeout_ms,
                            config.zookeeper_connection_timeout_ms)
        self.replicas = ReplicaManager(ReplicationConfig(
            broker_id=config.node_id,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
            replica_fetch_max_bytes=config.replica_fetch_max_bytes,
            replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
            default_min_insync_replicas=config.min_insync_replicas,
            link=link,
        ), local, self.zk)
        self.replicas.on_replicas_opened = self.refresh
        self.replicas.on_leaders_writable = self._wake_waiters
        self.controller = Controller(
            self.zk, config.node_id, unclean_default=config.unclean_leader_election_enable,
            auto_leader_rebalance=config.auto_leader_rebalance_enable,
            imbalance_check_interval_s=config.leader_imbalance_check_interval_seconds)
        self.users = ClusterCredentials(self.zk)  # SCRAM credentials, /config/users
        self.view = ClusterView()
        self.zookeeper_state = "CONNECTING"
        self.view_listeners: list[Callable[[ClusterView], None]] = []
        self._dirty = asyncio.Event()
        self._view_changed = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._session_lost = False
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._registration: BrokerRegistration | None = None
        self._read_once = False

    # ---- lifecycle -------------------------------------------------------------------------------------

    async def start(self, proposed_cluster_id: str, registration: BrokerRegistration) -> str:
        """Connects, checks the cluster id, registers, reads the first view; returns the cluster id."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.zk.start)
        self.zookeeper_state = "CONNECTED"
        cluster_id = await asyncio.to_thread(self.zk.cluster_id, proposed_cluster_id)
        if cluster_id != proposed_cluster_id:
            await asyncio.to_thread(self.zk.stop)
            raise ZooKeeperError(
                f"the data directory belongs to cluster {proposed_cluster_id}, but ZooKeeper at "
                f"{self.config.zookeeper_connect} holds cluster {cluster_id}: refusing to join a foreign cluster")
        self.zk.on_change = lambda: self._loop.call_soon_threadsafe(self._dirty.set)
        self.zk.on_state = lambda state: self._loop.call_soon_threadsafe(self._on_state, state)
        self._registration = registration
        try:
            await asyncio.to_thread(self.zk.register_broker, registration)
        except ZooKeeperError:
            await asyncio.to_thread(self.zk.stop)
            raise
        try:
            await self.users.start()
        except Exception as exc:
            await asyncio.to_thread(self.zk.stop)
            raise ZooKeeperError(f"cannot read users' SCRAM credentials from ZooKeeper: {exc!r}") from exc
        self.replicas.start()
        await self._read_and_apply()
        self._tasks.append(self._loop.create_task(self._view_loop()))
        return cluster_id

    async def stop(self) -> None:
        """Leaves the cluster: stops leading locally first (no acknowledgement on a guess), resigns as
        controller, then closes the session so the controller moves leadership away at once."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await self.users.stop()
        await self.replicas.stop()
        try:
            await self.controller.stop()
        except Exception:
            log.debug("resigning as controller failed", exc_info=True)
        await asyncio.to_thread(self.zk.stop)

    # ---- the view ---------------------------------------------------------------------------------------

    async def _view_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._read_and_apply()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - ZooKeeper unreachable: try again on the next event
                log.warning("cannot read the cluster view from ZooKeeper (%r); serving what we know", exc)
                await asyncio.sleep(0.5)
                if self.zk.connected:
                    self._dirty.set()

    async def _read_and_apply(self) -> None:
        # Only what changed since the view we hold (cluster/zk/client.py); everything the first time.
        view = await asyncio.to_thread(self.zk.read_view, self.view if self._read_once else None)
        self._read_once = True
        if self._stopping:
            return
        self.view = view
        self.replicas.apply_view(view)
        for listener in list(self.view_listeners):
            listener(view)
        self._wake_waiters()
        task = self._loop.create_task(self.controller.on_view(view))
        task.add_done_callback(_log_failure)

    def _wake_waiters(self) -> None:
        """``wait_for`` checks its predicate again (a new view, or new leaders here taking writes)."""
        self._view_changed.set()
        self._view_changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[ClusterView], bool], timeout_s: float) -> bool:
        """Waits until a view satisfies ``predicate`` (CreateTopics waiting for leaders, for instance)."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self.view):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._view_changed.wait(), remaining)
            except TimeoutError:
                return predicate(self.view)
        return True

    def refresh(self) -> None:
        self._dirty.set()

    # ---- the session ------------------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        previous, self.zookeeper_state = self.zookeeper_state, state
        if self._stopping:
            return
        if state == "LOST":
            log.error("ZooKeeper session expired: this broker stops leading until it has registered again")
            self._session_lost = True
            self.zk.read_everything_next()  # the new session starts without our watches
            self.replicas.fence("ZooKeeper session expired")
            self.controller.session_lost()
        elif state == "SUSPENDED":
            log.warning("lost the connection to ZooKeeper; serving what the ISR already guarantees, "
                        "leadership and ISR changes wait until it is back")
        elif state == "CONNECTED":
            if previous != "CONNECTED":
                log.info("connected to ZooKeeper again")
            if self._session_lost:
                self._session_lost = False
                self._loop.create_task(self._register_again()).add_done_callback(_log_failure)
            else:
                self._dirty.set()

    async def _register_again(self) -> None:
        while not self._stopping:
            try:
                await asyncio.to_thread(self.zk.register_broker, self._registration)
                log.info("registered again as broker %d", self.broker_id)
                self._dirty.set()
                return
            except Exception as exc:  # noqa: BLE001 - keep trying while ZooKeeper recovers
                log.warning("registering again failed (%r); retrying", exc)
                await asyncio.sleep(1)

    def describe(self) -> dict:
        return {"zookeeper": self.zookeeper_state, "controller": self.controller.active,
                **self.replicas.describe()}


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("cluster task failed", exc_info=task.exception())
