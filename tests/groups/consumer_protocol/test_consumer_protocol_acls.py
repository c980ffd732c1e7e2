"""Consumer groups (KIP-848) with SASL users and ACLs on a real broker process: a regex subscription
resolves only to topics the member's own principal may DESCRIBE (two members of one group with
different rights each get only what they may see), a subscription naming a topic the principal may not
describe is TOPIC_AUTHORIZATION_FAILED, and ConsumerGroupDescribe refuses a group holding such a topic
(Kafka 4.x, KAFKA-18813)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.security.client import ClientSecurity
from eoslog.testing.process import BrokerProcess, free_port
from eoslog.testing.wait import wait_until
from tests.groups.consumer_protocol.conftest import CONSUMER_GROUP_PROPERTIES

pytestmark = pytest.mark.interop
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
OPEN, SECRET = "acl-open", "acl-secret"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("k848-acls") / "data"
    for user, password in USERS.items():
        done = subprocess.run([sys.executable, "-m", "eoslog", "users", "add", user, "--data-dir", str(data_dir),
                               "--mechanism", "SCRAM-SHA-512", "--password-file", "-"],
                              input=password + "\n", capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
    port = free_port()
    properties = {**CONSUMER_GROUP_PROPERTIES, "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
                  "sasl.enabled.mechanisms": "SCRAM-SHA-512", "super.users": "User:admin",
                  "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                  "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}
    with BrokerProcess(data_dir=data_dir, port=port, properties=properties) as process:
        admin = AdminClient(login(process, "admin"))
        for future in admin.create_topics([NewTopic(OPEN, 2), NewTopic(SECRET, 2)]).values():
            future.result(30)
        allow = AclPermissionType.ALLOW
        bindings = [AclBinding(ResourceType.TOPIC, OPEN, ResourcePatternType.LITERAL, f"User:{user}", "*",
                               AclOperation.READ, allow) for user in ("alice", "bob")]
        bindings.append(AclBinding(ResourceType.TOPIC, SECRET, ResourcePatternType.LITERAL, "User:bob", "*",
                                   AclOperation.READ, allow))
        bindings += [AclBinding(ResourceType.GROUP, "acl-", ResourcePatternType.PREFIXED, f"User:{user}", "*",
                                AclOperation.READ, allow) for user in ("alice", "bob")]
        for future in admin.create_acls(bindings).values():
            future.result(30)
        yield process


def login(broker, user: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": USERS[user]}


def wire(broker, user: str):
    return BrokerConnection.from_bootstrap(broker.bootstrap,
                                           security=ClientSecurity.from_properties(login(broker, user)))


def consumer(broker, user: str, group: str) -> confluent_kafka.Consumer:
    c = confluent_kafka.Consumer({**login(broker, user), "group.id": group, "group.protocol": "consumer",
                                  "group.remote.assignor": "uniform", "auto.offset.reset": "earliest"})
    c.subscribe(["^acl-.*"])
    return c


def test_a_regex_resolves_per_member_to_the_topics_its_principal_may_describe(broker):
    group = f"acl-regex-{uuid.uuid4().hex[:6]}"
    alice = consumer(broker, "alice", group)
    bob = None
    seen_by_alice: set[tuple[str, int]] = set()

    def assigned(c) -> set[tuple[str, int]]:
        c.poll(0.1)
        tps = {(tp.topic, tp.partition) for tp in c.assignment()}
        if c is alice:
            seen_by_alice.update(tps)
        return tps

    try:
        # Alone, alice's regex matches both topics but resolves to the one she may describe.
        wait_until(lambda: assigned(alice) == {(OPEN, 0), (OPEN, 1)}, 20, "alice holding acl-open")
        # Bob (who may describe both) joins: his heartbeat must not widen alice's resolution, as a
        # group-wide resolution with the triggering member's rights would (Kafka 4.x, KAFKA-19147's note).
        bob = consumer(broker, "bob", group)
        wait_until(lambda: {t for t, _ in assigned(bob)} >= {SECRET} and not assigned(alice) & assigned(bob)
                   and len(assigned(alice) | assigned(bob)) == 4, 30, "all four partitions held")
        for _ in range(10):  # a few more heartbeats of both, in case a later target moved acl-secret
            assigned(alice), assigned(bob)
        assert {t for t, _ in assigned(bob)} >= {SECRET}
        assert seen_by_alice and all(t == OPEN for t, _ in seen_by_alice), seen_by_alice
        # The coordinator's own view (as the super user): alice's target never names acl-secret.
        with wire(broker, "admin") as w:
            d = w.request(69, 1, messages.ConsumerGroupDescribeRequest(group_ids=[group],
                                                                    include_authorized_operations=False))
        (described,) = d.groups
        assert described.error_code == 0
        by_client = {m.client_id: m for m in described.members}
        assert len(described.members) == 2
        targets = {m.member_id: {tp.topic_name for tp in m.target_assignment.topic_partitions}
                   for m in described.members}
        alice_id = alice.memberid()
        assert targets[alice_id] == {OPEN}, (targets, by_client)
    finally:
        alice.close()
        if bob is not None:
            bob.close()


def test_named_topics_the_principal_may_not_describe_are_refused(broker):
    group = f"acl-names-{uuid.uuid4().hex[:6]}"
    with wire(broker, "alice") as w:
        request = messages.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=uuid.uuid4().hex, member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[OPEN, SECRET], topic_partitions=[])
        refused = w.request(68, 1, request)
        assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert SECRET in refused.error_message and refused.assignment is None
        # Nothing was created: the same member joins with what it may see.
        request.subscribed_topic_names = [OPEN]
        joined = w.request(68, 1, request)
        assert joined.error_code == 0 and joined.member_epoch == 1
        leave = messages.ConsumerGroupHeartbeatRequest(group_id=group, member_id=request.member_id,
                                                       member_epoch=-1, rebalance_timeout_ms=-1)
        assert w.request(68, 1, leave).error_code == 0


def test_describing_a_group_that_holds_a_topic_the_caller_may_not_describe_is_refused(broker):
    group = f"acl-describe-{uuid.uuid4().hex[:6]}"
    with wire(broker, "bob") as w:
        member_id = uuid.uuid4().hex
        joined = w.request(68, 1, messages.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[SECRET], topic_partitions=[]))
        assert joined.error_code == 0 and len(joined.assignment.topic_partitions) == 1
        request = messages.ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)
        assert w.request(69, 1, request).groups[0].error_code == 0
        with wire(broker, "alice") as other:
            (refused,) = other.request(69, 1, request).groups
        assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and not refused.members
        w.request(68, 1, messages.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=-1,
                                                             rebalance_timeout_ms=-1))
