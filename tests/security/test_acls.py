"""The ACL matrix on a real broker process, with real clients over mutual TLS (issue 15, ACL step).

Principals come from client certificates (``ssl.principal.mapping.rules`` maps ``CN=alice,...`` to
``User:alice``); ``User:admin`` is the super user who grants and checks. For each protected API a
principal without the permission gets the *_AUTHORIZATION_FAILED code its client understands and
nothing changes; once granted, the same call works."""

from __future__ import annotations

import json
import ssl
import time

import confluent_kafka
import kafka
import kafka.admin
import kafka.errors
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.certs import make_certs
from eoslog.testing.process import BrokerProcess, free_port

pytestmark = pytest.mark.interop

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
TIMEOUT = 30


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), ("alice", "bob", "admin"))


def acl_properties(certs, ssl_port: int) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
    }


@pytest.fixture(scope="module")
def broker(certs, tmp_path_factory):
    ssl_port = free_port()
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("acls") / "data",
                       properties=acl_properties(certs, ssl_port)) as process:
        process.ssl_port = ssl_port
        yield process


def config(broker, certs, who: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{broker.ssl_port}", "security.protocol": "ssl",
            "ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(certs.client_cert(who)),
            "ssl.key.location": str(certs.client_key(who))}


@pytest.fixture(scope="module")
def admin(broker, certs):
    return AdminClient(config(broker, certs, "admin"))


@pytest.fixture(scope="module")
def alice(broker, certs):
    return AdminClient(config(broker, certs, "alice"))


def acl(principal: str, operation: AclOperation, rtype: ResourceType, name: str,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", operation, permission)


def grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(TIMEOUT)


def error_of(future) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    return info.value.args[0].code()


def create_topic(admin: AdminClient, name: str, partitions: int = 1) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)


def end_offset(broker, certs, topic: str, partition: int = 0) -> int:
    consumer = confluent_kafka.Consumer({**config(broker, certs, "admin"), "group.id": "admin-watch"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)[1]
    finally:
        consumer.close()


def produce(broker, certs, who: str, topic: str, count: int = 3, **extra) -> list:
    """Produces ``count`` records; returns the delivery errors (None for each success)."""
    outcomes = []
    producer = confluent_kafka.Producer({**config(broker, certs, who), "message.timeout.ms": 10000, **extra})
    for i in range(count):
        producer.produce(topic, f"{who}-{i}".encode(), on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(TIMEOUT)
    assert len(outcomes) == count
    return outcomes


def read_from_start(broker, certs, who: str, topic: str, want: int, group: str | None = None):
    """(values, first error code): reads the partition from offset 0 until ``want`` values or an error."""
    consumer = confluent_kafka.Consumer({**config(broker, certs, who), "group.id": group or f"{who}-reader",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    values, error = [], None
    try:
        if group is None:
            consumer.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        else:
            consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT
        while len(values) < want and error is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    error = message.error().code()
                continue
            values.append(message.value())
    finally:
        consumer.close()
    return values, error


# ---- CreateAcls / DescribeAcls / DeleteAcls ---------------------------------------------------------

def kafka_python_admin(broker, certs, who: str):
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.client_cert(who)), str(certs.client_key(who)))
    return kafka.admin.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.ssl_port}", security_protocol="SSL",
                                        ssl_context=context)


def test_acl_admin_round_trip_through_confluent_admin_client(broker, certs, admin, alice):
    bindings = [acl("User:carol", AclOperation.READ, ResourceType.TOPIC, "acl-rt"),
                acl("User:carol", AclOperation.WRITE, ResourceType.TOPIC, "acl-rt-", ResourcePatternType.PREFIXED,
                    AclPermissionType.DENY)]
    grant(admin, *bindings)
    described = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:carol",
                                                     None, AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT)
    assert sorted(map(str, described)) == sorted(map(str, bindings))
    # MATCH: the patterns that apply to a concrete topic name
    matching = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "acl-rt-x", ResourcePatternType.MATCH, None,
                                                    None, AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT)
    assert [str(b) for b in matching] == [str(bindings[1])]
    # only ALTER on the cluster may change ACLs, DESCRIBE on it read them
    everything = acl("User:alice", AclOperation.ALL, ResourceType.BROKER, "kafka-cluster")  # confluent's CLUSTER
    assert error_of(alice.create_acls([everything])[everything]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # (librdkafka 2.16 hands a refused DescribeAcls back as an empty list: kafka-python shows the error)
    assert alice.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT) == []
    with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
        kafka_python_admin(broker, certs, "alice").describe_acls(kafka.admin.ACLFilter(
            None, "*", kafka.admin.ACLOperation.ANY, kafka.admin.ACLPermissionType.ANY,
            kafka.admin.ResourcePatternFilter(kafka.admin.ResourceType.ANY, None,
                                              kafka.admin.ACLResourcePatternType.ANY)))
    carol = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:carol", None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert error_of(alice.delete_acls([carol])[carol]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    deleted = admin.delete_acls([carol])[carol].result(TIMEOUT)
    assert sorted(map(str, deleted)) == sorted(map(str, bindings))
    assert admin.describe_acls(carol).result(TIMEOUT) == []


