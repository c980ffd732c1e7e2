"""Differences from Apache Kafka 4.x that real clients hit (issue 41), each driven by confluent-kafka
against one embedded broker shared by the module.

- A KIP-848 consumer (``group.protocol=consumer``) that uses ``assign()`` never joins, yet librdkafka
  gives it a member id of its own (KIP-1082): its commit is OffsetCommit v9 with member epoch -1 and a
  non-empty member id, which Kafka accepts while the group has no members.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("compat")) as running:
        yield running


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None,
                 replica_assignment=None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if replica_assignment is not None:
        topic = NewTopic(name, len(replica_assignment), replica_assignment=replica_assignment, config=config or {})
    else:
        topic = NewTopic(name, partitions, 1, config=config or {})
    admin.create_topics([topic])[name].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes], key: bytes | None = b"k") -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value, key=key)
    assert producer.flush(30) == 0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---- item 1: a KIP-848 consumer with assign() commits -------------------------------------------


def test_consumer_protocol_assign_then_commit(broker):
    topic, group = unique("assigned"), unique("assign-group")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"a", b"b", b"c"])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "group.protocol": "consumer", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got = []
        while len(got) < 3:
            message = consumer.poll(10)
            assert message is not None, f"only {len(got)} of 3 records came"
            assert message.error() is None, message.error()
            got.append(message.value())
        assert got == [b"a", b"b", b"c"]
        committed = consumer.commit(asynchronous=False)
        assert [(tp.topic, tp.partition, tp.offset, tp.error) for tp in committed] == [(topic, 0, 3, None)]
        assert consumer.committed([TopicPartition(topic, 0)], 10)[0].offset == 3
    finally:
        consumer.close()


def test_consumer_protocol_assign_commit_refused_while_the_group_has_members(broker):
    """Kafka's rule has two halves: while a member of the group holds the subscription, a commit from
    outside the group (epoch -1) is refused with UNKNOWN_MEMBER_ID."""
    topic, group = unique("shared"), unique("busy-group")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"x"])
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    outsider = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "group.protocol": "consumer", "enable.auto.commit": False})
    try:
        member.subscribe([topic])
        message = member.poll(15)
        assert message is not None and message.error() is None
        outsider.assign([TopicPartition(topic, 0, 1)])
        with pytest.raises(KafkaException) as refused:
            outsider.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        assert refused.value.args[0].name() == "UNKNOWN_MEMBER_ID"
    finally:
        outsider.close()
        member.close()


# ---- item 2: a group's regular expressions are resolved for the whole group -----------------------


def test_two_consumer_protocol_members_on_one_regex_share_new_topics_without_a_revocation(broker):
    import time

    prefix = unique("rx")
    group = unique("regex-group")
    events: dict[str, list] = {"a": [], "b": []}
    consumers = {}
    for name in ("a", "b"):
        consumers[name] = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                    "group.protocol": "consumer", "enable.auto.commit": False,
                                    "topic.metadata.refresh.interval.ms": 500})

        def record(kind, name=name):
            return lambda _consumer, partitions: events[name].append(
                (kind, sorted((p.topic, p.partition) for p in partitions)))

        consumers[name].subscribe([f"^{prefix}-.*"], on_assign=record("assign"), on_revoke=record("revoke"))

    def held(name) -> set:
        out = set()
        for kind, partitions in events[name]:
            out = out | set(partitions) if kind == "assign" else out - set(partitions)
        return out

    def poll_until(condition, what: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {events}"
            for consumer in consumers.values():
                consumer.poll(0.1)

    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

        def members() -> int:
            (future,) = admin.describe_consumer_groups([group]).values()
            try:
                return len(future.result(10).members)
            except KafkaException as exc:  # not made yet: no member has heartbeated
                assert exc.args[0].name() == "GROUP_ID_NOT_FOUND"
                return 0

        poll_until(lambda: members() == 2, "both members in the group")
        create_topic(broker.bootstrap, f"{prefix}-1", partitions=2)
        create_topic(broker.bootstrap, f"{prefix}-2", partitions=2)
        poll_until(lambda: len(held("a")) == 2 and len(held("b")) == 2, "two partitions each")
        assert held("a") | held("b") == {(f"{prefix}-{t}", p) for t in (1, 2) for p in (0, 1)}
        revoked = [(n, partitions) for n in events for kind, partitions in events[n] if kind == "revoke" and partitions]
        assert revoked == [], events
    finally:
        for consumer in consumers.values():
            consumer.close()


# ---- item 3: per-record validation on Produce (KIP-467) --------------------------------------------


def deliveries(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]], **kw) -> list:
    """Produces ``records`` in one batch (a long linger, one flush) and returns each delivery's error."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "enable.idempotence": False,
                         "retries": 0, **kw})
    errors: list = [None] * len(records)

    def report(index):
        def done(error, _message):
            errors[index] = error if error is not None else "delivered"
        return done

    for i, (key, value) in enumerate(records):
        producer.produce(topic, value, key=key, on_delivery=report(i))
    assert producer.flush(30) == 0
    return errors


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("watermarks")})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
    finally:
        consumer.close()


