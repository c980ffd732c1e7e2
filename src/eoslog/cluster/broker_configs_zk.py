"""Dynamic broker configs on a cluster: ZooKeeper's ``/config/brokers/<id>`` and
``/config/brokers/<default>`` (Kafka's layout), read by every broker.

Contract (the same discipline as cluster/user_credentials.py)
- ``on_read(per_broker, default)`` is called on the event loop with this broker's entry and the default
  after every read: at start, when a notification appears under ``/config/changes`` (a watch left by the
  previous read), and after every reconnection to ZooKeeper.
- :meth:`write` changes one entity's znode from a worker thread, then waits for a read that began after
  the write, so the broker that acknowledges a change already applies it; the others apply it once their
  watch fires.
- A failed read is retried while ZooKeeper is connected; the last values read stay in force meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from eoslog.cluster.zk.client import ZooKeeper
from eoslog.cluster.zk.layout import BROKER_DEFAULT_ENTITY

log = logging.getLogger(__name__)

READ_BACK_TIMEOUT_S = 10.0


class ClusterBrokerConfigs:
    def __init__(self, zk: ZooKeeper, broker_id: int,
                 on_read: Callable[[dict[str, str], dict[str, str]], None]) -> None:
        self.zk = zk
        self.entity = str(broker_id)
        self.on_read = on_read
        self._dirty = asyncio.Event()
        self._reads_started = 0
        self._applied = 0
        self._applied_changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.zk.add_state_listener(self._on_state)
        await self._read()
        self._task = self._loop.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def write(self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        await asyncio.to_thread(self.zk.alter_broker_config, entity, change)
        target = self._reads_started + 1  # any read from now on starts after the write and sees it
        self._dirty.set()
        try:
            await asyncio.wait_for(self._wait_applied(target), READ_BACK_TIMEOUT_S)
        except TimeoutError:
            log.warning("dynamic broker configs written to ZooKeeper but not read back within %.0f s",
                        READ_BACK_TIMEOUT_S)

    async def _wait_applied(self, target: int) -> None:
        while self._applied < target:
            await self._applied_changed.wait()

    def _on_state(self, state: str) -> None:
        if state == "CONNECTED":  # kazoo's thread: a new session has none of our watches
            self._watch(None)

    def _watch(self, _event) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._dirty.set)

    async def _read(self) -> None:
        self._reads_started += 1
        number = self._reads_started
        configs = await asyncio.to_thread(self.zk.read_broker_configs, [self.entity, BROKER_DEFAULT_ENTITY],
                                          self._watch)
        self.on_read(configs[self.entity], configs[BROKER_DEFAULT_ENTITY])
        self._applied = number
        self._applied_changed.set()
        self._applied_changed = asyncio.Event()

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._read()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - ZooKeeper unreachable: keep the last values, retry
                log.warning("cannot read dynamic broker configs from ZooKeeper (%r); keeping the last ones", exc)
                await asyncio.sleep(0.5)
                if self.zk.connected:
                    self._dirty.set()
