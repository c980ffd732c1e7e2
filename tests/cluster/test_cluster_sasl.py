"""SASL on a cluster (issue 15): three real brokers, a real ZooKeeper, users in ``/config/users``.

Every broker serves two listeners and nothing else: INTERNAL (SASL_PLAINTEXT, SCRAM-SHA-512,
``inter.broker.listener.name``) and CLIENT (SASL_SSL, SCRAM-SHA-512). The brokers' own user and the
first administrator are created with ``eoslog users add --zookeeper`` before any broker runs, as Kafka's
``kafka-configs --zookeeper`` does. With no PLAINTEXT listener anywhere, every replica fetch, transaction
marker and verification between brokers has logged in over SASL, or it could not have happened.
"""

from __future__ import annotations

import subprocess
import sys
import time

import confluent_kafka
import pytest
from cluster_helpers import commit_abort_commit
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from eoslog.client.connection import BrokerConnection
from eoslog.cluster.zk import layout
from eoslog.security.client import ClientSecurity, ClientSecurityError
from eoslog.testing.certs import make_certs
from eoslog.testing.cluster import embedded_cluster
from eoslog.testing.process import BrokerProcess, free_port
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'


def eoslog(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eoslog", *args], input=input, capture_output=True, text=True,
                          check=False, timeout=60)


def add_user(zookeeper: str, user: str, password: str) -> None:
    done = eoslog("users", "add", user, "--mechanism", "SCRAM-SHA-512", "--zookeeper", zookeeper,
                  "--password-file", "-", input=password + "\n")
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), ())


def broker_properties(certs, broker_password: str = BROKER_PASSWORD) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,CLIENT:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": JAAS.format(BROKER_USER, broker_password),
        "ssl.keystore.location": str(certs.broker),
        "replica.lag.time.max.ms": "10000",
    }


@pytest.fixture(scope="module")
def cluster(certs, tmp_path_factory):
    ports: dict[int, dict[str, int]] = {}

    def listeners(broker_id: int, port: int) -> dict[str, str]:
        ports[broker_id] = {"CLIENT": port, "INTERNAL": free_port()}
        return {"listeners": ",".join(f"{name}://127.0.0.1:{p}" for name, p in ports[broker_id].items())}

    def first_users(zookeeper: str) -> None:
        add_user(zookeeper, BROKER_USER, BROKER_PASSWORD)
        add_user(zookeeper, ADMIN, ADMIN_PASSWORD)

    with embedded_cluster(3, tmp_path_factory.mktemp("sasl-cluster"), properties=broker_properties(certs),
                          broker_properties=listeners, before_brokers=first_users) as running:
        running.ports = ports
        yield running


def client_config(cluster, certs, broker_id: int, user: str = ADMIN, password: str = ADMIN_PASSWORD) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{cluster.ports[broker_id]['CLIENT']}", "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(certs.ca)}


def logs_in(cluster, certs, broker_id: int, user: str, password: str) -> bool:
    """One SCRAM-SHA-512 login to that broker alone (no bootstrap to another broker)."""
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
        "sasl.password": password, "ssl.ca.location": str(certs.ca)})
    try:
        BrokerConnection("127.0.0.1", cluster.ports[broker_id]["CLIENT"], timeout_s=10, security=security).close()
        return True
    except ClientSecurityError as exc:
        assert "SASL_AUTHENTICATION_FAILED" in str(exc)
        return False



def create_topic(cluster, certs, name: str, partitions: int = 1, replication_factor: int = 3, **kwargs) -> None:
    admin = AdminClient(client_config(cluster, certs, 1))
    topic = NewTopic(name, len(kwargs["replica_assignment"]), **kwargs) if "replica_assignment" in kwargs else \
        NewTopic(name, partitions, replication_factor, **kwargs)
    admin.create_topics([topic], operation_timeout=30)[name].result(60)


