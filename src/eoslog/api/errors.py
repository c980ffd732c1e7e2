"""What the API handlers share about refusals: hanging up, and the authorization error of each resource
type. Which error code an exception becomes is protocol/error_mapping.py's one table."""

from __future__ import annotations

from eoslog.protocol.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from eoslog.security.acl import ResourceType


class CloseConnection(Exception):
    """Raised by a handler or the dispatcher when the only safe answer to a request is to hang up (the
    network layer closes the connection without a response)."""

# The refusal a client understands for each resource type it may be refused on.
AUTHORIZATION_ERRORS: dict[ResourceType, type[KafkaError]] = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
    ResourceType.TRANSACTIONAL_ID: TransactionalIdAuthorizationFailedError,
}
