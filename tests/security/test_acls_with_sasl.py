"""ACLs for SASL principals: the user a client logged in as (SCRAM-SHA-512) is the principal ACLs name,
``super.users`` names SASL users too, and managing users needs ALTER on the cluster (issue 15).

The ACL matrix itself runs over mutual TLS in test_acls.py; this checks the SASL half of "who is asking"."""

from __future__ import annotations

import subprocess
import sys

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from eoslog.testing.process import BrokerProcess, free_port
from tests.interop.clients import poll_values

pytestmark = pytest.mark.interop
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def eoslog(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eoslog", *args], input=input, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("sasl-acls") / "data"
    for user, password in USERS.items():
        done = eoslog("users", "add", user, "--data-dir", str(data_dir), "--mechanism", "SCRAM-SHA-512",
                      "--password-file", "-", input=password + "\n")
        assert done.returncode == 0, done.stderr
    port = free_port()
    properties = {"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                  "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
                  "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}
    with BrokerProcess(data_dir=data_dir, port=port, properties=properties) as process:
        yield process


def login(broker, user: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": USERS[user]}


def delivery(config: dict, topic: str, value: bytes) -> confluent_kafka.KafkaError | None:
    outcome = []
    producer = confluent_kafka.Producer({**config, "message.timeout.ms": 10000})
    producer.produce(topic, value, on_delivery=lambda error, message: outcome.append(error))
    producer.flush(20)
    assert outcome, "no delivery report"
    return outcome[0]


def test_a_sasl_user_is_the_principal_acls_name(broker):
    admin = AdminClient(login(broker, "admin"))
    for future in admin.create_topics([confluent_kafka.admin.NewTopic(t, 1)
                                       for t in ("alice-orders", "bob-orders")]).values():
        future.result(30)
    # Nothing granted yet: alice is refused, the super user is not.
    refused = delivery(login(broker, "alice"), "alice-orders", b"no")
    assert refused is not None and refused.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert delivery(login(broker, "admin"), "bob-orders", b"admin writes anywhere") is None
    # WRITE (and so DESCRIBE) on topics prefixed alice-, for User:alice only.
    binding = AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(30)
    assert delivery(login(broker, "alice"), "alice-orders", b"granted") is None
    refused = delivery(login(broker, "alice"), "bob-orders", b"not hers")
    assert refused is not None and refused.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    refused = delivery(login(broker, "bob"), "alice-orders", b"not his")
    assert refused is not None and refused.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert poll_values(login(broker, "admin"), "alice-orders", 1) == [b"granted"]


def test_a_transactional_sasl_user_needs_write_on_its_transactional_id(broker):
    admin = AdminClient(login(broker, "admin"))
    admin.create_topics([confluent_kafka.admin.NewTopic("bob-ledger", 1)])["bob-ledger"].result(30)
    for future in admin.create_acls([
        AclBinding(ResourceType.TOPIC, "bob-", ResourcePatternType.PREFIXED, "User:bob", "*", AclOperation.WRITE,
                   AclPermissionType.ALLOW)]).values():
        future.result(30)
    producer = confluent_kafka.Producer({**login(broker, "bob"), "transactional.id": "bob-txn"})
    with pytest.raises(confluent_kafka.KafkaException) as refusal:
        producer.init_transactions(20)
    assert refusal.value.args[0].code() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    for future in admin.create_acls([
        AclBinding(ResourceType.TRANSACTIONAL_ID, "bob-", ResourcePatternType.PREFIXED, "User:bob", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW)]).values():
        future.result(30)
    producer = confluent_kafka.Producer({**login(broker, "bob"), "transactional.id": "bob-txn"})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce("bob-ledger", b"committed")
    producer.commit_transaction(20)
    assert poll_values(login(broker, "admin"), "bob-ledger", 1) == [b"committed"]


def test_managing_users_needs_alter_on_the_cluster(broker, tmp_path):
    def properties(user: str):
        path = tmp_path / f"{user}.properties"
        path.write_text("\n".join(f"{k}={v}" for k, v in login(broker, user).items() if k != "bootstrap.servers"))
        return str(path)

    refused = eoslog("users", "add", "mallory", "--bootstrap-server", broker.bootstrap, "--command-config",
                     properties("alice"), "--password-file", "-", input="m\n")
    assert refused.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    refused = eoslog("users", "list", "--bootstrap-server", broker.bootstrap, "--command-config", properties("alice"))
    assert refused.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    listed = eoslog("users", "list", "--bootstrap-server", broker.bootstrap, "--command-config", properties("admin"))
    assert listed.returncode == 0 and "mallory" not in listed.stdout and "alice" in [
        line.split()[0] for line in listed.stdout.splitlines()]
