"""Group admin APIs through the clients' admin interfaces (OffsetFetch, OffsetCommit, ListGroups,
DescribeGroups, DeleteGroups, OffsetDelete), transactional offsets, a restart, and the groups CLI."""

from __future__ import annotations

import confluent_kafka
import pytest
from click.testing import CliRunner
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until
from eoslog.tools.groups_cli import OFFSET_FETCH, describe_group, groups_group

TOPIC = "orders"


@pytest.fixture
def embedded(tmp_path):
    broker = EmbeddedBroker(data_dir=tmp_path / "data")
    broker.start()
    yield broker
    broker.stop()


def setup_topic(bootstrap: str, partitions: int = 3, count: int = 60) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(TOPIC, str(i).encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    return admin


def consumer(bootstrap: str, group: str, **extra) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, **extra})


def consume(c: confluent_kafka.Consumer, count: int) -> list:
    got: list = []
    wait_until(lambda: got.extend(m for m in c.consume(100, 0.2) if not m.error()) or len(got) >= count,
               30, f"{count} messages")
    return got


def group_offsets(admin: AdminClient, group: str, partitions: int = 3) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def listed(admin: AdminClient) -> dict[str, ConsumerGroupState]:
    return {g.group_id: g.state for g in admin.list_consumer_groups().result(30).valid}


def test_admin_apis_on_a_live_and_an_empty_group(embedded):
    bootstrap = embedded.bootstrap
    admin = setup_topic(bootstrap)
    c = consumer(bootstrap, "billing")
    c.subscribe([TOPIC])
    consume(c, 60)
    c.commit(asynchronous=False)

    # ListGroups and DescribeGroups of a Stable group with one member owning every partition.
    assert listed(admin) == {"billing": ConsumerGroupState.STABLE}
    described = admin.describe_consumer_groups(["billing"])["billing"].result(30)
    assert described.state == ConsumerGroupState.STABLE and described.partition_assignor == "range"
    [member] = described.members
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2]
    assert member.host.startswith("/127.0.0.1")

    # OffsetFetch: what the consumer committed.
    assert group_offsets(admin, "billing") == {0: 20, 1: 20, 2: 20}

    # OffsetDelete (kafka-python's admin): refused for a topic the live group consumes.
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupSubscribedToTopicError, NoError, NonEmptyGroupError

    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        answer = kadmin.delete_group_offsets("billing", [KTopicPartition(TOPIC, 0)])
        assert answer == {KTopicPartition(TOPIC, 0): GroupSubscribedToTopicError}
        # DeleteGroups: refused while the group has a member.
        assert dict(kadmin.delete_groups(["billing"])) == {"billing": NonEmptyGroupError.__name__}

        c.close()  # LeaveGroup: the group is Empty now
        assert listed(admin) == {"billing": ConsumerGroupState.EMPTY}

        # OffsetCommit from an admin (no member): allowed on an Empty group.
        request = ConsumerGroupTopicPartitions("billing", [TopicPartition(TOPIC, 1, 7)])
        admin.alter_consumer_group_offsets([request])["billing"].result(30)
        assert group_offsets(admin, "billing") == {0: 20, 1: 7, 2: 20}

        # OffsetDelete of an Empty group's offsets.
        assert kadmin.delete_group_offsets("billing", [KTopicPartition(TOPIC, 0)]) == \
            {KTopicPartition(TOPIC, 0): NoError}
        assert group_offsets(admin, "billing") == {0: -1001, 1: 7, 2: 20}  # -1001: librdkafka's "none"
    finally:
        kadmin.close()

    # The state survives a restart (everything is in __consumer_offsets).
    embedded.stop()
    embedded.start()
    bootstrap = embedded.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert listed(admin) == {"billing": ConsumerGroupState.EMPTY}
    assert group_offsets(admin, "billing") == {0: -1001, 1: 7, 2: 20}

    # DeleteGroups of the Empty group; afterwards it is gone, offsets too, also after a restart.
    admin.delete_consumer_groups(["billing"])["billing"].result(30)
    assert listed(admin) == {}
    with pytest.raises(KafkaException) as refused:
        admin.delete_consumer_groups(["billing"])["billing"].result(30)
    assert refused.value.args[0].code() == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND
    embedded.stop()
    embedded.start()
    admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
    assert listed(admin) == {}
    assert group_offsets(admin, "billing") == {0: -1001, 1: -1001, 2: -1001}


