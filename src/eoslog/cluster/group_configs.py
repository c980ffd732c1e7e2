"""Group configs (the GROUP config resource of DescribeConfigs and IncrementalAlterConfigs): what each
group sets, kept durably where the topic configs of the same mode are kept.

Contract
- :meth:`GroupConfigs.get` is a dictionary lookup on the event loop (the group coordinator and the
  share-partition manager read it on every operation); what it returns is the group's own configs only
  (the names and checks are coordinator/group/dynamic_configs.py's; the handler checks before altering).
- Persisted before applied, so an acknowledged change survives a restart and a failed write changes
  nothing: on a single node a file in the data directory (GROUP_CONFIG_FILE, written whole and atomically
  in a worker thread, like ``topics.json``); on a cluster ZooKeeper's ``/config/groups/<group>``, announced
  under ``/config/changes`` (cluster/group_configs_zk.py), which every broker copies into memory.
- ``listeners`` are called with the group id after each change it sees applied.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from eoslog.log.checkpoint import write_atomically

if TYPE_CHECKING:
    from eoslog.cluster.group_configs_zk import ClusterGroupConfigs
    from eoslog.cluster.zk.client import ZooKeeper

log = logging.getLogger(__name__)

GROUP_CONFIG_FILE = "group-configs.json"
FORMAT_VERSION = 1
Change = Callable[[dict[str, str]], dict[str, str]]


class GroupConfigError(ValueError):
    """The group config file cannot be read: the broker does not start rather than forget settings."""


class GroupConfigs:
    def __init__(self) -> None:
        self._configs: dict[str, dict[str, str]] = {}
        self._path: Path | None = None
        self._cluster: ClusterGroupConfigs | None = None
        self.listeners: list[Callable[[str], None]] = []

    def get(self, group_id: str) -> dict[str, str]:
        return self._configs.get(group_id, _EMPTY)

    def groups(self) -> list[str]:
        return sorted(self._configs)

    # ---- where they are kept --------------------------------------------------------------------------

    def use_file(self, data_dir: Path) -> None:
        """A single node: reads GROUP_CONFIG_FILE (none: nothing set)."""
        self._path = Path(data_dir) / GROUP_CONFIG_FILE
        if not self._path.exists():
            return
        try:
            document = json.loads(self._path.read_text())
            if document.get("version") != FORMAT_VERSION or not isinstance(document.get("groups"), dict):
                raise ValueError(f"expected version {FORMAT_VERSION} with a groups object")
            self._configs = {str(g): {str(k): str(v) for k, v in c.items()} for g, c in document["groups"].items()}
        except (OSError, ValueError, AttributeError) as exc:
            raise GroupConfigError(f"{self._path}: cannot read the group configs ({exc}); restore or remove it") from exc

    async def use_zookeeper(self, zk: ZooKeeper) -> None:
        """A cluster: ``/config/groups``, read now and kept current by watches."""
        from eoslog.cluster.group_configs_zk import ClusterGroupConfigs

        self._cluster = ClusterGroupConfigs(zk, self._replace)
        await self._cluster.start()

    async def stop(self) -> None:
        if self._cluster is not None:
            await self._cluster.stop()

    # ---- changing them ------------------------------------------------------------------------------

    async def alter(self, group_id: str, change: Change) -> None:
        """``change(current)`` becomes the group's configs, durably (an empty result removes them)."""
        if self._cluster is not None:
            await self._cluster.write(group_id, change)
            return
        wanted = change(dict(self.get(group_id)))
        configs = dict(self._configs)
        if wanted:
            configs[group_id] = dict(wanted)
        else:
            configs.pop(group_id, None)
        if self._path is not None:
            data = json.dumps({"version": FORMAT_VERSION, "groups": configs}, sort_keys=True, indent=1).encode()
            await asyncio.to_thread(write_atomically, self._path, data)
        self._configs = configs
        self._changed([group_id])

    def _replace(self, configs: dict[str, dict[str, str]]) -> None:
        changed = {g for g in set(configs) | set(self._configs) if configs.get(g) != self._configs.get(g)}
        self._configs = configs
        self._changed(sorted(changed))

    def _changed(self, group_ids) -> None:
        for group_id in group_ids:
            for listener in self.listeners:
                try:
                    listener(group_id)
                except Exception:
                    log.exception("a listener failed on the configs of group %r", group_id)


_EMPTY: dict[str, str] = {}