# ---- Produce, Fetch, ListOffsets, Metadata ----------------------------------------------------------

def test_produce_needs_write_and_fetch_needs_read(broker, certs, admin):
    create_topic(admin, "orders")
    grant(admin, acl("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders"))
    errors = produce(broker, certs, "alice", "orders")
    assert {e.code() for e in errors} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert end_offset(broker, certs, "orders") == 0  # nothing was written
    grant(admin, acl("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "orders"))
    assert produce(broker, certs, "alice", "orders") == [None] * 3
    assert end_offset(broker, certs, "orders") == 3

    # the consumer's group (librdkafka looks its coordinator up even when assigning) is bob's to use, and
    # bob may DESCRIBE the topic: the refusal comes from Fetch itself
    grant(admin, acl("User:bob", AclOperation.READ, ResourceType.GROUP, "bob-reader"),
          acl("User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders"))
    values, error = read_from_start(broker, certs, "bob", "orders", 3)
    assert (values, error) == ([], KafkaError.TOPIC_AUTHORIZATION_FAILED)
    grant(admin, acl("User:bob", AclOperation.READ, ResourceType.TOPIC, "orders"))
    values, error = read_from_start(broker, certs, "bob", "orders", 3)
    assert (values, error) == ([b"alice-0", b"alice-1", b"alice-2"], None)


def test_deny_beats_allow_and_prefixed_patterns_match(broker, certs, admin):
    for name in ("pay-ok", "pay-secret", "other-pay"):
        create_topic(admin, name)
    grant(admin, acl("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "pay-", ResourcePatternType.PREFIXED),
          acl("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "pay-secret", permission=AclPermissionType.DENY))
    assert produce(broker, certs, "alice", "pay-ok") == [None] * 3
    # DESCRIBE is implied by the prefixed WRITE, so the refusal comes from Produce itself
    assert {e.code() for e in produce(broker, certs, "alice", "pay-secret")} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert {e.code() for e in produce(broker, certs, "alice", "other-pay")} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert [end_offset(broker, certs, t) for t in ("pay-ok", "pay-secret", "other-pay")] == [3, 0, 0]


def test_metadata_hides_topics_the_principal_cannot_describe(broker, certs, admin, alice):
    for name in ("seen-topic", "hidden-topic"):
        create_topic(admin, name)
    grant(admin, acl("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "seen-topic"))
    listed = alice.list_topics(timeout=TIMEOUT).topics
    assert "seen-topic" in listed and "hidden-topic" not in listed
    assert "hidden-topic" in admin.list_topics(timeout=TIMEOUT).topics  # the super user sees everything
    named = alice.list_topics("hidden-topic", timeout=TIMEOUT).topics["hidden-topic"]
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # a topic that does not exist is refused the same way: the answer does not tell
    missing = alice.list_topics("no-such-topic", timeout=TIMEOUT).topics["no-such-topic"]
    assert missing.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "no-such-topic" not in admin.list_topics(timeout=TIMEOUT).topics  # and was not auto-created
    # ListOffsets: librdkafka asks Metadata first, which refuses; the described topic answers
    with pytest.raises(KafkaException):
        alice.list_offsets({TopicPartition("hidden-topic", 0): confluent_kafka.admin.OffsetSpec.latest()})[
            TopicPartition("hidden-topic", 0)].result(TIMEOUT)
    got = alice.list_offsets({TopicPartition("seen-topic", 0): confluent_kafka.admin.OffsetSpec.latest()})
    assert got[TopicPartition("seen-topic", 0)].result(TIMEOUT).offset == 0


def test_authorized_operations_are_reported(admin, alice):
    """KIP-430: what the principal may do, as clients ask with include_authorized_operations."""
    create_topic(admin, "ops-topic")
    grant(admin, acl("User:alice", AclOperation.READ, ResourceType.TOPIC, "ops-topic"))
    topics = confluent_kafka.TopicCollection(["ops-topic"])

    def topic_operations(client):
        described = client.describe_topics(topics, include_authorized_operations=True)["ops-topic"].result(TIMEOUT)
        return set(described.authorized_operations)

    assert topic_operations(alice) == {AclOperation.READ, AclOperation.DESCRIBE}  # Describe implied by Read
    assert topic_operations(admin) == {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                       AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                                       AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    cluster = alice.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert not cluster.authorized_operations  # alice has nothing on the cluster
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert AclOperation.ALTER in set(cluster.authorized_operations)


def test_aiokafka_and_kafka_python_see_the_refusals(broker, certs, admin):
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError

    create_topic(admin, "py-clients")
    grant(admin, acl("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "py-clients"))
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.client_cert("alice")), str(certs.client_key("alice")))

    async def aiokafka_send():
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.ssl_port}", security_protocol="SSL",
                                    ssl_context=context, request_timeout_ms=10000)
        await producer.start()
        try:
            await producer.send_and_wait("py-clients", b"no")
        finally:
            await producer.stop()

    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(aiokafka_send())

    producer = kafka.KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.ssl_port}", security_protocol="SSL",
                                   ssl_context=context, retries=0, request_timeout_ms=10000)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send("py-clients", b"no").get(timeout=TIMEOUT)
    finally:
        producer.close()
    assert end_offset(broker, certs, "py-clients") == 0


# ---- topic administration --------------------------------------------------------------------------

def test_topic_administration_needs_create_delete_alter_and_config_rights(admin, alice):
    assert error_of(alice.create_topics([NewTopic("alice-made", 1, 1)])["alice-made"]) == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "alice-made" not in admin.list_topics(timeout=TIMEOUT).topics
    grant(admin, acl("User:alice", AclOperation.CREATE, ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED),
          acl("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED))
    alice.create_topics([NewTopic("alice-made", 1, 1)])["alice-made"].result(TIMEOUT)

    assert error_of(alice.create_partitions([NewPartitions("alice-made", 2)])["alice-made"]) == \
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource(ConfigResource.Type.TOPIC, "alice-made")
    assert error_of(alice.describe_configs([resource])[resource]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    change = ConfigResource(ConfigResource.Type.TOPIC, "alice-made", incremental_configs=[
        ConfigEntry("retention.ms", "12345", incremental_operation=AlterConfigOpType.SET)])
    assert error_of(alice.incremental_alter_configs([change])[change]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert error_of(alice.delete_topics(["alice-made"])["alice-made"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert admin.describe_configs([resource])[resource].result(TIMEOUT)["retention.ms"].value != "12345"
    assert len(admin.list_topics(timeout=TIMEOUT).topics["alice-made"].partitions) == 1

    grant(admin, *(acl("User:alice", op, ResourceType.TOPIC, "alice-made") for op in (
        AclOperation.ALTER, AclOperation.ALTER_CONFIGS, AclOperation.DELETE)))
    alice.create_partitions([NewPartitions("alice-made", 2)])["alice-made"].result(TIMEOUT)
    alice.incremental_alter_configs([change])[change].result(TIMEOUT)
    assert alice.describe_configs([resource])[resource].result(TIMEOUT)["retention.ms"].value == "12345"
    alice.delete_topics(["alice-made"])["alice-made"].result(TIMEOUT)
    assert "alice-made" not in admin.list_topics(timeout=TIMEOUT).topics


def test_delete_records_needs_delete(broker, certs, admin, alice):
    create_topic(admin, "trimmed")
    assert produce(broker, certs, "admin", "trimmed") == [None] * 3
    grant(admin, acl("User:alice", AclOperation.DESCRIBE, ResourceType.TOPIC, "trimmed"))
    tp = TopicPartition("trimmed", 0, 2)
    assert error_of(alice.delete_records([tp])[tp]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(admin, acl("User:alice", AclOperation.DELETE, ResourceType.TOPIC, "trimmed"))
    assert alice.delete_records([tp])[tp].result(TIMEOUT).low_watermark == 2


# ---- groups ------------------------------------------------------------------------------------------

def test_consumer_groups_need_group_rights(broker, certs, admin, alice):
    create_topic(admin, "grouped")
    assert produce(broker, certs, "admin", "grouped") == [None] * 3
    grant(admin, acl("User:bob", AclOperation.READ, ResourceType.TOPIC, "grouped"))
    values, error = read_from_start(broker, certs, "bob", "grouped", 3, group="bobs")
    assert error == KafkaError.GROUP_AUTHORIZATION_FAILED and values == []
    grant(admin, acl("User:bob", AclOperation.READ, ResourceType.GROUP, "bobs"))
    consumer = confluent_kafka.Consumer({**config(broker, certs, "bob"), "group.id": "bobs",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe(["grouped"])
    got = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message)
    assert len(got) == 3
    consumer.commit(asynchronous=False)  # OffsetCommit: READ on the group and on the topic
    consumer.close()
    committed = admin.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions("bobs")])
    assert committed["bobs"].result(TIMEOUT).topic_partitions[0].offset == 3

    # alice may not see the group, describe it or delete it
    listed = alice.list_consumer_groups().result(TIMEOUT)
    assert "bobs" not in {g.group_id for g in listed.valid}
    assert "bobs" in {g.group_id for g in admin.list_consumer_groups().result(TIMEOUT).valid}
    assert error_of(alice.describe_consumer_groups(["bobs"])["bobs"]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert error_of(alice.delete_consumer_groups(["bobs"])["bobs"]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(admin, acl("User:alice", AclOperation.DELETE, ResourceType.GROUP, "bobs"))
    alice.delete_consumer_groups(["bobs"])["bobs"].result(TIMEOUT)
    assert "bobs" not in {g.group_id for g in admin.list_consumer_groups().result(TIMEOUT).valid}


# ---- transactions ------------------------------------------------------------------------------------

def test_transactional_producer_needs_write_on_its_transactional_id(broker, certs, admin):
    create_topic(admin, "txn-out")
    grant(admin, acl("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "txn-out"))
    producer = confluent_kafka.Producer({**config(broker, certs, "alice"), "transactional.id": "alice-tx"})
    with pytest.raises(KafkaException) as info:
        producer.init_transactions(TIMEOUT)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    del producer

    grant(admin, acl("User:alice", AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "alice-",
                     ResourcePatternType.PREFIXED))
    producer = confluent_kafka.Producer({**config(broker, certs, "alice"), "transactional.id": "alice-tx"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("txn-out", f"t{i}".encode())
    producer.commit_transaction(TIMEOUT)
    assert end_offset(broker, certs, "txn-out") == 4  # three records and the commit marker


def test_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(broker, certs, admin):
    create_topic(admin, "idem-out")
    grant(admin, acl("User:bob", AclOperation.DESCRIBE, ResourceType.TOPIC, "idem-out"))
    # InitProducerId is refused; librdkafka makes that a fatal error of the producer
    errors = []
    producer = confluent_kafka.Producer({**config(broker, certs, "bob"), "enable.idempotence": True,
                                         "message.timeout.ms": 10000})
    try:
        producer.produce("idem-out", b"never")
        producer.flush(TIMEOUT)
    except KafkaException as exc:
        errors.append(exc.args[0])
    assert KafkaError.CLUSTER_AUTHORIZATION_FAILED in {e.code() for e in errors if e is not None}
    assert end_offset(broker, certs, "idem-out") == 0
    grant(admin, acl("User:bob", AclOperation.WRITE, ResourceType.TOPIC, "idem-out"))
    assert produce(broker, certs, "bob", "idem-out", 3, **{"enable.idempotence": True}) == [None] * 3


def test_super_user_bypasses_a_deny_everything(broker, certs, admin):
    create_topic(admin, "guarded")
    grant(admin, acl("User:*", AclOperation.ALL, ResourceType.TOPIC, "guarded", permission=AclPermissionType.DENY))
    assert produce(broker, certs, "admin", "guarded") == [None] * 3
    assert {e.code() for e in produce(broker, certs, "alice", "guarded")} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}


# ---- the rest of the matrix, on the wire --------------------------------------------------------------
# APIs the client libraries do not expose (or check first through Metadata), sent with eoslog's codec over
# mutual TLS. Each is refused, in every error code it carries, for a principal with no ACL on the
# resources named; the super user is never refused.

TOPIC_REFUSED, GROUP_REFUSED = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_REFUSED, TXN_REFUSED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
AUTHORIZATION_CODES = {TOPIC_REFUSED, GROUP_REFUSED, CLUSTER_REFUSED, TXN_REFUSED}
M = messages
WIRE_MATRIX = [
    ("DescribeConfigs broker", 32, 4, CLUSTER_REFUSED, lambda: M.DescribeConfigsRequest(resources=[
        M.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None)])),
    ("AlterConfigs broker", 33, 2, CLUSTER_REFUSED, lambda: M.AlterConfigsRequest(resources=[
        M.AlterConfigsRequest.AlterConfigsResource(resource_type=4, resource_name="0", configs=[
            M.AlterConfigsRequest.AlterableConfig(name="num.partitions", value="2")])])),
    ("AlterConfigs topic", 33, 0, TOPIC_REFUSED, lambda: M.AlterConfigsRequest(resources=[
        M.AlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name="matrix", configs=[
            M.AlterConfigsRequest.AlterableConfig(name="retention.ms", value="86400000")])])),
    ("IncrementalAlterConfigs broker", 44, 1, CLUSTER_REFUSED, lambda: M.IncrementalAlterConfigsRequest(resources=[
        M.IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=4, resource_name="0", configs=[
            M.IncrementalAlterConfigsRequest.AlterableConfig(name="num.partitions", config_operation=0, value="2")])])),
    ("ListOffsets", 2, 7, TOPIC_REFUSED, lambda: M.ListOffsetsRequest(replica_id=-1, topics=[M.ListOffsetsRequest.ListOffsetsTopic(
        name="matrix", partitions=[M.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])),
    ("DescribeTopicPartitions", 75, 0, TOPIC_REFUSED, lambda: M.DescribeTopicPartitionsRequest(topics=[
        M.DescribeTopicPartitionsRequest.TopicRequest(name="matrix")])),
    ("DescribeProducers", 61, 0, TOPIC_REFUSED, lambda: M.DescribeProducersRequest(topics=[
        M.DescribeProducersRequest.TopicRequest(name="matrix", partition_indexes=[0])])),
    ("FindCoordinator group", 10, 4, GROUP_REFUSED,
     lambda: M.FindCoordinatorRequest(key_type=0, coordinator_keys=["matrix-group"])),
    ("FindCoordinator transaction", 10, 4, TXN_REFUSED,
     lambda: M.FindCoordinatorRequest(key_type=1, coordinator_keys=["matrix-tx"])),
    ("OffsetFetch", 9, 7, GROUP_REFUSED, lambda: M.OffsetFetchRequest(group_id="matrix-group", topics=[
        M.OffsetFetchRequest.OffsetFetchRequestTopic(name="matrix", partition_indexes=[0])])),
    ("OffsetDelete", 47, 0, GROUP_REFUSED, lambda: M.OffsetDeleteRequest(group_id="matrix-group", topics=[
        M.OffsetDeleteRequest.OffsetDeleteRequestTopic(name="matrix", partitions=[
            M.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])),
    ("AddPartitionsToTxn", 24, 3, TXN_REFUSED, lambda: M.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="matrix-tx", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[M.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="matrix", partitions=[0])])),
    ("AddOffsetsToTxn", 25, 3, TXN_REFUSED, lambda: M.AddOffsetsToTxnRequest(
        transactional_id="matrix-tx", producer_id=1, producer_epoch=0, group_id="matrix-group")),
    ("TxnOffsetCommit", 28, 3, TXN_REFUSED, lambda: M.TxnOffsetCommitRequest(
        transactional_id="matrix-tx", group_id="matrix-group", producer_id=1, producer_epoch=0, generation_id=-1,
        member_id="", topics=[M.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="matrix", partitions=[
            M.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])),
    ("EndTxn", 26, 3, TXN_REFUSED, lambda: M.EndTxnRequest(transactional_id="matrix-tx", producer_id=1,
                                                            producer_epoch=0, committed=True)),
    # v4+ is the brokers' form (KIP-890): CLUSTER_ACTION, not the transactional id's WRITE.
    ("AddPartitionsToTxn v5", 24, 5, CLUSTER_REFUSED, lambda: M.AddPartitionsToTxnRequest(transactions=[
        M.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id="matrix-tx", producer_id=1, producer_epoch=0, verify_only=True,
            topics=[M.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="matrix", partitions=[0])])])),
    ("WriteTxnMarkers", 27, 1, CLUSTER_REFUSED, lambda: M.WriteTxnMarkersRequest(markers=[
        M.WriteTxnMarkersRequest.WritableTxnMarker(producer_id=1, producer_epoch=0, transaction_result=False,
                                                   coordinator_epoch=0, topics=[
            M.WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="matrix", partition_indexes=[0])])])),
    ("DescribeTransactions", 65, 0, TXN_REFUSED, lambda: M.DescribeTransactionsRequest(transactional_ids=["matrix-tx"])),
    ("ElectLeaders", 43, 2, CLUSTER_REFUSED, lambda: M.ElectLeadersRequest(election_type=0, timeout_ms=1000,
        topic_partitions=[M.ElectLeadersRequest.TopicPartitions(topic="matrix", partitions=[0])])),
    ("AlterPartitionReassignments", 45, 0, CLUSTER_REFUSED, lambda: M.AlterPartitionReassignmentsRequest(
        timeout_ms=1000, topics=[M.AlterPartitionReassignmentsRequest.ReassignableTopic(name="matrix", partitions=[
            M.AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=None)])])),
    ("ListPartitionReassignments", 46, 0, CLUSTER_REFUSED,
     lambda: M.ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None)),
    ("CommitTransactionGroup", 0x7E00, 0, TXN_REFUSED, lambda: M.CommitTransactionGroupRequest(
        group_name="matrix-txg", sequence=1, abort_prefix=None, transactions=[
            M.CommitTransactionGroupRequest.GroupMember(transactional_id="matrix-tx", producer_id=1, producer_epoch=0)])),
    ("DescribeTransactionGroups", 0x7E01, 0, TXN_REFUSED,
     lambda: M.DescribeTransactionGroupsRequest(group_names=["matrix-txg"])),
    ("AbortTransactionsByPrefix", 0x7E02, 0, TXN_REFUSED,
     lambda: M.AbortTransactionsByPrefixRequest(prefix="matrix-tx-prefix")),
    # check-back (docs/transactions.md): WRITE on the transactional id; Poll DESCRIBE on the group
    ("BeginCheckBack", 0x7E10, 0, TXN_REFUSED, lambda: M.BeginCheckBackRequest(
        transactional_id="matrix-tx", producer_id=1, producer_epoch=0, check_back_group="matrix-group")),
    ("PollCheckBack", 0x7E11, 0, GROUP_REFUSED, lambda: M.PollCheckBackRequest(
        check_back_group="matrix-group", member_id="m", max_wait_ms=0, max_checks=10)),
    ("AnswerCheckBack", 0x7E12, 0, TXN_REFUSED, lambda: M.AnswerCheckBackRequest(
        transactional_id="matrix-tx", producer_id=1, producer_epoch=0, check_number=0, answer=2)),
]


def tls_wire(broker, certs, who: str) -> BrokerConnection:
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(certs.client_cert(who)), str(certs.client_key(who)))
    wire = BrokerConnection.from_bootstrap(f"127.0.0.1:{broker.ssl_port}")
    wire.sock = context.wrap_socket(wire.sock, server_hostname="127.0.0.1")
    return wire


def error_codes(value) -> set[int]:
    """Every error code anywhere in a response (top level, per topic, per partition, per member)."""
    codes = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("error_code"):
                codes.add(item)
            else:
                codes |= error_codes(item)
    elif isinstance(value, list):
        for item in value:
            codes |= error_codes(item)
    return codes


@pytest.fixture(scope="module")
def matrix_topic(admin):
    create_topic(admin, "matrix")
    return "matrix"


@pytest.mark.parametrize("name, api_key, version, refusal, request_factory", WIRE_MATRIX,
                         ids=[row[0] for row in WIRE_MATRIX])
def test_wire_matrix(broker, certs, matrix_topic, name, api_key, version, refusal, request_factory):
    bob, admin = tls_wire(broker, certs, "bob"), tls_wire(broker, certs, "admin")
    try:
        refused = error_codes(bob.request(api_key, version, request_factory()).to_dict())
        allowed = error_codes(admin.request(api_key, version, request_factory()).to_dict())
    finally:
        bob.close()
        admin.close()
    # (NONE may appear too: to_dict() holds every version's fields, and a top-level code absent from this
    # version reads 0; each request names one partition, so any refusal is the whole answer)
    assert refused - {0} == {int(refusal)}, f"{name}: {[ErrorCode(c).name for c in refused]}"
    assert not allowed & {int(c) for c in AUTHORIZATION_CODES}, f"{name}: {[ErrorCode(c).name for c in allowed]}"


def test_list_transactions_shows_only_describable_ids(broker, certs, admin):
    create_topic(admin, "listed-tx-out")
    producer = confluent_kafka.Producer({**config(broker, certs, "admin"), "transactional.id": "listed-tx"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce("listed-tx-out", b"x")
    producer.flush(TIMEOUT)  # the transaction stays open while we look

    def listed(who):
        wire = tls_wire(broker, certs, who)
        try:
            response = wire.request(66, 0, M.ListTransactionsRequest(state_filters=[], producer_id_filters=[]))
        finally:
            wire.close()
        return {t.transactional_id for t in response.transaction_states}

    assert "listed-tx" in listed("admin")
    assert "listed-tx" not in listed("bob")
    grant(admin, acl("User:bob", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "listed-tx"))
    assert "listed-tx" in listed("bob")

    def described_topics(who):
        wire = tls_wire(broker, certs, who)
        try:
            response = wire.request(65, 0, M.DescribeTransactionsRequest(transactional_ids=["listed-tx"]))
        finally:
            wire.close()
        (state,) = response.transaction_states
        assert state.error_code == 0
        return [t.topic for t in state.topics]

    # DescribeTransactions leaves out the partitions of topics bob may not Describe
    assert described_topics("admin") == ["listed-tx-out"]
    assert described_topics("bob") == []
    producer.abort_transaction(TIMEOUT)


def test_list_transaction_groups_shows_only_describable_groups_and_members(broker, certs, admin):
    create_topic(admin, "listed-txg-out")
    producers, members = [], []
    for transactional_id in ("listed-txg-0-0", "listed-txg-0-1"):
        producer = confluent_kafka.Producer({**config(broker, certs, "admin"), "transactional.id": transactional_id})
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.produce("listed-txg-out", b"x")
        producer.flush(TIMEOUT)  # left open: the group commits it
        producers.append(producer)
    root = tls_wire(broker, certs, "admin")
    try:
        for transactional_id in ("listed-txg-0-0", "listed-txg-0-1"):
            (state,) = root.request(65, 0, M.DescribeTransactionsRequest(transactional_ids=[transactional_id])
                                 ).transaction_states
            members.append(M.CommitTransactionGroupRequest.GroupMember(
                transactional_id=transactional_id, producer_id=state.producer_id, producer_epoch=state.producer_epoch))
        committed = root.request(0x7E00, 0, M.CommitTransactionGroupRequest(group_name="listed-txg", sequence=0,
                                                                         abort_prefix=None, transactions=members))
        assert committed.error_code == 0
    finally:
        root.close()

    def listed(who):
        wire = tls_wire(broker, certs, who)
        try:
            response = wire.request(0x7E03, 0, M.ListTransactionGroupsRequest(states_filter=[]))
        finally:
            wire.close()
        assert response.error_code == 0
        return {g.group_name: [m.transactional_id for m in g.members] for g in response.groups}

    assert listed("admin")["listed-txg"] == ["listed-txg-0-0", "listed-txg-0-1"]
    assert "listed-txg" not in listed("bob")
    grant(admin, acl("User:bob", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "listed-txg"),
          acl("User:bob", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "listed-txg-0-1"))
    # the group, and of its members only the one bob may describe
    assert listed("bob")["listed-txg"] == ["listed-txg-0-1"]


# ---- the eoslog acls command ---------------------------------------------------------------------------

def test_eoslog_acls_command_adds_lists_and_removes(broker, certs, admin, tmp_path):
    from click.testing import CliRunner

    from eoslog.cli import main

    properties = tmp_path / "admin.properties"
    properties.write_text(f"security.protocol=SSL\nssl.truststore.location={certs.ca}\n"
                          f"ssl.keystore.location={certs.client_cert('admin')}\n"
                          f"ssl.key.location={certs.client_key('admin')}\n")
    common = ["--bootstrap-server", f"127.0.0.1:{broker.ssl_port}", "--command-config", str(properties)]
    runner = CliRunner()

    def run(*args):
        result = runner.invoke(main, ["acls", *args, *common])
        assert result.exit_code == 0, result.output
        return result.output

    create_topic(admin, "cli-orders")
    assert {e.code() for e in produce(broker, certs, "alice", "cli-orders")} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    run("add", "--allow-principal", "User:alice", "--producer", "--topic", "cli-")
    assert {e.code() for e in produce(broker, certs, "alice", "cli-orders")} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    added = json.loads(run("add", "--allow-principal", "User:alice", "--producer", "--topic", "cli-",
                           "--resource-pattern-type", "prefixed", "--json"))
    assert sorted((r["name"], r["pattern_type"], r["operation"]) for r in added) == [
        ("cli-", "PREFIXED", op) for op in ("CREATE", "DESCRIBE", "WRITE")]
    assert run("list", "--topic", "nobody-has-acls-here") == "none\n"
    assert produce(broker, certs, "alice", "cli-orders") == [None] * 3
    printed = run("list", "--topic", "cli-orders", "--resource-pattern-type", "match", "--json")
    assert printed.count("\n") == 1  # one line, as every tool's --json
    listed = json.loads(printed)
    # MATCH: the prefixed ACLs apply to cli-orders, the literal "cli-" ones do not
    assert {(r["name"], r["pattern_type"], r["operation"]) for r in listed} == {
        ("cli-", "PREFIXED", op) for op in ("WRITE", "DESCRIBE", "CREATE")}
    assert "ALLOW User:alice WRITE from host *" in run("list", "--principal", "User:alice")
    assert "removed 3 ACLs" in run("remove", "--topic", "cli-", "--resource-pattern-type", "prefixed")
    assert {e.code() for e in produce(broker, certs, "alice", "cli-orders")} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    refused = runner.invoke(main, ["acls", "remove", *common])
    assert refused.exit_code != 0 and "--force" in refused.output
    # a principal without ALTER on the cluster is told so
    alice_properties = tmp_path / "alice.properties"
    alice_properties.write_text(properties.read_text().replace("admin", "alice"))
    result = runner.invoke(main, ["acls", "add", "--allow-principal", "User:alice", "--operation", "All",
                                  "--cluster", "--bootstrap-server", f"127.0.0.1:{broker.ssl_port}",
                                  "--command-config", str(alice_properties)])
    assert result.exit_code != 0 and "CLUSTER_AUTHORIZATION_FAILED" in result.output


# ---- durability and the default ------------------------------------------------------------------

def test_acls_survive_a_broker_restart(certs, tmp_path):
    ssl_port = free_port()
    with BrokerProcess(data_dir=tmp_path / "data", properties=acl_properties(certs, ssl_port)) as process:
        process.ssl_port = ssl_port
        admin = AdminClient(config(process, certs, "admin"))
        create_topic(admin, "kept")
        grant(admin, acl("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "kept"))
        process.restart(hard=True)  # SIGKILL: what CreateAcls acknowledged must be on disk
        admin = AdminClient(config(process, certs, "admin"))
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        assert [str(b) for b in admin.describe_acls(everything).result(TIMEOUT)] == \
            [str(acl("User:alice", AclOperation.WRITE, ResourceType.TOPIC, "kept"))]
        assert produce(process, certs, "alice", "kept") == [None] * 3
        assert {e.code() for e in produce(process, certs, "bob", "kept")} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
        process.terminate()
        # A damaged ACL file stops the broker from starting: never an empty set (everyone locked out, or
        # with allow.everyone.if.no.acl.found everyone let in).
        (tmp_path / "data" / "acls.json").write_bytes(b'{"version":1,"resources":[{"resourceType":"Topic"')
        with pytest.raises(RuntimeError, match="acls.json"):
            process.start()


def test_without_an_authorizer_acl_requests_say_security_disabled(tmp_path):
    with BrokerProcess(data_dir=tmp_path / "data") as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        binding = acl("User:alice", AclOperation.READ, ResourceType.TOPIC, "t")
        assert error_of(admin.create_acls([binding])[binding]) == KafkaError.SECURITY_DISABLED
        assert not (tmp_path / "data" / "acls.json").exists()
