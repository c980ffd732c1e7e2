"""ACLs with Kafka's semantics, as a pure core: values in, decisions out, no I/O.

Vocabulary (Kafka's): an :class:`AclBinding` joins a :class:`ResourcePattern` (resource type, name,
LITERAL or PREFIXED) to an :class:`AccessControlEntry` (principal, host, operation, ALLOW or DENY).
:class:`AclBindingFilter` selects bindings for DescribeAcls and DeleteAcls (ANY and MATCH patterns).
:class:`AclAuthorizer` decides, as Kafka's AclAuthorizer does:

1. a super user is allowed everything;
2. the ACLs that apply to a resource are its LITERAL name, the LITERAL wildcard ``*`` and every
   PREFIXED pattern the name starts with; if there are none, ``allow.everyone.if.no.acl.found`` decides;
3. a matching DENY wins over any ALLOW; ``ALL`` covers every operation, principal ``User:*`` every
   user, host ``*`` every host;
4. an ALLOW for READ, WRITE, DELETE or ALTER also allows DESCRIBE, and ALTER_CONFIGS allows
   DESCRIBE_CONFIGS (a DENY is never widened that way).

The numeric codes are Kafka's wire values (org.apache.kafka.common.acl / resource); never renumber.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from eoslog.security import CLUSTER_NAME  # the one CLUSTER resource's name (defined there, re-exported here)


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"

# An ALLOW for the key also allows these (Kafka's implied operations).
IMPLIED_BY_ALLOW: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}
# Resource types and operations a concrete binding may name (filters may also say ANY / MATCH).
CONCRETE_RESOURCE_TYPES = frozenset({ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                     ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN,
                                     ResourceType.USER})
CONCRETE_PATTERN_TYPES = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
CONCRETE_PERMISSIONS = frozenset({AclPermissionType.ALLOW, AclPermissionType.DENY})


# What each resource type can be asked about (KIP-430's authorized-operations bit fields list these).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}


class InvalidAclError(ValueError):
    """A binding or filter the request carried cannot be stored or applied (the client's fault)."""


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def covers(self, name: str) -> bool:
        """Whether this stored pattern applies to a resource called ``name``."""
        if self.pattern_type is PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD_RESOURCE
        return name.startswith(self.name)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def applies_to(self, principal: str, host: str) -> bool:
        return (self.principal == principal or self.principal == WILDCARD_PRINCIPAL) and \
            (self.host == host or self.host == WILDCARD_HOST)


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def of(cls, resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
           permission_type: int) -> AclBinding:
        """A binding from wire values, validated as CreateAcls needs (InvalidAclError otherwise)."""
        rtype, ptype = _enum(ResourceType, resource_type), _enum(PatternType, pattern_type)
        op, perm = _enum(AclOperation, operation), _enum(AclPermissionType, permission_type)
        if rtype not in CONCRETE_RESOURCE_TYPES:
            raise InvalidAclError(f"resource type {rtype.name} cannot be stored in an ACL")
        if ptype not in CONCRETE_PATTERN_TYPES:
            raise InvalidAclError(f"pattern type {ptype.name} cannot be stored in an ACL (LITERAL or PREFIXED)")
        if op in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise InvalidAclError(f"operation {op.name} cannot be stored in an ACL")
        if perm not in CONCRETE_PERMISSIONS:
            raise InvalidAclError(f"permission {perm.name} cannot be stored in an ACL (ALLOW or DENY)")
        if not name:
            raise InvalidAclError("the resource name is empty")
        if ptype is PatternType.PREFIXED and name == WILDCARD_RESOURCE:
            raise InvalidAclError("a PREFIXED pattern cannot be the wildcard '*' (use LITERAL '*')")
        if rtype is ResourceType.CLUSTER and name != CLUSTER_NAME:
            raise InvalidAclError(f"the CLUSTER resource is called {CLUSTER_NAME!r}, not {name!r}")
        check_principal(principal)
        if not host:
            raise InvalidAclError("the host is empty (use '*' for every host)")
        return cls(ResourcePattern(rtype, name, ptype), AccessControlEntry(principal, host, op, perm))


def check_principal(principal: str) -> None:
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAclError(f"principal {principal!r} is not of the form Type:name (e.g. User:alice)")


def _enum(kind, value: int):
    try:
        return kind(value)
    except ValueError:
        raise InvalidAclError(f"unknown {kind.__name__} {value}") from None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings: ``None`` and ANY match everything; pattern type MATCH selects the patterns that
    would apply to the named resource (its literal name, the wildcard, prefixes of it)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def of(cls, resource_type: int, name: str | None, pattern_type: int, principal: str | None,
           host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
        made = cls(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type), principal, host,
                   _enum(AclOperation, operation), _enum(AclPermissionType, permission_type))
        for value in (made.resource_type, made.pattern_type, made.operation, made.permission_type):
            if value.name == "UNKNOWN":
                raise InvalidAclError(f"the filter names an unknown {type(value).__name__}")
        return made

    def matches(self, binding: AclBinding) -> bool:
        pattern, entry = binding.pattern, binding.entry
        if self.resource_type is not ResourceType.ANY and pattern.resource_type is not self.resource_type:
            return False
        if not self._matches_pattern(pattern):
            return False
        return (self.principal is None or entry.principal == self.principal) and \
            (self.host is None or entry.host == self.host) and \
            (self.operation is AclOperation.ANY or entry.operation is self.operation) and \
            (self.permission_type is AclPermissionType.ANY or entry.permission_type is self.permission_type)

    def _matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.pattern_type is PatternType.MATCH:
            if self.name is None:
                return True
            if self.name == WILDCARD_RESOURCE:  # only the wildcard itself applies to "*"
                return pattern.pattern_type is PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE
            return pattern.covers(self.name)
        if self.pattern_type is not PatternType.ANY and pattern.pattern_type is not self.pattern_type:
            return False
        return self.name is None or pattern.name == self.name


class AclAuthorizer:
    """The decision function over a set of bindings. Holds them indexed so a decision looks at the
    resource's own literal name, the wildcard and the prefixed patterns of its type, never every ACL.

    Not thread-safe; the broker's event loop owns it. ``replace`` swaps the whole set (a reload)."""

    def __init__(self, bindings: Iterable[AclBinding] = (), super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[tuple[ResourceType, str], list[AccessControlEntry]] = {}
        self._prefixed: dict[ResourceType, list[tuple[str, AccessControlEntry]]] = {}
        self.bindings: frozenset[AclBinding] = frozenset()
        self.replace(bindings)

    def replace(self, bindings: Iterable[AclBinding]) -> None:
        self.bindings = frozenset(bindings)
        self._literal, self._prefixed = {}, {}
        for binding in sorted(self.bindings, key=_binding_order):
            pattern = binding.pattern
            if pattern.pattern_type is PatternType.LITERAL:
                self._literal.setdefault((pattern.resource_type, pattern.name), []).append(binding.entry)
            else:
                self._prefixed.setdefault(pattern.resource_type, []).append((pattern.name, binding.entry))

    def _entries(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        entries = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD_RESOURCE:
            entries.extend(self._literal.get((resource_type, WILDCARD_RESOURCE), ()))
        entries.extend(entry for prefix, entry in self._prefixed.get(resource_type, ()) if name.startswith(prefix))
        return entries

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        entries = self._entries(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        applying = [e for e in entries if e.applies_to(principal, host)]
        if any(e.permission_type is AclPermissionType.DENY and e.operation in (operation, AclOperation.ALL)
               for e in applying):
            return False
        allowing = {operation, AclOperation.ALL} | IMPLIED_BY_ALLOW.get(operation, frozenset())
        return any(e.permission_type is AclPermissionType.ALLOW and e.operation in allowing for e in applying)

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether the principal may perform ``operation`` on at least one resource of the type (Kafka's
        authorizeByResourceType: idempotent produce with WRITE on some topic). An ALLOW counts unless a
        DENY for the same principal covers everything it names."""
        if principal in self.super_users:
            return True
        of_type = [b for b in self.bindings if b.pattern.resource_type is resource_type
                   and b.entry.applies_to(principal, host)]
        if not any(b.pattern.resource_type is resource_type for b in self.bindings):
            return self.allow_everyone_if_no_acl_found
        denies = [b.pattern for b in of_type if b.entry.permission_type is AclPermissionType.DENY
                  and b.entry.operation in (operation, AclOperation.ALL)]
        allowing = {operation, AclOperation.ALL} | IMPLIED_BY_ALLOW.get(operation, frozenset())
        for binding in of_type:
            entry = binding.entry
            if entry.permission_type is AclPermissionType.ALLOW and entry.operation in allowing and \
                    not any(_pattern_covers_pattern(deny, binding.pattern) for deny in denies):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: bit ``op`` set for each supported operation the principal may perform."""
        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type]
                   if self.authorize(principal, host, op, resource_type, name))

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return sorted((b for b in self.bindings if acl_filter.matches(b)), key=_binding_order)


def _pattern_covers_pattern(deny: ResourcePattern, allow: ResourcePattern) -> bool:
    """Whether every resource ``allow`` names is also named by ``deny``."""
    if deny.pattern_type is PatternType.LITERAL:
        if deny.name == WILDCARD_RESOURCE:
            return True
        return allow.pattern_type is PatternType.LITERAL and allow.name == deny.name
    return allow.name != WILDCARD_RESOURCE and allow.name.startswith(deny.name)


def _binding_order(binding: AclBinding) -> tuple:
    p, e = binding.pattern, binding.entry
    return (int(p.resource_type), p.name, int(p.pattern_type), e.principal, e.host, int(e.operation),
            int(e.permission_type))


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:CN=broker``)."""
    users = [item.strip() for item in value.split(";") if item.strip()]
    for user in users:
        check_principal(user)
    return frozenset(users)
