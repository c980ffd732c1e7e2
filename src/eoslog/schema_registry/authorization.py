"""Authorization of subjects through the cluster's ACLs (docs/schema-registry.md, "Authorization").

Kafka's ACLs have no resource type for a subject, so a subject maps onto the topic it describes, by the
TopicNameStrategy every serializer uses by default: ``orders-value`` and ``orders-key`` are topic
``orders``; a subject without those suffixes (RecordNameStrategy's ``shop.Payment``) is the topic of its
own name. Who may use a topic may use its schemas:

==================================================== ==========================================
request                                              needs
==================================================== ==========================================
read a subject: versions, lookup, compatibility,      DESCRIBE on the topic (implied by READ and
its config and mode; list subjects, schemas and ids   WRITE: consumers and producers have it);
                                                      lists show only such subjects
register a schema                                     WRITE on the topic (what a producer has)
delete a subject or version                           DELETE on the topic
set or delete a subject's config or mode              ALTER_CONFIGS on the topic
set or delete the global config or mode               ALTER_CONFIGS on the cluster
==================================================== ==========================================

The decision is the broker's own ACL core (security/acl.py) over the bindings the registry reads with
DescribeAcls through its client properties (its principal needs DESCRIBE on the cluster), every
``refresh_s`` and at once when a request would be refused by bindings older than a second, so a grant
applies within a second. ``super.users`` and ``allow.everyone.if.no.acl.found`` are the broker's when
the broker serves the registry, options of ``eoslog schema-registry`` otherwise.
"""

from __future__ import annotations

import logging
import threading
import time

from eoslog.schema_registry import errors
from eoslog.schema_registry.errors import RegistryError
from eoslog.schema_registry.kafka_access import KafkaAccess
from eoslog.security.acl import CLUSTER_NAME, AclAuthorizer, AclBinding, AclOperation, ResourceType

log = logging.getLogger(__name__)

DESCRIBE_ACLS, DESCRIBE_ACLS_VERSION = 29, 2
REFRESH_S = 5.0
STALE_S = 1.0
SUFFIXES = ("-value", "-key")

READ, REGISTER, DELETE, CONFIGURE = (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.DELETE,
                                     AclOperation.ALTER_CONFIGS)


def topic_of(subject: str) -> str:
    for suffix in SUFFIXES:
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


def fetch_bindings(access: KafkaAccess) -> list[AclBinding]:
    """Every ACL of the cluster, through DescribeAcls."""
    from eoslog.client.connection import BrokerConnection
    from eoslog.protocol import messages
    from eoslog.protocol.errors import ErrorCode

    connection = BrokerConnection.from_bootstrap(access.bootstrap, security=access.security(),
                                                 client_id="eoslog-schema-registry-acls")
    try:
        response = connection.request(DESCRIBE_ACLS, DESCRIBE_ACLS_VERSION, messages.DescribeAclsRequest(
            resource_type_filter=int(ResourceType.ANY), resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=int(AclOperation.ANY), permission_type=1))
    finally:
        connection.close()
    if response.error_code:
        raise OSError(f"DescribeAcls: {ErrorCode(response.error_code).name}: {response.error_message or ''}")
    return [AclBinding.of(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                          a.permission_type) for r in response.resources for a in r.acls]


class SubjectAuthorizer:
    def __init__(self, access: KafkaAccess, super_users: frozenset[str] = frozenset(),
                 allow_everyone_if_no_acl_found: bool = False, refresh_s: float = REFRESH_S, fetch=None) -> None:
        self.access = access
        self.super_users = frozenset(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found
        self.refresh_s = refresh_s
        self._fetch = fetch or (lambda: fetch_bindings(access))
        self._core: AclAuthorizer | None = None  # swapped whole, never changed in place: readers need no lock
        self._read_at = 0.0
        self._refresh_lock = threading.Lock()

    def refresh(self) -> None:
        with self._refresh_lock:
            started = time.monotonic()
            self._core = AclAuthorizer(self._fetch(), self.super_users, self.allow_everyone)
            self._read_at = started

    def fresh(self) -> None:
        """The bindings read within ``refresh_s``, or read now (kept as they were if the cluster does not
        answer, once some have been read)."""
        if self._core is None or time.monotonic() - self._read_at > self.refresh_s:
            self._refresh_or_keep()

    def _refresh_or_keep(self) -> None:
        try:
            self.refresh()
        except (OSError, ValueError) as exc:
            if self._core is None:
                raise RegistryError(errors.STORE_ERROR, f"cannot read the cluster's ACLs: {exc}") from None
            log.warning("schema registry: cannot refresh the ACLs, deciding on those read %.0f s ago: %s",
                        time.monotonic() - self._read_at, exc)

    def may(self, principal: str, host: str, operation: AclOperation, subject: str | None,
            refresh: bool = True) -> bool:
        """Whether ``principal`` may do ``operation`` to ``subject`` (None: the global config or mode).
        ``refresh=False`` decides on the bindings already read (none read: refused), without I/O."""
        resource = (ResourceType.CLUSTER, CLUSTER_NAME) if subject is None else (ResourceType.TOPIC,
                                                                                  topic_of(subject))
        if refresh:
            self.fresh()
        core = self._core
        if core is None:
            return False
        allowed = core.authorize(principal, host, operation, *resource)
        if not allowed and refresh and time.monotonic() - self._read_at > STALE_S:
            self._refresh_or_keep()  # a grant made a moment ago applies now
            allowed = self._core.authorize(principal, host, operation, *resource)
        return allowed

    def require(self, principal: str, host: str, operation: AclOperation, subject: str | None) -> None:
        if not self.may(principal, host, operation, subject):
            where = "the cluster" if subject is None else f"subject '{subject}' (topic '{topic_of(subject)}')"
            raise RegistryError(errors.FORBIDDEN, f"{principal} is not authorized to {_VERBS[operation]} {where}: "
                                f"it needs {operation.name} on "
                                + ("the CLUSTER" if subject is None else f"TOPIC '{topic_of(subject)}'"))


_VERBS = {READ: "read", REGISTER: "register schemas in", DELETE: "delete", CONFIGURE: "configure"}
