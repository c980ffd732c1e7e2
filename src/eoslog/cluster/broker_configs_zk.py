"""Dynamic broker configs on a cluster: ZooKeeper's ``/config/brokers/<id>`` and
``/config/brokers/<default>`` (Kafka's layout), read by every broker.

Contract (the watching, re-reading and read-back discipline is cluster/zk/watched_copy.py's)
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
import logging
from collections.abc import Callable

from eoslog.cluster.zk.client import ZooKeeper
from eoslog.cluster.zk.layout import BROKER_DEFAULT_ENTITY
from eoslog.cluster.zk.watched_copy import ZkWatchedCopy

log = logging.getLogger(__name__)


class ClusterBrokerConfigs(ZkWatchedCopy):
    what = "dynamic broker configs"

    def __init__(self, zk: ZooKeeper, broker_id: int,
                 on_read: Callable[[dict[str, str], dict[str, str]], None]) -> None:
        super().__init__(zk)
        self.entity = str(broker_id)
        self.on_read = on_read

    async def write(self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        await asyncio.to_thread(self.zk.alter_broker_config, entity, change)
        await self._read_back("this broker applies them once ZooKeeper answers")

    async def _load(self) -> None:
        configs = await asyncio.to_thread(self.zk.read_broker_configs, [self.entity, BROKER_DEFAULT_ENTITY],
                                          self._watch)
        self.on_read(configs[self.entity], configs[BROKER_DEFAULT_ENTITY])