def consume(config: dict, topic: str, partitions: int, expected: int) -> dict[int, list[bytes]]:
    consumer = confluent_kafka.Consumer({**config, "group.id": f"check-{topic}", "isolation.level": "read_committed",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got[message.partition()].append(message.value())
    finally:
        consumer.close()
    return got


def test_users_are_kept_in_zookeeper_as_kafka_keeps_them(cluster):
    import json

    client = cluster._client()
    stored = json.loads(client.get(layout.user_config_path(BROKER_USER))[0])
    assert stored["version"] == 1 and set(stored["config"]) == {"SCRAM-SHA-512"}
    assert stored["config"]["SCRAM-SHA-512"].startswith("salt=") and "iterations=8192" in stored["config"]["SCRAM-SHA-512"]
    assert BROKER_PASSWORD not in json.dumps(stored)
    notices = [json.loads(client.get(f"{layout.CONFIG_CHANGES}/{n}")[0]) for n in client.get_children(layout.CONFIG_CHANGES)]
    assert {"version": 2, "entity_path": "users/admin"} in notices
    zookeeper = cluster.zookeeper.connect_string_with_chroot("/eoslog")
    listed = eoslog("users", "list", "--zookeeper", zookeeper)
    assert listed.returncode == 0, listed.stderr
    assert [line.split(None, 1) for line in listed.stdout.splitlines()] == [
        ["USER", "MECHANISMS"], ["admin", "SCRAM-SHA-512 (8192 iterations)"], ["broker", "SCRAM-SHA-512 (8192 iterations)"]]
    refused = eoslog("users", "delete", "nobody", "--zookeeper", zookeeper)
    assert refused.returncode != 0 and "user nobody has no such credential" in refused.stderr


def test_acks_all_replication_between_brokers_over_sasl(cluster, certs):
    create_topic(cluster, certs, "replicated", config={"min.insync.replicas": "3"})
    cluster.wait_for(lambda s: len(s.isr_of("replicated", 0)) == 3, 30, "replicated: ISR of 3")
    producer = confluent_kafka.Producer({**client_config(cluster, certs, 2), "acks": "all", "linger.ms": 5})
    errors = []
    sent = [f"value-{i:04d}".encode() for i in range(200)]
    for value in sent:
        producer.produce("replicated", value, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(60) == 0
    # min.insync.replicas=3: every acknowledgement needed both followers to have fetched over SASL.
    assert errors == [None] * len(sent)
    assert sorted(cluster.state().isr_of("replicated", 0)) == [1, 2, 3]
    assert consume(client_config(cluster, certs, 3), "replicated", 1, len(sent)) == {0: sent}


def test_transactions_with_markers_between_brokers_over_sasl(cluster, certs):
    create_topic(cluster, certs, "ledger", partitions=3)
    cluster.wait_for(lambda s: all(len(s.isr_of("ledger", p)) == 3 for p in range(3)), 30, "ledger: full ISRs")
    assert len({cluster.state().leader_of("ledger", p) for p in range(3)}) > 1  # markers must cross brokers
    producer = confluent_kafka.Producer({**client_config(cluster, certs, 3), "transactional.id": "ledger-writer",
                                         "linger.ms": 5, "transaction.timeout.ms": 20000})
    producer.init_transactions(60)
    expected = commit_abort_commit(producer, "ledger", 3, 10)
    assert consume(client_config(cluster, certs, 2), "ledger", 3, 60) == expected


def alter_scram_at(cluster, certs, broker_id: int, *, upsert: tuple[str, str] | None = None,
                   delete: str | None = None) -> None:
    """AlterUserScramCredentials sent to that broker alone (librdkafka's AdminClient picks any broker it
    knows, so the read-your-write checks below could not name the one that answered)."""
    import hashlib
    import os

    from eoslog.protocol import messages

    r = messages.AlterUserScramCredentialsRequest
    upsertions, deletions = [], []
    if upsert is not None:
        user, password = upsert
        salt = os.urandom(16)
        upsertions.append(r.ScramCredentialUpsertion(
            name=user, mechanism=2, iterations=8192, salt=salt,  # 2: SCRAM-SHA-512
            salted_password=hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 8192)))
    if delete is not None:
        deletions.append(r.ScramCredentialDeletion(name=delete, mechanism=2))
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN,
        "sasl.password": ADMIN_PASSWORD, "ssl.ca.location": str(certs.ca)})
    connection = BrokerConnection("127.0.0.1", cluster.ports[broker_id]["CLIENT"], timeout_s=30, security=security)
    try:
        results = connection.request(51, 0, r(deletions=deletions, upsertions=upsertions)).results
    finally:
        connection.close()
    assert [(x.user, x.error_code) for x in results] == [(upsert[0] if upsert else delete, 0)]


