"""A broker's in-memory copy of some ZooKeeper znodes, kept current by watches (Kafka's config change
notifications: ``/config/changes``).

Contract (for subclasses: SCRAM users in cluster/user_credentials.py, dynamic broker configs in
cluster/broker_configs_zk.py)
- :meth:`_load` reads ZooKeeper (in a worker thread, leaving :meth:`_watch` as the watch) and applies what
  it read, on the event loop. It runs at start, whenever a watch fires, and after every reconnection: an
  expired session has lost its watches, and reading again is cheap and certain where reasoning about what a
  resumed session missed is not.
- Only the loop task reads. A failed read is retried while ZooKeeper is connected; the last copy applied
  stays in force meanwhile.
- :meth:`_read_back` is awaited after a write: it returns once a read that began after the write has been
  applied, so the broker that acknowledges a change already applies it (others do once their watch
  fires). The write is durable either way, so after ``READ_BACK_TIMEOUT_S`` it returns anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from eoslog.cluster.zk.client import ZooKeeper

log = logging.getLogger(__name__)

READ_BACK_TIMEOUT_S = 10.0
RETRY_DELAY_S = 0.5


class ZkWatchedCopy:
    what = "ZooKeeper data"  # for log lines: "cannot read <what> from ZooKeeper"

    def __init__(self, zk: ZooKeeper) -> None:
        self.zk = zk
        self._dirty = asyncio.Event()
        self._reads_started = 0
        self._applied = 0  # the number of the newest read whose result is applied
        self._applied_changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _load(self) -> None:
        """Read ZooKeeper (watch: self._watch) and apply the result on the loop."""
        raise NotImplementedError

    async def start(self) -> None:
        """The first read (a ZooKeeperError if it fails: the broker does not start without it)."""
        self._loop = asyncio.get_running_loop()
        self.zk.add_state_listener(self._on_state)
        await self._read()
        self._task = self._loop.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def refresh(self) -> None:
        """Read everything again (event-loop thread)."""
        self._dirty.set()

    async def _read_back(self, after_write: str) -> None:
        target = self._reads_started + 1  # any read from now on starts after the write and sees it
        self._dirty.set()
        try:
            await asyncio.wait_for(self._wait_applied(target), READ_BACK_TIMEOUT_S)
        except TimeoutError:
            log.warning("%s written to ZooKeeper but not read back within %.0f s; %s", self.what,
                        READ_BACK_TIMEOUT_S, after_write)

    async def _wait_applied(self, target: int) -> None:
        while self._applied < target:
            await self._applied_changed.wait()

    async def _read(self) -> None:
        self._reads_started += 1
        number = self._reads_started
        await self._load()
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
            except Exception as exc:  # noqa: BLE001 - ZooKeeper unreachable: keep the last copy, retry
                log.warning("cannot read %s from ZooKeeper (%r); keeping the last copy", self.what, exc)
                await asyncio.sleep(RETRY_DELAY_S)
                if self.zk.connected:
                    self._dirty.set()

    def _on_state(self, state: str) -> None:
        # kazoo's thread. CONNECTED after LOST is a new session without our watch; after SUSPENDED the
        # watch survives, but reading again costs little and needs no reasoning about what was missed.
        if state == "CONNECTED":
            self._watch(None)

    def _watch(self, _event) -> None:
        # kazoo's thread: hand over to the loop.
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._dirty.set)