def test_keyless_record_on_a_compacted_topic_fails_the_whole_batch(broker):
    topic = unique("compacted")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    errors = deliveries(broker.bootstrap, topic, [(b"k1", b"a"), (None, b"b"), (b"k3", b"c")])
    assert [e if isinstance(e, str) else e.name() for e in errors] == ["INVALID_RECORD"] * 3, errors
    assert end_offset(broker.bootstrap, topic) == 0  # nothing of the batch was written
    assert deliveries(broker.bootstrap, topic, [(b"k1", b"a"), (b"k2", b"b")]) == ["delivered"] * 2


def _produce_raw(broker, topic: str, records, version: int = 9, **batch):
    from eoslog.client.connection import BrokerConnection
    from eoslog.protocol import messages
    from eoslog.records.builder import SimpleRecord, build_batch

    p = messages.ProduceRequest
    data = build_batch([SimpleRecord(key, value, ()) for key, value in records], **batch)
    with BrokerConnection.from_bootstrap(broker.bootstrap) as wire:
        response = wire.request(0, version, p(acks=-1, timeout_ms=10000, topic_data=[p.TopicProduceData(
            name=topic, partition_data=[p.PartitionProduceData(index=0, records=data)])]))
    (topic_response,) = response.responses
    (partition,) = topic_response.partition_responses
    return partition


def test_produce_response_carries_kip_467_record_errors(broker):
    topic = unique("compacted-raw")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    partition = _produce_raw(broker, topic, [(b"k", b"a"), (None, b"b"), (None, b"c")])
    reason = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert partition.error_code == 87  # INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
        (1, reason), (2, reason)]
    assert partition.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the "
        f"first three errors at most: [RecordError(batchIndex=1, message='{reason}'), "
        f"RecordError(batchIndex=2, message='{reason}')]")
    assert partition.base_offset == -1 and partition.log_start_offset == 0


def test_timestamps_out_of_the_topic_bounds_are_refused(broker):
    """Kafka 4.x refuses a CreateTime record more than message.timestamp.after.max.ms (an hour by default)
    ahead of the broker's clock, or more than message.timestamp.before.max.ms behind it."""
    import time

    now = int(time.time() * 1000)
    topic = unique("timestamps")
    create_topic(broker.bootstrap, topic)
    producer_errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    for timestamp in (now + 2 * 3600_000, now + 1800_000, now - 30 * 86400_000):
        producer.produce(topic, b"v", key=b"k", timestamp=timestamp,
                         on_delivery=lambda error, _m: producer_errors.append(error and error.name()))
        producer.flush(30)
    assert producer_errors == ["INVALID_TIMESTAMP", None, None]

    strict = unique("timestamps-strict")
    create_topic(broker.bootstrap, strict, config={"message.timestamp.before.max.ms": "60000",
                                                   "message.timestamp.after.max.ms": "60000"})
    partition = _produce_raw(broker, strict, [(b"k", b"old"), (b"k", b"fine")], base_timestamp=now - 3600_000)
    assert partition.error_code == 32  # INVALID_TIMESTAMP
    assert partition.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in partition.record_errors] == [0, 1]
    message = partition.record_errors[0].batch_index_error_message
    assert message.startswith(f"Timestamp {now - 3600_000} of message with offset 0 is out of range. "
                              "The timestamp should be within ["), message
    low, high = (int(x) for x in message.rsplit("[", 1)[1].rstrip("]").split(", "))
    assert high - low == 120_000 and abs(low + 60_000 - now) < 60_000
    assert _produce_raw(broker, strict, [(b"k", b"now")]).error_code == 0


