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
  The watching, re-reading and read-back discipline is cluster/zk/watched_copy.py's.
"""

from __future__ import annotations

import asyncio
import logging

from eoslog.cluster.zk.client import ZooKeeper
from eoslog.cluster.zk.watched_copy import ZkWatchedCopy
from eoslog.security.credentials import Changes, CredentialStore, altered_config, decode_user
from eoslog.security.scram import CredentialError, ScramCredential

log = logging.getLogger(__name__)


class ClusterCredentials(ZkWatchedCopy):
    what = "SCRAM credentials"

    def __init__(self, zk: ZooKeeper) -> None:
        super().__init__(zk)
        self.store = CredentialStore()

    # ---- what the SASL exchange and DescribeUserScramCredentials read ---------------------------------

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.store.lookup(user, mechanism)

    def credentials_of(self, user: str) -> dict[str, ScramCredential]:
        return self.store.credentials_of(user)

    def users(self) -> list[str]:
        return self.store.users()

    # ---- writes -------------------------------------------------------------------------------------------

    async def alter(self, changes: Changes) -> None:
        for user, mechanisms in changes.items():
            await asyncio.to_thread(self.zk.alter_user, user, lambda config, m=mechanisms: altered_config(config, m))
        await self._read_back("this broker serves them once ZooKeeper answers")

    # ---- reads ----------------------------------------------------------------------------------------------

    async def _load(self) -> None:
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