def fetch_stable(bootstrap: str, group: str, require_stable: bool) -> dict[int, tuple[int, int]]:
    """Raw OffsetFetch v7: {partition: (offset, error code)}."""
    Topic = messages.OffsetFetchRequest.OffsetFetchRequestTopic
    with BrokerConnection.from_bootstrap(bootstrap) as conn:
        resp = conn.request(OFFSET_FETCH, 7, messages.OffsetFetchRequest(
            group_id=group, topics=[Topic(name=TOPIC, partition_indexes=[0, 1, 2])], require_stable=require_stable))
    assert resp.error_code == 0
    return {p.partition_index: (p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions}


def test_transactional_offsets_wait_for_the_marker_and_survive_a_restart(embedded):
    bootstrap = embedded.bootstrap
    setup_topic(bootstrap)
    group = "pipeline"
    c = consumer(bootstrap, group)
    metadata = c.consumer_group_metadata()
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-1"})
    producer.init_transactions(30)
    unstable = int(ErrorCode.UNSTABLE_OFFSET_COMMIT)

    # Committed transaction: offsets invisible (and unstable) until the COMMIT marker.
    producer.begin_transaction()
    producer.produce(TOPIC, b"out", partition=0)
    producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 11), TopicPartition(TOPIC, 1, 12)], metadata, 30)
    assert fetch_stable(bootstrap, group, require_stable=True) == {0: (-1, unstable), 1: (-1, unstable), 2: (-1, 0)}
    assert fetch_stable(bootstrap, group, require_stable=False) == {0: (-1, 0), 1: (-1, 0), 2: (-1, 0)}
    producer.commit_transaction(30)
    wait_until(lambda: fetch_stable(bootstrap, group, True) == {0: (11, 0), 1: (12, 0), 2: (-1, 0)}, 10,
               "the committed transaction's offsets")

    # Aborted transaction: its offsets are dropped.
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 40), TopicPartition(TOPIC, 2, 41)], metadata, 30)
    producer.abort_transaction(30)
    wait_until(lambda: fetch_stable(bootstrap, group, True) == {0: (11, 0), 1: (12, 0), 2: (-1, 0)}, 10,
               "the aborted transaction's offsets to vanish")

    # A transaction left open: still pending after a restart (loaded without its marker).
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(TOPIC, 2, 5)], metadata, 30)
    c.close()
    embedded.stop()  # the producer never ends its transaction
    embedded.start()
    bootstrap = embedded.bootstrap
    assert fetch_stable(bootstrap, group, require_stable=True) == {0: (11, 0), 1: (12, 0), 2: (-1, unstable)}
    # The same transactional id fences the old producer; its open transaction is aborted.
    fresh = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-1"})
    fresh.init_transactions(30)
    wait_until(lambda: fetch_stable(bootstrap, group, True) == {0: (11, 0), 1: (12, 0), 2: (-1, 0)}, 10,
               "the open transaction's offsets to be aborted")


def test_groups_cli_shows_members_assignments_offsets_and_lag(embedded):
    bootstrap = embedded.bootstrap
    setup_topic(bootstrap, partitions=3, count=60)
    c = consumer(bootstrap, "reporting", **{"client.id": "report-client"})
    c.subscribe([TOPIC])
    consume(c, 60)
    c.commit(offsets=[TopicPartition(TOPIC, 0, 15), TopicPartition(TOPIC, 1, 20)], asynchronous=False)
    # An open transaction on partition 2: its records are past the last stable offset, so not lag.
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "cli-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(5):
        producer.produce(TOPIC, b"pending", partition=2)
    producer.flush(30)
    try:
        runner = CliRunner()
        listed_out = runner.invoke(groups_group, ["list", "-b", bootstrap])
        assert listed_out.exit_code == 0, listed_out.output
        assert "reporting" in listed_out.output and "Stable" in listed_out.output

        with BrokerConnection.from_bootstrap(bootstrap) as conn:
            view = describe_group(conn, "reporting")
        [member] = view.members
        assert member.client_id == "report-client" and member.assignment == {TOPIC: [0, 1, 2]}
        rows = {p.partition: (p.committed_offset, p.last_stable_offset, p.lag) for p in view.partitions}
        assert rows == {0: (15, 20, 5), 1: (20, 20, 0), 2: (-1, 20, None)}

        described = runner.invoke(groups_group, ["describe", "reporting", "-b", bootstrap])
        assert described.exit_code == 0, described.output
        assert "report-client" in described.output and f"{TOPIC}:0,1,2" in described.output
        assert "total lag: 5" in described.output
        missing = runner.invoke(groups_group, ["describe", "nobody", "-b", bootstrap, "--json"])
        assert missing.exit_code == 1 and "group nobody not found" in missing.output  # not "Dead, 0 members"
    finally:
        producer.abort_transaction(30)
        c.close()