def test_a_producer_may_not_set_log_append_time(broker):
    topic = unique("append-time")
    create_topic(broker.bootstrap, topic, config={"message.timestamp.type": "LogAppendTime"})
    partition = _produce_raw(broker, topic, [(b"k", b"v")], timestamp_type=1)
    assert partition.error_code == 32
    (error,) = partition.record_errors
    assert error.batch_index == 0 and error.batch_index_error_message.startswith(
        "Invalid timestamp type in message DefaultRecord(offset=0, timestamp=")
    assert error.batch_index_error_message.endswith(
        "key=1 bytes, value=1 bytes). Producer should not set timestamp type to LogAppendTime.")
    assert _produce_raw(broker, topic, [(b"k", b"v")]).error_code == 0


def test_batch_rules_of_kafka_log_validator(broker):
    topic = unique("batch-rules")
    create_topic(broker.bootstrap, topic)
    shifted = _produce_raw(broker, topic, [(b"k", b"v")], base_offset=5)
    assert (shifted.error_code, shifted.error_message) == (
        87, f"The baseOffset of the record batch in the append to {topic}-0 should be 0, but it is 5")
    unsequenced = _produce_raw(broker, topic, [(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=-1)
    assert (unsequenced.error_code, unsequenced.error_message) == (
        87, f"Invalid sequence number -1 in record batch with producerId 7 in topic partition {topic}-0")
    assert shifted.record_errors == [] and unsequenced.record_errors == []
    assert end_offset(broker.bootstrap, topic) == 0


def test_record_errors_before_produce_v8_are_the_error_code_alone(broker):
    topic = unique("compacted-v7")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    partition = _produce_raw(broker, topic, [(None, b"v")], version=7)
    assert partition.error_code == 87 and partition.record_errors == [] and partition.error_message is None


# ---- item 4: every Kafka broker property is a broker config ----------------------------------------


def _alter_broker(bootstrap: str, name: str, value: str | None, broker_id: str = "0", incremental: bool = True):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, broker_id,
                              incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])
    if incremental:
        (future,) = admin.incremental_alter_configs([resource]).values()
    else:
        resource = ConfigResource(ResourceType.BROKER, broker_id, set_config={name: value})
        (future,) = admin.alter_configs([resource]).values()
    return future.result(15)


def _describe_broker(bootstrap: str, broker_id: str = "0") -> dict:
    from confluent_kafka.admin import ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, broker_id)]).values()
    return future.result(15)


def _documentation(bootstrap: str, name: str) -> tuple[str | None, str | None]:
    """The documentation DescribeConfigs v4 gives for a broker config, with and without asking for it."""
    from eoslog.client.connection import BrokerConnection
    from eoslog.protocol import messages

    r = messages.DescribeConfigsRequest
    found = []
    with BrokerConnection.from_bootstrap(bootstrap) as wire:
        for asked in (True, False):
            response = wire.request(32, 4, r(include_synonyms=False, include_documentation=asked, resources=[
                r.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=[name])]))
            (result,) = response.results
            (entry,) = result.configs
            found.append(entry.documentation)
    return tuple(found)


