"""The pure ACL core (security/acl.py) and its formats (security/acl_format.py): no broker, no I/O."""

from __future__ import annotations

import itertools

import pytest

from eoslog.security.acl import (
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_super_users,
)
from eoslog.security.acl_format import (
    AclFormatError,
    decode_file,
    decode_znode,
    encode_change,
    encode_file,
    encode_znode,
    znode_path,
)

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALICE, BOB = "User:CN=alice", "User:CN=bob"


def acl(principal, op, rtype=RT.TOPIC, name="orders", ptype=PT.LITERAL, perm=Perm.ALLOW, host="*"):
    return AclBinding(ResourcePattern(rtype, name, ptype), AccessControlEntry(principal, host, op, perm))


def decide(bindings, principal=ALICE, op=Op.READ, rtype=RT.TOPIC, name="orders", host="10.0.0.1", **kwargs):
    return AclAuthorizer(bindings, **kwargs).authorize(principal, host, op, rtype, name)


def test_kafka_wire_codes_are_kept():
    assert (RT.TOPIC, RT.GROUP, RT.CLUSTER, RT.TRANSACTIONAL_ID) == (2, 3, 4, 5)
    assert [int(o) for o in (Op.ANY, Op.ALL, Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE,
                             Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                             Op.IDEMPOTENT_WRITE)] == list(range(1, 13))
    assert (PT.ANY, PT.MATCH, PT.LITERAL, PT.PREFIXED) == (1, 2, 3, 4)
    assert (Perm.ANY, Perm.DENY, Perm.ALLOW) == (1, 2, 3)


def test_no_acl_denies_unless_allow_everyone():
    assert not decide([])
    assert decide([], allow_everyone_if_no_acl_found=True)
    # an ACL on the resource, even for someone else, takes the resource out of "no ACL found"
    assert not decide([acl(BOB, Op.READ)], allow_everyone_if_no_acl_found=True)
    assert decide([acl(BOB, Op.READ, name="other")], allow_everyone_if_no_acl_found=True)


def test_allow_matches_principal_operation_and_name_exactly():
    assert decide([acl(ALICE, Op.READ)])
    assert not decide([acl(BOB, Op.READ)])
    assert not decide([acl(ALICE, Op.WRITE)])
    assert not decide([acl(ALICE, Op.READ, name="orders2")])
    assert not decide([acl(ALICE, Op.READ, rtype=RT.GROUP)])


def test_wildcards_for_name_principal_and_host():
    assert decide([acl(ALICE, Op.READ, name="*")])
    assert decide([acl("User:*", Op.READ)])
    assert decide([acl(ALICE, Op.READ, host="10.0.0.1")])
    assert not decide([acl(ALICE, Op.READ, host="10.0.0.2")])


def test_prefixed_patterns_match_names_starting_with_them():
    prefixed = [acl(ALICE, Op.READ, name="ord", ptype=PT.PREFIXED)]
    assert decide(prefixed, name="orders")
    assert decide(prefixed, name="ord")
    assert not decide(prefixed, name="xorders")
    # "*" as a prefix is just a character, not the wildcard
    assert not decide([acl(ALICE, Op.READ, name="o*", ptype=PT.PREFIXED)], name="orders")


def test_deny_wins_over_allow_from_any_pattern():
    allow = acl(ALICE, Op.READ)
    for deny in (acl(ALICE, Op.READ, perm=Perm.DENY), acl("User:*", Op.READ, perm=Perm.DENY),
                 acl(ALICE, Op.ALL, perm=Perm.DENY), acl(ALICE, Op.READ, name="*", perm=Perm.DENY),
                 acl(ALICE, Op.READ, name="or", ptype=PT.PREFIXED, perm=Perm.DENY)):
        assert not decide([allow, deny]), deny
    # a DENY for another operation or host leaves the ALLOW alone
    assert decide([allow, acl(ALICE, Op.WRITE, perm=Perm.DENY)])
    assert decide([allow, acl(ALICE, Op.READ, perm=Perm.DENY, host="10.9.9.9")])


