"""How ACLs are written down, without I/O: Kafka's ZooKeeper JSON and the single node's file.

Kafka's znode of one resource pattern (``/kafka-acl/Topic/orders``, or
``/kafka-acl-extended/prefixed/Topic/ord`` for PREFIXED) holds::

    {"version":1,"acls":[{"principal":"User:CN=alice","permissionType":"Allow","operation":"Read","host":"*"}]}

The single node's ``acls.json`` in the data directory keeps the same entries, grouped by pattern::

    {"version":1,"resources":[{"resourceType":"Topic","name":"orders","patternType":"LITERAL",
                               "acls":[...as above...]}]}

It is replaced atomically (temporary file, fsync, rename): after a crash it is the old or the new set,
never a torn one. A file or znode that does not decode is an error, never an empty set (that would
lock everyone out, or with allow.everyone.if.no.acl.found, let everyone in).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable

from eoslog.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

VERSION = 1
# Kafka's spellings in znode paths and JSON (ResourceType.toJava / AclOperation names in camel case).
RESOURCE_TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
OPERATION_NAMES = {
    AclOperation.ALL: "All",
    AclOperation.READ: "Read",
    AclOperation.WRITE: "Write",
    AclOperation.CREATE: "Create",
    AclOperation.DELETE: "Delete",
    AclOperation.ALTER: "Alter",
    AclOperation.DESCRIBE: "Describe",
    AclOperation.CLUSTER_ACTION: "ClusterAction",
    AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs",
    AclOperation.ALTER_CONFIGS: "AlterConfigs",
    AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite",
    AclOperation.CREATE_TOKENS: "CreateTokens",
    AclOperation.DESCRIBE_TOKENS: "DescribeTokens",
}
PERMISSION_NAMES = {AclPermissionType.ALLOW: "Allow", AclPermissionType.DENY: "Deny"}
_BY_NAME = {
    "resource": {v: k for k, v in RESOURCE_TYPE_NAMES.items()},
    "operation": {v: k for k, v in OPERATION_NAMES.items()},
    "permission": {v: k for k, v in PERMISSION_NAMES.items()},
}

# ZooKeeper paths (Kafka's): LITERAL patterns under /kafka-acl, PREFIXED under the extended tree; a change
# is announced by a sequential node under the matching changes path, which every broker watches.
LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"


class AclFormatError(ValueError):
    """Stored ACLs do not decode; the message says where."""


def _named(kind: str, value: str, where: str):
    try:
        return _BY_NAME[kind][value]
    except KeyError:
        raise AclFormatError(f"{where}: unknown {kind} {value!r}") from None


def encode_entries(entries: Iterable[AccessControlEntry]) -> list[dict]:
    return [{"principal": e.principal, "permissionType": PERMISSION_NAMES[e.permission_type],
             "operation": OPERATION_NAMES[e.operation], "host": e.host}
            for e in sorted(entries, key=lambda e: (e.principal, e.host, int(e.operation), int(e.permission_type)))]


def decode_entries(items: object, where: str) -> list[AccessControlEntry]:
    if not isinstance(items, list):
        raise AclFormatError(f"{where}: 'acls' is not a list")
    entries = []
    for item in items:
        try:
            entries.append(AccessControlEntry(
                str(item["principal"]), str(item["host"]), _named("operation", item["operation"], where),
                _named("permission", item["permissionType"], where)))
        except (KeyError, TypeError):
            raise AclFormatError(f"{where}: an entry misses principal, host, operation or permissionType") from None
    return entries


def group_by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = defaultdict(list)
    for binding in bindings:
        grouped[binding.pattern].append(binding.entry)
    return grouped


# ---- the single node's file ---------------------------------------------------------------------

def encode_file(bindings: Iterable[AclBinding]) -> bytes:
    resources = [
        {"resourceType": RESOURCE_TYPE_NAMES[p.resource_type], "name": p.name, "patternType": p.pattern_type.name,
         "acls": encode_entries(entries)}
        for p, entries in sorted(group_by_pattern(bindings).items(),
                                 key=lambda item: (int(item[0].resource_type), item[0].name, int(item[0].pattern_type)))
    ]
    return json.dumps({"version": VERSION, "resources": resources}, indent=1).encode()


def decode_file(data: bytes, where: str = "acls.json") -> list[AclBinding]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AclFormatError(f"{where}: not JSON: {exc}") from None
    if not isinstance(value, dict) or value.get("version") != VERSION or not isinstance(value.get("resources"), list):
        raise AclFormatError(f"{where}: expected {{'version': {VERSION}, 'resources': [...]}}")
    bindings = []
    for resource in value["resources"]:
        try:
            rtype = _named("resource", resource["resourceType"], where)
            ptype = PatternType[resource["patternType"]]
            pattern = ResourcePattern(rtype, str(resource["name"]), ptype)
        except (KeyError, TypeError):
            raise AclFormatError(f"{where}: a resource misses resourceType, name or patternType") from None
        bindings.extend(AclBinding(pattern, entry) for entry in decode_entries(resource.get("acls"), where))
    return bindings


# ---- ZooKeeper ----------------------------------------------------------------------------------

def znode_path(pattern: ResourcePattern) -> str:
    root = LITERAL_ROOT if pattern.pattern_type is PatternType.LITERAL else PREFIXED_ROOT
    return f"{root}/{RESOURCE_TYPE_NAMES[pattern.resource_type]}/{pattern.name}"


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type is PatternType.LITERAL else EXTENDED_CHANGES


def pattern_of(root: str, type_name: str, name: str) -> ResourcePattern:
    ptype = PatternType.LITERAL if root == LITERAL_ROOT else PatternType.PREFIXED
    return ResourcePattern(_named("resource", type_name, f"{root}/{type_name}"), name, ptype)


def encode_znode(entries: Iterable[AccessControlEntry]) -> bytes:
    return json.dumps({"version": VERSION, "acls": encode_entries(entries)}, separators=(",", ":")).encode()


def decode_znode(data: bytes | None, where: str) -> list[AccessControlEntry]:
    if not data:
        return []
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AclFormatError(f"{where}: not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise AclFormatError(f"{where}: expected a JSON object")
    return decode_entries(value.get("acls", []), where)


def encode_change(pattern: ResourcePattern) -> bytes:
    """Kafka's change notification names the pattern that changed (literal: ``Type:name``; extended: JSON)."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{RESOURCE_TYPE_NAMES[pattern.resource_type]}:{pattern.name}".encode()
    return json.dumps({"version": VERSION, "resourceType": RESOURCE_TYPE_NAMES[pattern.resource_type],
                       "name": pattern.name, "patternType": pattern.pattern_type.name.capitalize()}).encode()