def test_a_kafka_broker_property_eoslog_does_not_use_is_stored_and_described(broker):
    from confluent_kafka.admin import ConfigSource

    name = "sasl.kerberos.min.time.before.relogin"
    _alter_broker(broker.bootstrap, name, "120000")
    entry = _describe_broker(broker.bootstrap)[name]
    assert entry.value == "120000" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not entry.is_read_only
    assert _documentation(broker.bootstrap, name) == (
        "An Apache Kafka broker config: eoslog keeps its value but does not use it.", None)
    _alter_broker(broker.bootstrap, name, None)  # DELETE
    assert name not in _describe_broker(broker.bootstrap)
    # the older whole-set AlterConfigs too
    _alter_broker(broker.bootstrap, "log.cleaner.threads", "2", incremental=False)
    assert _describe_broker(broker.bootstrap)["log.cleaner.threads"].value == "2"
    _alter_broker(broker.bootstrap, "log.cleaner.threads", None)


def _alter_default_level(bootstrap: str, name: str, value: str | None) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of the cluster-wide default resource ("", which confluent-kafka cannot name)."""
    from eoslog.client.connection import BrokerConnection
    from eoslog.protocol import messages

    r = messages.IncrementalAlterConfigsRequest
    op = 0 if value is not None else 1
    with BrokerConnection.from_bootstrap(bootstrap) as wire:
        response = wire.request(44, 1, r(validate_only=False, resources=[r.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[r.AlterableConfig(name=name, config_operation=op,
                                                                          value=value)])]))
    (result,) = response.responses
    return result.error_code, result.error_message


def test_kafka_broker_properties_at_the_cluster_wide_level(broker):
    assert _alter_default_level(broker.bootstrap, "log.cleaner.threads", "2") == (0, None)
    entry = _describe_broker(broker.bootstrap)["log.cleaner.threads"]
    assert entry.value == "2" and entry.source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert _alter_default_level(broker.bootstrap, "log.cleaner.threads", None) == (0, None)
    code, message = _alter_default_level(broker.bootstrap, "sasl.kerberos.service.name", "kafka")
    assert code == 42 and message.endswith("Cannot update these configs at default cluster level, broker id "
                                           "must be specified: sasl.kerberos.service.name")  # INVALID_REQUEST


def test_broker_config_typos_and_kafka_read_only_properties_are_still_refused(broker):
    with pytest.raises(KafkaException) as typo:
        _alter_broker(broker.bootstrap, "sasl.kerberos.min.time.before.relogn", "1")
    assert typo.value.args[0].name() == "INVALID_CONFIG"
    assert "sasl.kerberos.min.time.before.relogin" in typo.value.args[0].str()
    with pytest.raises(KafkaException) as read_only:  # Kafka: "Cannot update these configs dynamically"
        _alter_broker(broker.bootstrap, "sasl.oauthbearer.scope", "x")
    assert read_only.value.args[0].name() == "INVALID_REQUEST"
    with pytest.raises(KafkaException) as bad_value:
        _alter_broker(broker.bootstrap, "sasl.kerberos.min.time.before.relogin", "soon")
    assert bad_value.value.args[0].name() == "INVALID_CONFIG"


# ---- item 5: CreateTopics with a manual replica assignment on a single node ------------------------


def _create_refusal(bootstrap: str, topic) -> KafkaError:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([topic])[topic.topic].result(30)
    return refused.value.args[0]


def test_a_manual_assignment_naming_this_broker_creates_the_topic(broker):
    from confluent_kafka.admin import NewPartitions

    create_topic(broker.bootstrap, "manual-1", replica_assignment=[[0], [0]])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.list_topics("manual-1", timeout=10).topics["manual-1"]
    assert {p: m.replicas for p, m in described.partitions.items()} == {0: [0], 1: [0]}
    admin.create_partitions([NewPartitions("manual-1", 3, replica_assignment=[[0]])])["manual-1"].result(30)
    assert len(admin.list_topics("manual-1", timeout=10).topics["manual-1"].partitions) == 3
    produce(broker.bootstrap, "manual-1", [b"a"])


@pytest.mark.parametrize(("assignment", "message"), [
    ([[1]], "The manual partition assignment includes broker 1, but no such broker is registered."),
    ([[0, 0]], "The manual partition assignment includes the broker 0 more than once."),
])
def test_a_manual_assignment_is_checked_as_kafka_checks_it(broker, assignment, message):
    error = _create_refusal(broker.bootstrap, NewTopic("manual-bad", len(assignment), replica_assignment=assignment))
    assert (error.name(), error.str()) == ("INVALID_REPLICA_ASSIGNMENT", f"INVALID_REPLICA_ASSIGNMENT: {message}")


# ---- item 6: protocol versions Kafka 4.0 dropped (KIP-896) that maintained tools still send ---------


def test_list_offsets_v0_from_a_client_forced_to_kafka_0_9(broker):
    """librdkafka without version negotiation, as for a 0.9 broker: its watermark query is ListOffsets v0
    (what Sarama sends whatever it is configured for)."""
    topic = f"old-offsets-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"a", b"b", b"c"])
    old = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "old", "api.version.request": False,
                    "broker.version.fallback": "0.9.0"})
    try:
        assert old.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 3)
    finally:
        old.close()


def test_list_offsets_v0_from_kafka_python_pinned_to_0_10_0(broker):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaPythonPartition

    topic = f"old-offsets-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [b"a", b"b"])
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 0))
    try:
        partition = KafkaPythonPartition(topic, 0)
        assert consumer.end_offsets([partition]) == {partition: 2}
        assert consumer.beginning_offsets([partition]) == {partition: 0}
    finally:
        consumer.close()


def test_a_kafka_python_client_pinned_to_0_10_0_produces_and_consumes(broker):
    """Produce v2 with magic 1 message sets and Fetch v2, converted up and down as Kafka 3.9 did; a
    current client reads what the old one wrote, and the other way round."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPythonPartition

    topic = f"old-format-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic)
    old = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 0), compression_type="gzip",
                        linger_ms=50)
    try:
        sent = [old.send(topic, key=b"k%d" % i, value=b"old %d" % i, timestamp_ms=1_700_000_000_000 + i)
                for i in range(5)]
        offsets = [future.get(timeout=15).offset for future in sent]
    finally:
        old.close()
    assert offsets == [0, 1, 2, 3, 4]
    produce(broker.bootstrap, topic, [b"new"])  # a v2 batch, read back below as magic 1

    current = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "new-reader", "enable.auto.commit": False})
    try:
        current.assign([TopicPartition(topic, 0, 0)])
        seen = []
        while len(seen) < 6:
            message = current.poll(10)
            assert message is not None, seen
            assert message.error() is None
            seen.append((message.offset(), message.key(), message.value(), message.timestamp()[1]))
    finally:
        current.close()
    assert seen[:5] == [(i, b"k%d" % i, b"old %d" % i, 1_700_000_000_000 + i) for i in range(5)]
    assert seen[5][:3] == (5, b"k", b"new")

    reader = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 0), consumer_timeout_ms=10_000)
    try:
        reader.assign([KafkaPythonPartition(topic, 0)])
        reader.seek_to_beginning()
        read = [(m.offset, m.key, m.value, m.timestamp) for m, _ in zip(reader, range(6), strict=False)]
    finally:
        reader.close()
    assert read[:5] == [(i, b"k%d" % i, b"old %d" % i, 1_700_000_000_000 + i) for i in range(5)]
    assert read[5][:3] == (5, b"k", b"new")


