"""SCRAM credentials on a cluster: ZooKeeper's ``/config/users/<user>`` (Kafka's layout), copied into
memory on every broker.

Contract
- :attr:`store` (security/credentials.py, a CredentialStore without a file) is what SASL exchanges and
  DescribeUserScramCredentials read: a dictionary lookup on the event loop, never I/O.
- The copy is replaced whole by each read of ZooKeeper. A read happens at start, when a change
  notification appears under ``/config/changes`` (a watch left by the previous read), and after every
  reconnection to ZooKeeper: an expired session has lost its watches, and reading again is cheap and
  certain where reasoning about what a resumed session missed is not. (kazoo also fires every watch
  when a session expires; a read started then may fail while it reconnects, and the reconnection's
  read is what makes the copy whole again.)
- :meth:`alter` (AlterUserScramCredentials) writes ZooKeeper from a worker thread, then waits for a read
  that began after the write, so the broker that acknowledges a change already serves it; the others
  serve it once their watch fires, within a ZooKeeper round trip or two.
- Only the loop task reads; a failed read is retried while ZooKeeper is connected, and the last good copy
  is served meanwhile (a user deleted while ZooKeeper is unreachable can log in until it is back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from eoslog.cluster.zk.client import ZooKeeper
from eoslog.security.credentials import Changes, CredentialStore, altered_config, decode_user
from eoslog.security.scram import CredentialError, ScramCredential

log = logging.getLogger(__name__)

# How long an AlterUserScramCredentials waits for this broker to read back its own write; the write is
# durable either way, so after this it answers anyway.
READ_BACK_TIMEOUT_S = 10.0


class ClusterCredentials:
    def __init__(self, zk: ZooKeeper) -> None:
        self.zk = zk
        self.store = CredentialStore()
        self._dirty = asyncio.Event()
        self._reads_started = 0
        self._applied = 0  # the number of the newest read whose result is served
        self._applied_changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- what the SASL exchange and DescribeUserScramCredentials read ---------------------------------

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.store.lookup(user, mechanism)

    def credentials_of(self, user: str) -> dict[str, ScramCredential]:
        return self.store.credentials_of(user)

    def users(self) -> list[str]:
        return self.store.users()

    # ---- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """The first read (a ZooKeeperError if it fails: the broker does not start without its users)."""
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
        """Read everything again (event-loop thread): after a reconnection to ZooKeeper."""
        self._dirty.set()

    # ---- writes -------------------------------------------------------------------------------------------

    async def alter(self, changes: Changes) -> None:
        for user, mechanisms in changes.items():
            await asyncio.to_thread(self.zk.alter_user, user, lambda config, m=mechanisms: altered_config(config, m))
        # Any read from now on starts after the write and sees it.
        target = self._reads_started + 1
        self._dirty.set()
        try:
            await asyncio.wait_for(self._wait_applied(target), READ_BACK_TIMEOUT_S)
        except TimeoutError:
            log.warning("SCRAM credentials written to ZooKeeper but not read back within %.0f s; "
                        "this broker serves them once ZooKeeper answers", READ_BACK_TIMEOUT_S)

    async def _wait_applied(self, target: int) -> None:
        while self._applied < target:
            await self._applied_changed.wait()

    # ---- reads ----------------------------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        # kazoo's thread. CONNECTED after LOST is a new session without our watch; after SUSPENDED the
        # watch survives, but reading again costs little and needs no reasoning about what was missed.
        if state == "CONNECTED":
            self._watch(None)

    def _watch(self, _event) -> None:
        # kazoo's thread: hand over to the loop.
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._dirty.set)

    async def _read(self) -> None:
        self._reads_started += 1
        number = self._reads_started
        configs = await asyncio.to_thread(self.zk.read_users, self._watch)
        users = {}
        for user, config in configs.items():
            try:
                credentials = decode_user(config)
            except CredentialError as exc:
                log.error("user %r: its SCRAM credential in ZooKeeper does not parse (%s); it cannot log in",
                          user, exc)
                continue
            if credentials:
                users[user] = credentials
        self.store.replace_all(users)
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
            except Exception as exc:  # noqa: BLE001 - ZooKeeper unreachable: serve the last copy, retry
                log.warning("cannot read SCRAM credentials from ZooKeeper (%r); serving the last copy", exc)
                await asyncio.sleep(0.5)
                if self.zk.connected:
                    self._dirty.set()
