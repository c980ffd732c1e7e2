"""Group configs on a cluster: ZooKeeper's ``/config/groups/<group>``, copied into memory on every broker
(cluster/zk/watched_copy.py has the watching, re-reading and read-back discipline; cluster/group_configs.py
what is done with the copy)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from eoslog.cluster.zk.client import ZooKeeper
from eoslog.cluster.zk.watched_copy import ZkWatchedCopy


class ClusterGroupConfigs(ZkWatchedCopy):
    """``/config/groups/<group>`` copied into memory on every broker (cluster/zk/watched_copy.py)."""

    what = "group configs"

    def __init__(self, zk: ZooKeeper, on_read: Callable[[dict[str, dict[str, str]]], None]) -> None:
        super().__init__(zk)
        self.on_read = on_read

    async def write(self, group_id: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        await asyncio.to_thread(self.zk.alter_group_config, group_id, change)
        await self._read_back("this broker applies them once ZooKeeper answers")

    async def _load(self) -> None:
        self.on_read(await asyncio.to_thread(self.zk.read_group_configs, self._watch))
