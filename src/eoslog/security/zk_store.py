"""A cluster's ACLs, in ZooKeeper as Kafka keeps them (paths and JSON in security/acl_format.py).

One znode per resource pattern; a change rewrites that znode conditionally on its version (two brokers
changing the same pattern at once both land: the loser reads again and retries), then announces itself
with a sequential node under ``/kafka-acl-changes`` (or ``/kafka-acl-extended-changes``). Every broker
watches both change paths and, on any new child, reads the whole tree again and hands the result to
``on_reload``. Reading the whole tree is simpler than Kafka's per-resource reload and ACL sets are small.

Blocking kazoo calls: the authorizer runs them in a worker thread; watches fire on kazoo's thread, so
``on_reload`` must hop to the event loop itself. A broker that writes a change also deletes the
notifications older than 15 minutes, as Kafka does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.recipe.watchers import ChildrenWatch

from eoslog.security.acl import AclBinding
from eoslog.security.acl_format import (
    CHANGE_PREFIX,
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    LITERAL_ROOT,
    PREFIXED_ROOT,
    RESOURCE_TYPE_NAMES,
    changes_path,
    decode_znode,
    encode_change,
    encode_znode,
    group_by_pattern,
    pattern_of,
    znode_path,
)

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class ZooKeeperAclStore:
    def __init__(self, client: KazooClient, on_reload: Callable[[list[AclBinding]], None]) -> None:
        self.client = client
        self.on_reload = on_reload
        self._watching = False

    def load(self) -> list[AclBinding]:
        for path in (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES):
            self.client.ensure_path(path)
        bindings = self.read_all()
        if not self._watching:
            self._watching = True
            for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
                ChildrenWatch(self.client, path, self._changed)
        return bindings

    def read_all(self) -> list[AclBinding]:
        bindings = []
        for root in (LITERAL_ROOT, PREFIXED_ROOT):
            for type_name in self._children(root):
                if type_name not in RESOURCE_TYPE_NAMES.values():
                    continue  # a resource type we do not serve (Kafka may have written it)
                for name in self._children(f"{root}/{type_name}"):
                    pattern = pattern_of(root, type_name, name)
                    try:
                        data, _ = self.client.get(znode_path(pattern))
                    except NoNodeError:
                        continue  # deleted while we read
                    bindings.extend(AclBinding(pattern, e) for e in decode_znode(data, znode_path(pattern)))
        return bindings

    def _children(self, path: str) -> list[str]:
        try:
            return self.client.get_children(path)
        except NoNodeError:
            return []

    def _changed(self, _children) -> None:
        try:
            self.on_reload(self.read_all())
        except Exception:
            log.exception("cannot reload the ACLs from ZooKeeper; keeping the previous set")

    def add(self, current, new: list[AclBinding]) -> None:
        for pattern, entries in group_by_pattern(new).items():
            self._update(pattern, lambda old, entries=entries: old | set(entries))

    def remove(self, current, doomed: set[AclBinding]) -> None:
        for pattern, entries in group_by_pattern(doomed).items():
            self._update(pattern, lambda old, entries=entries: old - set(entries))

    def _update(self, pattern, change) -> None:
        path = znode_path(pattern)
        while True:
            try:
                data, stat = self.client.get(path)
                old, version = set(decode_znode(data, path)), stat.version
            except NoNodeError:
                old, version = set(), None
            entries = change(old)
            try:
                if version is None:
                    if not entries:
                        break
                    self.client.create(path, encode_znode(entries), makepath=True)
                elif entries:
                    self.client.set(path, encode_znode(entries), version=version)
                else:
                    self.client.delete(path, version=version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue  # another broker changed it meanwhile: read again
        changes = changes_path(pattern.pattern_type)
        self.client.create(f"{changes}/{CHANGE_PREFIX}", encode_change(pattern), sequence=True)
        self._prune(changes)

    def _prune(self, changes: str) -> None:
        """Deletes notifications older than CHANGE_EXPIRATION_MS (Kafka's 15 minutes): every broker has
        reloaded by then, and one that was away reads the whole tree when it comes back."""
        now_ms = time.time() * 1000
        for child in self._children(changes):
            path = f"{changes}/{child}"
            try:
                if now_ms - self.client.exists(path).ctime > CHANGE_EXPIRATION_MS:
                    self.client.delete(path)
            except (NoNodeError, AttributeError):
                continue  # pruned by another broker meanwhile

    def close(self) -> None:
        pass  # the watches end with the cluster's ZooKeeper session