def test_a_user_added_at_one_broker_logs_in_at_another_and_a_deleted_one_nowhere(cluster, certs):
    admin = AdminClient(client_config(cluster, certs, 1))
    assert not logs_in(cluster, certs, 3, "carol", "carol-secret")
    alter_scram_at(cluster, certs, 1, upsert=("carol", "carol-secret"))
    # The broker that answered has read its own write back already; the others follow their watch.
    assert logs_in(cluster, certs, 1, "carol", "carol-secret")
    wait_until(lambda: logs_in(cluster, certs, 3, "carol", "carol-secret"), 10, "carol logs in at broker 3")
    wait_until(lambda: logs_in(cluster, certs, 2, "carol", "carol-secret"), 10, "carol logs in at broker 2")
    assert not logs_in(cluster, certs, 3, "carol", "wrong-secret")
    producer = confluent_kafka.Producer({**client_config(cluster, certs, 3, "carol", "carol-secret"), "acks": "all"})
    producer.produce("replicated", b"from carol")
    assert producer.flush(30) == 0

    # Deleted through broker 2: refused everywhere soon after, and at broker 2 at once.
    alter_scram_at(cluster, certs, 2, delete="carol")
    assert not logs_in(cluster, certs, 2, "carol", "carol-secret")
    for broker_id in (1, 3):
        wait_until(lambda b=broker_id: not logs_in(cluster, certs, b, "carol", "carol-secret"), 10,
                   f"carol refused at broker {broker_id}")
    assert cluster._client().exists(layout.user_config_path("carol")) is None
    # And through librdkafka's AdminClient (whichever broker it asks): every broker follows.
    upsert = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"dave-secret")
    admin.alter_user_scram_credentials([upsert])["dave"].result(30)
    for broker_id in (1, 2, 3):
        wait_until(lambda b=broker_id: logs_in(cluster, certs, b, "dave", "dave-secret"), 10,
                   f"dave logs in at broker {broker_id}")
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)]
                                       )["dave"].result(30)
    for broker_id in (1, 2, 3):
        wait_until(lambda b=broker_id: not logs_in(cluster, certs, b, "dave", "dave-secret"), 10,
                   f"dave refused at broker {broker_id}")
    described = admin.describe_user_scram_credentials(["carol"])["carol"]
    with pytest.raises(confluent_kafka.KafkaException, match="RESOURCE_NOT_FOUND|no SCRAM credential"):
        described.result(30)


def test_a_broker_with_a_wrong_inter_broker_password_cannot_replicate_and_says_so(cluster, certs, tmp_path):
    properties = {**cluster.properties, **broker_properties(certs, broker_password="not-the-password"),
                  "broker.id": "4", "zookeeper.connect": cluster.zookeeper.connect_string_with_chroot("/eoslog")}
    client_port, internal_port = free_port(), free_port()
    properties["listeners"] = f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}"
    intruder = BrokerProcess(data_dir=tmp_path / "broker-4", port=client_port, properties=properties,
                             log_path=tmp_path / "broker-4.log")
    with intruder:
        cluster.wait_for(lambda s: 4 in s.brokers, 30, "broker 4 registered")
        create_topic(cluster, certs, "guarded", replica_assignment=[[1, 4]])
        cluster.wait_for(lambda s: s.leader_of("guarded", 0) == 1, 30, "guarded led by broker 1")
        producer = confluent_kafka.Producer({**client_config(cluster, certs, 1), "acks": "1"})
        producer.produce("guarded", b"not for broker 4")
        assert producer.flush(30) == 0
        wait_until(lambda: "SASL login as 'broker' to the broker at 127.0.0.1:" in intruder.log_tail(400), 30,
                   "broker 4 logs its refused login")
        assert "SASL_AUTHENTICATION_FAILED" in intruder.log_tail(400)
        # It never fetches: the leader drops it from the ISR it was created in (replica.lag.time.max.ms),
        # and its replica stays empty.
        cluster.wait_for(lambda s: s.isr_of("guarded", 0) == (1,), 30, "broker 4 out of guarded's ISR")
        assert all(p.stat().st_size == 0 for p in (intruder.data_dir / "guarded-0").glob("*.log"))