def test_librdkafka_forced_to_kafka_0_9_produces_and_consumes(broker):
    """Produce v1 and Fetch v1 with magic 0 messages (no timestamps), as librdkafka talks to a 0.9 broker."""
    topic = f"old-format-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic)
    fallback = {"bootstrap.servers": broker.bootstrap, "api.version.request": False,
                "broker.version.fallback": "0.9.0"}
    producer = Producer({**fallback, "compression.codec": "snappy"})
    delivered = []
    for i in range(3):
        producer.produce(topic, b"v%d" % i, key=b"k", on_delivery=lambda err, msg: delivered.append(
            (err, msg.offset())))
    assert producer.flush(30) == 0
    assert delivered == [(None, 0), (None, 1), (None, 2)]
    consumer = Consumer({**fallback, "group.id": "old-reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = []
        while len(seen) < 3:
            message = consumer.poll(10)
            assert message is not None, seen
            assert message.error() is None, message.error()
            seen.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    assert seen == [(i, b"k", b"v%d" % i) for i in range(3)]


def _committed_records(bootstrap: str, group: str) -> list:
    """The group's OffsetCommitValues in __consumer_offsets, in log order."""
    from eoslog.coordinator.group.log_format import OffsetCommitKey, decode_key, decode_offset_commit_value

    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"].partitions
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                       "enable.auto.commit": False, "enable.partition.eof": True})
    found = []
    try:
        reader.assign([TopicPartition("__consumer_offsets", p, 0) for p in partitions])
        ended = set()
        while len(ended) < len(partitions):
            message = reader.poll(10)
            assert message is not None
            if message.error() is not None:
                ended.add(message.partition())
                continue
            key = decode_key(message.key())
            if isinstance(key, OffsetCommitKey) and key.group == group and message.value() is not None:
                found.append((key.topic, key.partition, decode_offset_commit_value(message.value())))
    finally:
        reader.close()
    return found


