"""What a request handler is given: the request's header, the connection it came on (who sent it, on
which listener) and the broker's services, a frozen set built once at start-up (server/broker.py).

Handlers depend on this module and on the layers below (cluster/, coordinator/, security/, log/), never
on server/: what only the server knows (the broker config resource, the connection) is typed here as a
protocol that server/ implements.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from eoslog.security import CLUSTER_NAME

if TYPE_CHECKING:
    from eoslog.cluster.group_configs import GroupConfigs
    from eoslog.cluster.metadata_cache import MetadataCache
    from eoslog.cluster.partition_offsets import PartitionOffsets
    from eoslog.cluster.registry import PartitionRegistry
    from eoslog.cluster.replica_manager import ReplicaManager
    from eoslog.cluster.transaction_verification import TransactionVerification
    from eoslog.coordinator.coordinators import Coordinators
    from eoslog.security.acl import AclOperation, ResourceType
    from eoslog.security.authorizer import Authorizer
    from eoslog.share.manager import SharePartitionManager

log = logging.getLogger("eoslog.server.dispatcher")  # refusals were always logged under the dispatcher


class Connection(Protocol):
    """The client connection a request came on (server/network.py)."""

    peer: str  # "host:port"
    principal: str  # "User:..." once authenticated (SASL or TLS), User:ANONYMOUS otherwise
    listener: Any  # the listener it came in on (server/listeners.py): .name, .protocol
    sasl: Any  # the SASL exchange on a SASL listener (security/sasl.py), else None

    def hold(self) -> Callable[[], None]:
        """Reads no further request from this connection until the returned release is called (a
        Produce waiting for a remote verification must not be overtaken by the next one)."""


class BrokerConfigResource(Protocol):
    """This broker's configs as DescribeConfigs and (Incremental)AlterConfigs see them (server/broker_configs.py)."""

    def is_own(self, resource_name: str) -> bool:
        """True for this broker's id, False for the cluster-wide default resource (""); raises otherwise."""

    def describe(self, resource_name: str, keys: Iterable[str] | None, include_synonyms: bool) -> list[Any]:
        """The entries (name, value, read_only, source, sensitive, synonyms, config_type) of the resource."""

    def check_alterable(self, names: Iterable[str], cluster_default: bool = False) -> None:
        """Raises unless every name may be changed dynamically."""

    def alter(self, cluster_default: bool, change: Callable[[dict[str, str]], dict[str, str]],
              validate_only: bool) -> Awaitable[None]:
        """Applies ``change`` to the dynamic configs (this broker's or the cluster-wide defaults)."""


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The broker's services, as every handler may use them."""

    node_id: int
    cluster_id: str
    registry: PartitionRegistry  # topics and local partitions; ``registry.admin`` changes topics
    replicas: ReplicaManager  # which partition a client may produce to or fetch from, ISR, leader epochs
    metadata: MetadataCache  # brokers, controller, leaders and coordinators as clients are told
    coordinators: Coordinators  # group and transaction coordinators, and the transaction extensions
    transaction_verification: TransactionVerification  # KIP-890's questions to a remote coordinator
    authorizer: Authorizer  # allows everything when authorizer.class.name is not set
    credentials: Any  # SCRAM credentials: security/credentials.py or cluster/user_credentials.py
    broker_configs: BrokerConfigResource
    primary_listener: str  # the listener named by --listen: a connection's without one
    # the share partitions led here (KIP-932, share/manager.py), built on the first share request
    share_partitions: Callable[[], SharePartitionManager] | None = None
    group_configs: GroupConfigs | None = None  # the GROUP config resource (cluster/group_configs.py)
    # high watermarks of partitions led anywhere (cluster/partition_offsets.py): share-group lag
    partition_offsets: PartitionOffsets | None = None


@dataclass(slots=True)
class RequestContext:
    services: BrokerServices
    connection: Connection
    header: Any

    @property
    def registry(self) -> PartitionRegistry:
        """Topics and partitions: what most handlers need (cluster/registry.py)."""
        return self.services.registry

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def listener_name(self) -> str:
        """The listener the client came in on: a cluster answers with every broker's endpoint of that name."""
        listener = getattr(self.connection, "listener", None)
        return listener.name if listener is not None else self.services.primary_listener

    # ---- authorization (security/, docs/security.md) --------------------------------------------------
    @property
    def host(self) -> str:
        """The client's address as ACLs name hosts (no port)."""
        return self.connection.peer.rsplit(":", 1)[0]

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        allowed = self.services.authorizer.authorize(self.connection.principal, self.host, operation, resource_type,
                                                     name)
        if not allowed:
            log.debug("%s from %s may not %s %s %r", self.connection.principal, self.host, operation.name,
                      resource_type.name, name)
        return allowed

    def require(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> None:
        """Raises the resource type's *_AUTHORIZATION_FAILED error unless allowed."""
        if not self.authorize(operation, resource_type, name):
            from eoslog.api.errors import AUTHORIZATION_ERRORS  # made at the first refusal

            raise AUTHORIZATION_ERRORS[resource_type](f"{self.connection.principal} may not {operation.name} "
                                                      f"{resource_type.name} {name}")

    def authorized_names(self, operation: AclOperation, resource_type: ResourceType, names) -> set[str]:
        """The names among ``names`` the principal may perform ``operation`` on."""
        authorizer = self.services.authorizer
        if not authorizer.keeps_acls:
            return set(names)  # allowed by construction: no decision per name
        return {name for name in set(names) if self.authorize(operation, resource_type, name)}

    def authorized_operations(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        """KIP-430's bit field of the operations allowed."""
        return self.services.authorizer.authorized_operations(self.connection.principal, self.host, resource_type,
                                                              name)

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Allowed on at least one resource of the type (idempotent produce's WRITE on any topic)."""
        return self.services.authorizer.authorize_any(self.connection.principal, self.host, operation, resource_type)
