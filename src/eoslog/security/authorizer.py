"""The broker's authorizer: the decision core (security/acl.py) plus where the ACLs are kept.

Contract
- :class:`Authorizer` when ``authorizer.class.name`` is set; without it :class:`AllowAll`, which allows
  every request and keeps no ACLs (the ACL APIs answer SECURITY_DISABLED, as Kafka does).
- Decisions are synchronous and read memory only. Changes (CreateAcls, DeleteAcls) go through the store
  first and are applied in memory only once durable: the file on a single node, the ``/kafka-acl`` znodes
  on a cluster (where every broker, this one included, reloads on the change notification).
- Changes are serialised by one lock, so two CreateAcls never lose each other's bindings.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from eoslog.protocol.errors import SecurityDisabledError

if TYPE_CHECKING:  # the ACL types load with the first authorizer that keeps ACLs, or the first request
    from eoslog.security.acl import AclBinding, AclBindingFilter, AclOperation, ResourceType

log = logging.getLogger(__name__)

# The names ``authorizer.class.name`` accepts: Kafka's two ZooKeeper-era authorizers, Kafka 4.x's
# StandardAuthorizer (what a Kafka 4.x server.properties names) and ours. All mean the same ACL semantics.
AUTHORIZER_CLASS_NAMES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "eoslog.security.AclAuthorizer",
})


class Authorizer:
    keeps_acls = True

    def __init__(self, super_users: frozenset[str], allow_everyone_if_no_acl_found: bool) -> None:
        from eoslog.security.acl import AclAuthorizer

        self.core = AclAuthorizer((), super_users, allow_everyone_if_no_acl_found)
        self.store = None  # FileAclStore or ZooKeeperAclStore, chosen in start()
        self._lock = asyncio.Lock()

    @classmethod
    def from_config(cls, config) -> Authorizer | AllowAll:
        if not config.authorizer_class_name:
            return AllowAll()
        return cls(config.super_users, config.allow_everyone_if_no_acl_found)

    async def start(self, data_dir: Path, cluster) -> None:
        if cluster is None:
            from eoslog.security.file_store import FileAclStore

            self.store = FileAclStore(Path(data_dir))
        else:
            from eoslog.security.zk_store import ZooKeeperAclStore

            loop = asyncio.get_running_loop()
            # Reloads come from kazoo's thread; the set is swapped on the event loop that reads it.
            self.store = ZooKeeperAclStore(cluster.zk.client,
                                           lambda bindings: loop.call_soon_threadsafe(self.core.replace, bindings))
        # A store that does not decode raises (AclFormatError): starting with no ACLs instead would lock
        # everyone out, or with allow.everyone.if.no.acl.found let everyone in.
        self.core.replace(await asyncio.to_thread(self.store.load))
        log.info("authorizer ready: %d ACLs, %d super users, allow.everyone.if.no.acl.found=%s",
                 len(self.core.bindings), len(self.core.super_users), self.core.allow_everyone_if_no_acl_found)

    async def stop(self) -> None:
        if self.store is not None:
            await asyncio.to_thread(self.store.close)

    # ---- decisions ---------------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        return self.core.authorize(principal, host, operation, resource_type, name)

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        return self.core.authorize_any(principal, host, operation, resource_type)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field of the operations allowed on the resource."""
        return self.core.authorized_operations(principal, host, resource_type, name)

    # ---- changes -----------------------------------------------------------------------------------
    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self.core.matching(acl_filter)

    async def create(self, bindings: list[AclBinding]) -> None:
        """Stores the bindings (those already there are kept once); raises OSError / ZooKeeper errors."""
        async with self._lock:
            new = [b for b in dict.fromkeys(bindings) if b not in self.core.bindings]
            if new:
                await asyncio.to_thread(self.store.add, self.core.bindings, new)
                self.core.replace(self.core.bindings | set(new))

    async def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Removes what each filter matches; returns the bindings removed, per filter."""
        async with self._lock:
            matched = [self.core.matching(f) for f in filters]
            doomed = {b for bindings in matched for b in bindings}
            if doomed:
                await asyncio.to_thread(self.store.remove, self.core.bindings, doomed)
                self.core.replace(self.core.bindings - doomed)
            return matched


class AllowAll:
    """The authorizer of a broker without ``authorizer.class.name``: every request is allowed, and there
    is nowhere to keep ACLs."""

    keeps_acls = False

    async def start(self, data_dir: Path, cluster) -> None:
        pass

    async def stop(self) -> None:
        pass

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        return True

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        return True

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        from eoslog.security.acl import SUPPORTED_OPERATIONS

        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        raise SecurityDisabledError("no authorizer is configured (authorizer.class.name)")

    async def create(self, bindings: list[AclBinding]) -> None:
        raise SecurityDisabledError("no authorizer is configured (authorizer.class.name)")

    async def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        raise SecurityDisabledError("no authorizer is configured (authorizer.class.name)")