def test_offset_commit_v1_keeps_the_clients_commit_timestamp(broker):
    """OffsetCommit v1 (what librdkafka sends when told its broker is 0.8.2): stored with the commit time
    the client gave, or the coordinator's clock for -1; read back with OffsetFetch."""
    from eoslog.client.connection import BrokerConnection
    from eoslog.protocol import messages

    topic, group = f"v1-commit-{uuid.uuid4().hex[:6]}", f"v1-group-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=2)
    r = messages.OffsetCommitRequest
    with BrokerConnection.from_bootstrap(broker.bootstrap) as wire:
        response = wire.request(8, 1, r(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            r.OffsetCommitRequestTopic(name=topic, partitions=[
                r.OffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                               commit_timestamp=1_600_000_000_000, committed_metadata="old"),
                r.OffsetCommitRequestPartition(partition_index=1, committed_offset=9, commit_timestamp=-1,
                                               committed_metadata=None)])]))
    assert [(p.partition_index, p.error_code) for t in response.topics for p in t.partitions] == [(0, 0), (1, 0)]
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = reader.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    finally:
        reader.close()
    assert [(c.partition, c.offset) for c in committed] == [(0, 7), (1, 9)]
    stored = {partition: value for _, partition, value in _committed_records(broker.bootstrap, group)}
    assert (stored[0].commit_timestamp, stored[0].metadata) == (1_600_000_000_000, "old")
    assert stored[1].commit_timestamp > 1_700_000_000_000  # now, by the coordinator's clock


# ---- found by kafka-python's own integration suite (docs/clients.md) --------------------------------


def test_kafka_4_standard_authorizer_is_an_authorizer(tmp_path):
    """A Kafka 4.x server.properties names org.apache.kafka.metadata.authorizer.StandardAuthorizer: the
    broker starts with it and keeps ACLs (not SECURITY_DISABLED), as with Kafka's older names."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    properties = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                  "allow.everyone.if.no.acl.found": "true"}
    with EmbeddedBroker(data_dir=tmp_path / "data", properties=properties) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        binding = AclBinding(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        (created,) = admin.create_acls([binding]).values()
        created.result(15)
        found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL,
                                                     None, None, AclOperation.ANY, AclPermissionType.ANY)).result(15)
        assert found == [binding]


def test_a_reassignment_on_a_single_node_is_answered_as_kafka_answers_a_cluster_of_one(broker):
    """kafka-python's own suite moves a partition to [the one broker]: done, nothing moves. A cancellation
    finds no move in progress, and a target of another broker is refused with Kafka's words."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KafkaPythonPartition
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    topic = unique("reassign")
    create_topic(broker.bootstrap, topic)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        partition = KafkaPythonPartition(topic, 0)
        assert admin.alter_partition_reassignments({partition: [0]}) == {partition: None}
        # per-partition errors come back as error classes, not raised
        assert admin.alter_partition_reassignments({partition: None}) == {partition: NoReassignmentInProgressError}
        assert admin.alter_partition_reassignments({partition: [1]}) == {
            partition: InvalidReplicationAssignmentError}
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
    produce(broker.bootstrap, topic, [b"still served"])
