"""What the API handlers share about refusals: hanging up, and the authorization error of each resource
type. Which error code an exception becomes is protocol/error_mapping.py's one table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eoslog.protocol.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)

if TYPE_CHECKING:
    from eoslog.security.acl import ResourceType


class CloseConnection(Exception):
    """Raised by a handler or the dispatcher when the only safe answer to a request is to hang up (the
    network layer closes the connection without a response)."""


def __getattr__(name: str):
    # AUTHORIZATION_ERRORS, the refusal a client understands for each resource type it may be refused on:
    # made at the first refusal, so that the request context (api/context.py) does not load the ACL types
    # (security/acl.py) before the broker's port opens.
    if name == "AUTHORIZATION_ERRORS":
        from eoslog.security.acl import ResourceType

        errors: dict[ResourceType, type[KafkaError]] = {
            ResourceType.TOPIC: TopicAuthorizationFailedError,
            ResourceType.GROUP: GroupAuthorizationFailedError,
            ResourceType.CLUSTER: ClusterAuthorizationFailedError,
            ResourceType.TRANSACTIONAL_ID: TransactionalIdAuthorizationFailedError,
        }
        globals()[name] = errors
        return errors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