def test_all_covers_every_operation():
    for op in Op:
        if op not in (Op.ANY, Op.UNKNOWN, Op.ALL):
            assert decide([acl(ALICE, Op.ALL)], op=op)


def test_implied_describe_operations():
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert decide([acl(ALICE, op)], op=Op.DESCRIBE)
    assert not decide([acl(ALICE, Op.CREATE)], op=Op.DESCRIBE)
    assert decide([acl(ALICE, Op.ALTER_CONFIGS)], op=Op.DESCRIBE_CONFIGS)
    assert not decide([acl(ALICE, Op.DESCRIBE)], op=Op.READ)
    # a DENY is not widened: denying READ does not deny DESCRIBE
    assert decide([acl(ALICE, Op.DESCRIBE), acl(ALICE, Op.READ, perm=Perm.DENY)], op=Op.DESCRIBE)


def test_super_users_bypass_even_deny():
    bindings = [acl(ALICE, Op.ALL, perm=Perm.DENY)]
    assert decide(bindings, super_users={ALICE})
    assert parse_super_users(" User:admin ; User:CN=broker;") == {"User:admin", "User:CN=broker"}
    with pytest.raises(InvalidAclError):
        parse_super_users("admin")


def test_authorized_operations_bit_field():
    core = AclAuthorizer([acl(ALICE, Op.WRITE), acl(ALICE, Op.ALTER_CONFIGS)], super_users={"User:admin"})
    expected = (1 << Op.WRITE) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    assert core.authorized_operations(ALICE, "h", RT.TOPIC, "orders") == expected
    assert core.authorized_operations(BOB, "h", RT.TOPIC, "orders") == 0
    assert core.authorized_operations("User:admin", "h", RT.GROUP, "g") == \
        (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.DELETE)


def test_authorize_any_for_idempotent_produce():
    core = AclAuthorizer([acl(ALICE, Op.WRITE, name="orders")])
    assert core.authorize_any(ALICE, "h", Op.WRITE, RT.TOPIC)
    assert not core.authorize_any(BOB, "h", Op.WRITE, RT.TOPIC)
    denied = AclAuthorizer([acl(ALICE, Op.WRITE, name="orders"), acl(ALICE, Op.WRITE, name="*", perm=Perm.DENY)])
    assert not denied.authorize_any(ALICE, "h", Op.WRITE, RT.TOPIC)
    partly = AclAuthorizer([acl(ALICE, Op.WRITE, name="o", ptype=PT.PREFIXED),
                            acl(ALICE, Op.WRITE, name="orders", perm=Perm.DENY)])
    assert partly.authorize_any(ALICE, "h", Op.WRITE, RT.TOPIC)


def test_binding_validation():
    assert AclBinding.of(2, "orders", 3, ALICE, "*", 3, 3) == acl(ALICE, Op.READ)
    for bad in ((1, "orders", 3, ALICE, "*", 3, 3), (2, "orders", 2, ALICE, "*", 3, 3),
                (2, "orders", 3, ALICE, "*", 1, 3), (2, "orders", 3, ALICE, "*", 3, 1),
                (2, "orders", 3, "alice", "*", 3, 3), (4, "other", 3, ALICE, "*", 7, 3),
                (2, "*", 4, ALICE, "*", 3, 3), (2, "", 3, ALICE, "*", 3, 3), (99, "x", 3, ALICE, "*", 3, 3)):
        with pytest.raises(InvalidAclError):
            AclBinding.of(*bad)


BINDINGS = [acl(ALICE, Op.READ), acl(BOB, Op.WRITE, perm=Perm.DENY), acl(ALICE, Op.READ, name="*"),
            acl(ALICE, Op.READ, name="ord", ptype=PT.PREFIXED), acl(BOB, Op.READ, rtype=RT.GROUP, name="g"),
            acl(BOB, Op.ALTER, rtype=RT.CLUSTER, name="kafka-cluster")]


