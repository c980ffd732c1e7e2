"""Offset retention for consumer groups (KIP-848) on a real broker process: the offsets of an empty
consumer group expire (Kafka 4.x: counted from each commit, or an explicit v2-4 expiry), and the group,
left with none, is deleted -- its records tombstoned, so it stays gone after a SIGKILL and restart --
while an empty group whose offsets are still within retention is kept."""

from __future__ import annotations

import confluent_kafka
from confluent_kafka import TopicPartition

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.process import BrokerProcess
from eoslog.testing.wait import wait_until
from tests.groups.conftest import create_topic
from tests.groups.consumer_protocol.conftest import CONSUMER_GROUP_PROPERTIES

TOPIC = "expiring"


def describe(bootstrap: str, group: str):
    with BrokerConnection.from_bootstrap(bootstrap) as conn:
        return conn.request(69, 1, messages.ConsumerGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False)).groups[0]


def committed(bootstrap: str, group: str) -> list[int]:
    with BrokerConnection.from_bootstrap(bootstrap) as conn:
        fetched = conn.request(9, 7, messages.OffsetFetchRequest(
            group_id=group, topics=[messages.OffsetFetchRequest.OffsetFetchRequestTopic(
                name=TOPIC, partition_indexes=[0, 1])], require_stable=False))
    return [p.committed_offset for t in fetched.topics for p in t.partitions]


def listed(bootstrap: str) -> set[str]:
    with BrokerConnection.from_bootstrap(bootstrap) as conn:
        groups = conn.request(16, 5, messages.ListGroupsRequest(states_filter=[], types_filter=[])).groups
    return {g.group_id for g in groups}


def consume_commit_and_leave(bootstrap: str, group: str) -> None:
    """A real KIP-848 client joins, commits offset 5 on both partitions and leaves: an Empty group."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "group.protocol": "consumer", "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])

        def assigned() -> bool:
            consumer.poll(0.1)
            return len(consumer.assignment()) == 2

        wait_until(assigned, 15, f"{group} holding both partitions")
        consumer.commit(offsets=[TopicPartition(TOPIC, p, 5) for p in (0, 1)], asynchronous=False)
    finally:
        consumer.close()
    wait_until(lambda: describe(bootstrap, group).group_state == "Empty", 10, f"{group} empty")


def test_an_expired_empty_consumer_group_is_deleted_and_stays_deleted(tmp_path):
    properties = {**CONSUMER_GROUP_PROPERTIES, "offsets.retention.check.interval.ms": "200"}
    with BrokerProcess(data_dir=tmp_path / "data", properties=properties) as broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, TOPIC, 2)
        consume_commit_and_leave(bootstrap, "expiry-gone")
        consume_commit_and_leave(bootstrap, "expiry-kept")
        assert committed(bootstrap, "expiry-gone") == [5, 5]
        # An admin's commit into the empty group with a v4 retention of 300 ms: these offsets are due
        # then, where the others count offsets.retention.minutes (7 days) from their commit.
        with BrokerConnection.from_bootstrap(bootstrap) as conn:
            commit = messages.OffsetCommitRequest(
                group_id="expiry-gone", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=300,
                topics=[messages.OffsetCommitRequest.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                    messages.OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=6, committed_leader_epoch=-1, committed_metadata="")
                    for p in (0, 1)])])
            assert all(p.error_code == 0 for t in conn.request(8, 4, commit).topics for p in t.partitions)
        # (Dead, so described as not found, from the expiry until its tombstones are durable; then gone.)
        wait_until(lambda: describe(bootstrap, "expiry-gone").error_code == ErrorCode.GROUP_ID_NOT_FOUND
                   and committed(bootstrap, "expiry-gone") == [-1, -1], 10, "the expired empty group deleted")
        assert "expiry-gone" not in listed(bootstrap)
        kept = describe(bootstrap, "expiry-kept")
        assert kept.error_code == 0 and kept.group_state == "Empty"
        assert committed(bootstrap, "expiry-kept") == [5, 5]

        broker.kill()
        broker.start()
        # The tombstones were durable: nothing of the deleted group comes back from the log.
        assert describe(bootstrap, "expiry-gone").error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert committed(bootstrap, "expiry-gone") == [-1, -1]
        assert listed(bootstrap) >= {"expiry-kept"} and "expiry-gone" not in listed(bootstrap)
        assert committed(bootstrap, "expiry-kept") == [5, 5]