@pytest.mark.parametrize("acl_filter, expected", [
    (AclBindingFilter(), BINDINGS),
    (AclBindingFilter(resource_type=RT.TOPIC, name="orders", pattern_type=PT.LITERAL), BINDINGS[:2]),
    (AclBindingFilter(name="orders"), BINDINGS[:2]),
    (AclBindingFilter(resource_type=RT.TOPIC, name="orders", pattern_type=PT.MATCH), BINDINGS[:4]),
    (AclBindingFilter(name="*", pattern_type=PT.MATCH), [BINDINGS[2]]),
    (AclBindingFilter(pattern_type=PT.PREFIXED), [BINDINGS[3]]),
    (AclBindingFilter(principal=BOB), [BINDINGS[1], BINDINGS[4], BINDINGS[5]]),
    (AclBindingFilter(operation=Op.READ, permission_type=Perm.ALLOW, resource_type=RT.GROUP), [BINDINGS[4]]),
    (AclBindingFilter(permission_type=Perm.DENY), [BINDINGS[1]]),
])
def test_filters(acl_filter, expected):
    assert sorted(AclAuthorizer(BINDINGS).matching(acl_filter), key=BINDINGS.index) == expected


def test_filter_refuses_unknown_values():
    with pytest.raises(InvalidAclError):
        AclBindingFilter.of(0, None, 1, None, None, 1, 1)
    with pytest.raises(InvalidAclError):
        AclBindingFilter.of(1, None, 1, None, None, 77, 1)


def test_file_round_trip_and_damage():
    assert set(decode_file(encode_file(BINDINGS))) == set(BINDINGS)
    assert decode_file(encode_file([])) == []
    for damaged in (b"", b"{", b"[]", b'{"version":2,"resources":[]}',
                    b'{"version":1,"resources":[{"resourceType":"Topic"}]}',
                    b'{"version":1,"resources":[{"resourceType":"Nope","name":"x","patternType":"LITERAL","acls":[]}]}'):
        with pytest.raises(AclFormatError):
            decode_file(damaged)


def test_kafka_znode_layout():
    assert znode_path(ResourcePattern(RT.TOPIC, "orders")) == "/kafka-acl/Topic/orders"
    assert znode_path(ResourcePattern(RT.TRANSACTIONAL_ID, "tx", PT.PREFIXED)) == \
        "/kafka-acl-extended/prefixed/TransactionalId/tx"
    # Kafka's own JSON decodes, and ours is the same shape
    kafka = b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}'
    entries = decode_znode(kafka, "/kafka-acl/Topic/orders")
    assert entries == [AccessControlEntry("User:alice", "*", Op.READ, Perm.ALLOW)]
    assert encode_znode(entries) == kafka
    assert encode_change(ResourcePattern(RT.TOPIC, "orders")) == b"Topic:orders"


def test_every_combination_of_one_allow_and_one_deny_is_decided_deny_first():
    """Exhaustive over operations: whenever a matching DENY for the operation (or ALL) is present, the
    answer is no; otherwise it is the ALLOW's coverage."""
    ops = [o for o in Op if o not in (Op.ANY, Op.UNKNOWN)]
    for allowed, denied, asked in itertools.product(ops, ops, [o for o in ops if o is not Op.ALL]):
        bindings = [acl(ALICE, allowed), acl(ALICE, denied, perm=Perm.DENY)]
        expected_allow = allowed in (asked, Op.ALL) or \
            (asked is Op.DESCRIBE and allowed in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)) or \
            (asked is Op.DESCRIBE_CONFIGS and allowed is Op.ALTER_CONFIGS)
        assert decide(bindings, op=asked) == (expected_allow and denied not in (asked, Op.ALL))
