"""Share groups on the wire (keys 76, 78, 79, FindCoordinator key type 2, DeleteGroups, the GROUP config
resource): requests built by hand against an embedded broker, for the edge cases a client rarely sends.
Every wait is for a condition with a deadline."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.client.connection import BrokerConnection
from eoslog.coordinator.share.log_format import SharePartitionKey
from eoslog.coordinator.share.persister import LocalPersister
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.messages import (
    DeleteGroupsRequest,
    FindCoordinatorRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupHeartbeatRequest,
)
from eoslog.testing.embedded import EmbeddedBroker

HEARTBEAT, FETCH, ACKNOWLEDGE = 76, 78, 79
ACCEPT, RELEASE = 1, 2
PROPERTIES = {"group.share.min.record.lock.duration.ms": "1000"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("wire"), properties=PROPERTIES) as embedded:
        yield embedded


@pytest.fixture
def conn(broker):
    with BrokerConnection.from_bootstrap(broker.bootstrap) as connection:
        yield connection


def setup_group(bootstrap: str, records: int = 3, **configs: str) -> tuple[str, str]:
    """A one-partition topic with ``records`` records and a share group reading it from the earliest."""
    topic, group = "w-" + uuid.uuid4().hex[:8], "wg-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in {"share.auto.offset.reset": "earliest", **configs}.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    return topic, group


def heartbeat(conn, group: str, member_id: str, epoch: int, topics=None):
    return conn.request(HEARTBEAT, 1, ShareGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, rack_id=None, subscribed_topic_names=topics))


def join(conn, group: str, topic: str) -> tuple[str, int, uuid.UUID]:
    """A member with its assignment (the partition's state initialized first): (member id, epoch, topic id)."""
    member_id = uuid.uuid4().hex
    answer = heartbeat(conn, group, member_id, 0, [topic])
    assert answer.error_code == 0, answer
    deadline = time.monotonic() + 20
    while not (answer.assignment and answer.assignment.topic_partitions):
        assert time.monotonic() < deadline, "no assignment"
        time.sleep(0.05)
        answer = heartbeat(conn, group, member_id, answer.member_epoch)
        assert answer.error_code == 0, answer
    return member_id, answer.member_epoch, answer.assignment.topic_partitions[0].topic_id


def fetch(conn, group, member_id, epoch, topic_id, acks=(), max_wait_ms=0, version=2, forgotten=(), renew=False,
          max_records=500, mode=0):
    request = ShareFetchRequest(
        group_id=group, member_id=member_id, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
        max_bytes=1 << 20, max_records=max_records, batch_size=max_records, share_acquire_mode=mode,
        is_renew_ack=renew,
        topics=[ShareFetchRequest.FetchTopic(topic_id=topic_id, partitions=[ShareFetchRequest.FetchPartition(
            partition_index=0, partition_max_bytes=0, acknowledgement_batches=[
                ShareFetchRequest.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=[t])
                for f, la, t in acks])])] if topic_id is not None else [],
        forgotten_topics_data=[ShareFetchRequest.ForgottenTopic(topic_id=t, partitions=[0]) for t in forgotten])
    return conn.request(FETCH, version, request)


def acknowledge(conn, group, member_id, epoch, topic_id, acks):
    return conn.request(ACKNOWLEDGE, 2, ShareAcknowledgeRequest(
        group_id=group, member_id=member_id, share_session_epoch=epoch, is_renew_ack=False,
        topics=[ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic_id, partitions=[
            ShareAcknowledgeRequest.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                ShareAcknowledgeRequest.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=[t])
                for f, la, t in acks])])]))


def acquired(answer) -> list[tuple[int, int, int]]:
    assert answer.error_code == 0, answer
    return [(r.first_offset, r.last_offset, r.delivery_count)
            for t in answer.responses for p in t.partitions for r in p.acquired_records]


def partition_of(answer):
    return answer.responses[0].partitions[0]


def ack_error(answer) -> int:
    """A ShareAcknowledge answer's error for the one partition."""
    assert answer.error_code == 0, answer
    return partition_of(answer).error_code


def test_heartbeat_refusals(conn, broker):
    topic, group = setup_group(broker.bootstrap, records=0)
    assert heartbeat(conn, "no-such-" + group, uuid.uuid4().hex, 3).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    member_id, epoch, _ = join(conn, group, topic)
    assert heartbeat(conn, group, uuid.uuid4().hex, epoch).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(conn, group, member_id, epoch + 5).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert heartbeat(conn, group, "", 0, [topic]).error_code == ErrorCode.INVALID_REQUEST  # v1: the client names itself


def test_share_session_errors(conn, broker):
    topic, group = setup_group(broker.bootstrap)
    member_id, _, topic_id = join(conn, group, topic)
    assert fetch(conn, group, member_id, 4, topic_id).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    # opening a session cannot carry acknowledgements
    assert fetch(conn, group, member_id, 0, topic_id, acks=[(0, 0, ACCEPT)]).error_code == ErrorCode.INVALID_REQUEST
    assert [(0, 2, 1)] == acquired(fetch(conn, group, member_id, 0, topic_id))
    assert fetch(conn, group, member_id, 3, topic_id).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    # the wrong epoch changed nothing: epoch 1 acknowledges, the final epoch closes and gives back nothing
    answer = fetch(conn, group, member_id, 1, topic_id, acks=[(0, 2, ACCEPT)])
    assert answer.error_code == 0 and partition_of(answer).acknowledge_error_code == 0
    # ShareAcknowledge never opens a session, and checks the epoch as ShareFetch does
    assert acknowledge(conn, group, member_id, 0, topic_id, []).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert acknowledge(conn, group, member_id, 7, topic_id, []).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert acknowledge(conn, group, member_id, 2, topic_id, []).error_code == 0
    assert fetch(conn, group, member_id, -1, None).error_code == 0
    assert fetch(conn, group, member_id, 2, topic_id).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert acknowledge(conn, group, member_id, 3, topic_id, []).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_the_share_session_limit(tmp_path):
    with EmbeddedBroker(tmp_path, properties={"group.share.max.share.sessions": "1"}) as small:
        topic, group = setup_group(small.bootstrap)
        with BrokerConnection.from_bootstrap(small.bootstrap) as a, BrokerConnection.from_bootstrap(small.bootstrap) as b:
            first, _, topic_id = join(a, group, topic)
            second, _, _ = join(b, group, topic)
            assert fetch(a, group, first, 0, topic_id).error_code == 0
            assert fetch(b, group, second, 0, topic_id).error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
            assert fetch(a, group, first, -1, None).error_code == 0  # closing one makes room
            assert fetch(b, group, second, 0, topic_id).error_code == 0


def test_acknowledging_records_not_acquired(conn, broker):
    topic, group = setup_group(broker.bootstrap)
    member_id, _, topic_id = join(conn, group, topic)
    assert acquired(fetch(conn, group, member_id, 0, topic_id)) == [(0, 2, 1)]
    with BrokerConnection.from_bootstrap(broker.bootstrap) as other:
        stranger, _, _ = join(other, group, topic)
        assert fetch(other, group, stranger, 0, topic_id).error_code == 0
        # another member's records
        answer = acknowledge(other, group, stranger, 1, topic_id, [(0, 0, ACCEPT)])
        assert ack_error(answer) == ErrorCode.INVALID_RECORD_STATE
    # past what was handed out: refused whole, nothing accepted
    answer = acknowledge(conn, group, member_id, 1, topic_id, [(0, 5, ACCEPT)])
    assert ack_error(answer) != 0
    answer = acknowledge(conn, group, member_id, 2, topic_id, [(1, 1, ACCEPT)])
    assert ack_error(answer) == 0
    # accepted once: a second acknowledgement finds it no longer acquired (offset 0 still is, so the start
    # offset has not moved past it; below it the answer is the same, share/partition_state.py)
    answer = acknowledge(conn, group, member_id, 3, topic_id, [(1, 1, RELEASE)])
    assert ack_error(answer) == ErrorCode.INVALID_RECORD_STATE


def test_a_lock_run_out_cannot_be_acknowledged(conn, broker):
    topic, group = setup_group(broker.bootstrap, records=1, **{"share.record.lock.duration.ms": "1000"})
    member_id, _, topic_id = join(conn, group, topic)
    answer = fetch(conn, group, member_id, 0, topic_id)
    assert acquired(answer) == [(0, 0, 1)] and answer.acquisition_lock_timeout_ms == 1000
    with BrokerConnection.from_bootstrap(broker.bootstrap) as other:
        second, _, _ = join(other, group, topic)
        epoch, got, deadline = 0, [], time.monotonic() + 10
        while not got:  # the lock timer gives the record back; the other member's long poll takes it
            assert time.monotonic() < deadline, "the lock never ran out"
            got = acquired(fetch(other, group, second, epoch, topic_id, max_wait_ms=500))
            epoch += 1
        assert got == [(0, 0, 2)]
    answer = acknowledge(conn, group, member_id, 1, topic_id, [(0, 0, ACCEPT)])
    assert ack_error(answer) == ErrorCode.INVALID_RECORD_STATE


def test_a_late_accept_of_a_record_another_member_accepted_is_refused(conn, broker):
    """The queue verifier's accepted-twice (docs/verification.md): a member's lock runs out, another
    member takes the record and accepts it, which moves the start offset past it; the first member's late
    ACCEPT is INVALID_RECORD_STATE, as Kafka answers, never NONE (it was not the ACCEPT that counted)."""
    topic, group = setup_group(broker.bootstrap, records=1, **{"share.record.lock.duration.ms": "1000"})
    member_id, _, topic_id = join(conn, group, topic)
    assert acquired(fetch(conn, group, member_id, 0, topic_id)) == [(0, 0, 1)]
    with BrokerConnection.from_bootstrap(broker.bootstrap) as other:
        second, _, _ = join(other, group, topic)
        epoch, got, deadline = 0, [], time.monotonic() + 10
        while not got:
            assert time.monotonic() < deadline, "the lock never ran out"
            got = acquired(fetch(other, group, second, epoch, topic_id, max_wait_ms=500))
            epoch += 1
        assert got == [(0, 0, 2)]
        assert ack_error(acknowledge(other, group, second, epoch, topic_id, [(0, 0, ACCEPT)])) == 0
    persister = LocalPersister(lambda: broker.broker.coordinators)
    assert broker.call(persister.read_state_summary, group, topic_id, 0).state.start_offset == 1
    answer = acknowledge(conn, group, member_id, 1, topic_id, [(0, 0, ACCEPT)])
    assert ack_error(answer) == ErrorCode.INVALID_RECORD_STATE


def test_delete_groups_deletes_the_share_state(conn, broker):
    topic, group = setup_group(broker.bootstrap)
    member_id, _, topic_id = join(conn, group, topic)
    assert acquired(fetch(conn, group, member_id, 0, topic_id)) == [(0, 2, 1)]
    assert partition_of(fetch(conn, group, member_id, 1, topic_id, acks=[(0, 2, ACCEPT)])).acknowledge_error_code == 0
    # a group with a member is not deleted
    deleted = conn.request(42, 2, DeleteGroupsRequest(groups_names=[group]))
    assert deleted.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    assert heartbeat(conn, group, member_id, -1).error_code == 0
    persister = LocalPersister(lambda: broker.broker.coordinators)
    assert broker.call(persister.read_state_summary, group, topic_id, 0).state.start_offset == 3  # all accepted
    deleted = conn.request(42, 2, DeleteGroupsRequest(groups_names=[group]))
    assert deleted.results[0].error_code == 0
    # gone from the share coordinator too (DeleteShareGroupState before the group's tombstones)
    gone = broker.call(persister.read_state_summary, group, topic_id, 0)
    assert gone.error is ErrorCode.NONE and gone.state.start_offset == -1 and gone.state.state_epoch == 0
    # the same group id starts again: the accepted records are offered anew (earliest), once
    again, _, _ = join(conn, group, topic)
    assert acquired(fetch(conn, group, again, 0, topic_id, max_wait_ms=2000)) == [(0, 2, 1)]


def test_find_coordinator_of_a_share_partition(conn, broker):
    key = SharePartitionKey("g", uuid.uuid4(), 3).coordinator_key()
    answer = conn.request(10, 4, FindCoordinatorRequest(key_type=2, coordinator_keys=[key, "g:not-an-id:3"]))
    found = {c.key: c for c in answer.coordinators}
    assert found[key].error_code == 0 and found[key].node_id == broker.broker.config.node_id
    assert found[key].port == int(broker.bootstrap.rsplit(":", 1)[1])
    bad = conn.request(10, 4, FindCoordinatorRequest(key_type=2, coordinator_keys=["g:not-an-id:3"]))
    assert bad.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


def test_group_configs_are_checked_described_and_kept(tmp_path):
    data_dir = tmp_path / "data"
    with EmbeddedBroker(data_dir, properties=PROPERTIES) as embedded:
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})

        def alter(name, value):
            resource = ConfigResource(ResourceType.GROUP, "cfg", incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
            return admin.incremental_alter_configs([resource])[resource]

        with pytest.raises(Exception, match="did you mean 'share.record.lock.duration.ms'"):
            alter("share.record.lock.duratoin.ms", "2000").result(30)
        with pytest.raises(Exception, match="group.share.max.record.lock.duration.ms"):
            alter("share.record.lock.duration.ms", "600000").result(30)
        with pytest.raises(Exception, match="by_duration"):
            alter("share.auto.offset.reset", "yesterday").result(30)
        alter("share.record.lock.duration.ms", "2000").result(30)
    with EmbeddedBroker(data_dir, properties=PROPERTIES) as embedded:
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
        resource = ConfigResource(ResourceType.GROUP, "cfg")
        described = admin.describe_configs([resource])[resource].result(30)
        assert described["share.record.lock.duration.ms"].value == "2000"
        assert not described["share.record.lock.duration.ms"].is_default
        assert described["share.isolation.level"].value == "read_uncommitted"
        assert described["share.isolation.level"].is_default
        assert described["consumer.session.timeout.ms"].value == "45000"


def test_a_dropped_connection_gives_its_records_back(broker):
    """The share session ends with its connection: what its member held goes back at once, long before
    the lock (30 s here) would run out."""
    topic, group = setup_group(broker.bootstrap, records=2)
    with BrokerConnection.from_bootstrap(broker.bootstrap) as first:
        holder, _, topic_id = join(first, group, topic)
        assert acquired(fetch(first, group, holder, 0, topic_id)) == [(0, 1, 1)]
    with BrokerConnection.from_bootstrap(broker.bootstrap) as second:
        member_id, _, _ = join(second, group, topic)
        answer = fetch(second, group, member_id, 0, topic_id, max_wait_ms=5000)
        assert answer.acquisition_lock_timeout_ms == 30_000
        assert acquired(answer) == [(0, 1, 2)]


def test_the_share_coordinator_apis(conn, broker):
    """Keys 83-87 as another broker calls them: initialize, read, write, summarize, delete."""
    from eoslog.protocol import messages as m

    topic, _ = setup_group(broker.bootstrap, records=0)
    group = "state-" + uuid.uuid4().hex[:8]
    topic_id = next(t.topic_id for t in broker.broker.registry.topics.by_id.values() if t.name == topic)

    def call(key, version, name, partition_fields, **data):
        request_type = getattr(m, name + "Request")
        (topic_struct,) = [s for s in request_type.STRUCTS if s.endswith("Data") and s != "PartitionData"]
        request = request_type(group_id=group, topics=[getattr(request_type, topic_struct)(
            topic_id=topic_id, partitions=[request_type.PartitionData(partition=0, **partition_fields)])])
        return conn.request(key, version, request).results[0].partitions[0]

    assert call(84, 0, "ReadShareGroupState", {"leader_epoch": 0}).error_code == ErrorCode.INVALID_REQUEST  # no state
    assert call(83, 0, "InitializeShareGroupState", {"state_epoch": 1, "start_offset": 10}).error_code == 0
    read = call(84, 0, "ReadShareGroupState", {"leader_epoch": 4})
    assert (read.error_code, read.state_epoch, read.start_offset, read.state_batches) == (0, 1, 10, [])
    batch = m.WriteShareGroupStateRequest.StateBatch(first_offset=10, last_offset=12, delivery_state=2, delivery_count=1)
    fields = {"state_epoch": 1, "start_offset": 10, "delivery_complete_count": 3, "state_batches": [batch]}
    assert call(85, 1, "WriteShareGroupState", {**fields, "leader_epoch": 3}).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert call(85, 1, "WriteShareGroupState", {**fields, "state_epoch": 0, "leader_epoch": 4}).error_code \
        == ErrorCode.FENCED_STATE_EPOCH
    assert call(85, 1, "WriteShareGroupState", {**fields, "leader_epoch": 4}).error_code == 0
    read = call(84, 0, "ReadShareGroupState", {"leader_epoch": 4})
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in read.state_batches] \
        == [(10, 12, 2, 1)]
    summary = call(87, 1, "ReadShareGroupStateSummary", {"leader_epoch": 4})
    assert (summary.error_code, summary.state_epoch, summary.leader_epoch, summary.start_offset) == (0, 1, 4, 10)
    assert call(86, 0, "DeleteShareGroupState", {}).error_code == 0
    assert call(84, 0, "ReadShareGroupState", {"leader_epoch": 4}).error_code == ErrorCode.INVALID_REQUEST


def test_describe_and_list_share_groups(conn, broker):
    from eoslog.protocol.messages import ListGroupsRequest, ShareGroupDescribeRequest

    topic, group = setup_group(broker.bootstrap, records=0)
    member_id, epoch, topic_id = join(conn, group, topic)
    described = conn.request(77, 1, ShareGroupDescribeRequest(group_ids=[group, "nobody-" + group],
                                                               include_authorized_operations=False)).groups
    assert described[0].error_code == 0 and described[0].group_state == "Stable"
    assert [(m.member_id, m.member_epoch, m.subscribed_topic_names) for m in described[0].members] \
        == [(member_id, epoch, [topic])]
    assert [(t.topic_id, t.topic_name, t.partitions) for t in described[0].members[0].assignment.topic_partitions] \
        == [(topic_id, topic, [0])]
    assert described[1].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    listed = conn.request(16, 5, ListGroupsRequest(states_filter=[], types_filter=["share"])).groups
    assert (group, "share") in {(g.group_id, g.group_type) for g in listed}
    classic = conn.request(16, 5, ListGroupsRequest(states_filter=[], types_filter=["classic"])).groups
    assert group not in {g.group_id for g in classic}


def test_renew_forgotten_partitions_and_record_limits(conn, broker):
    topic, group = setup_group(broker.bootstrap, records=3, **{"share.record.lock.duration.ms": "3000"})
    member_id, _, topic_id = join(conn, group, topic)
    # ShareAcquireMode 1 (record limit): exactly MaxRecords, even inside one batch
    sent = time.monotonic()
    assert acquired(fetch(conn, group, member_id, 0, topic_id, max_records=1, mode=1)) == [(0, 0, 1)]
    acquired_by = time.monotonic()  # the lock runs out by acquired_by + 3 s, not before sent + 3 s
    # RENEW needs IsRenewAck (v2), and a renewing request fetches nothing
    answer = fetch(conn, group, member_id, 1, topic_id, acks=[(0, 0, 4)])
    assert partition_of(answer).acknowledge_error_code == ErrorCode.INVALID_REQUEST
    wait_until_monotonic(sent + 1.5)
    answer = fetch(conn, group, member_id, 2, topic_id, acks=[(0, 0, 4)], renew=True)
    assert partition_of(answer).acknowledge_error_code == 0 and acquired(answer) == []
    wait_until_monotonic(acquired_by + 3.1)  # the first lock is over; the renewed one lasts to sent + 4.5 s
    answer = fetch(conn, group, member_id, 3, topic_id, acks=[(0, 0, ACCEPT)])
    assert partition_of(answer).acknowledge_error_code == 0
    # forgetting the partition: the session no longer fetches from it
    answer = fetch(conn, group, member_id, 4, None, forgotten=[topic_id], max_wait_ms=300)
    assert answer.error_code == 0 and acquired(answer) == []


def wait_until_monotonic(moment: float) -> None:
    """A point in time itself is what these lock tests wait for."""
    while time.monotonic() < moment:
        time.sleep(min(0.05, max(moment - time.monotonic(), 0)))


def test_a_new_group_starts_at_the_end_by_default(conn, broker):
    topic, _ = setup_group(broker.bootstrap, records=2)
    group = "latest-" + uuid.uuid4().hex[:8]  # no group configs: share.auto.offset.reset latest
    member_id, _, topic_id = join(conn, group, topic)
    assert acquired(fetch(conn, group, member_id, 0, topic_id, max_wait_ms=200)) == []
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"new", partition=0)
    assert producer.flush(30) == 0
    assert acquired(fetch(conn, group, member_id, 1, topic_id, max_wait_ms=5000)) == [(2, 2, 1)]


def test_a_member_leaving_the_group_gives_its_records_back(conn, broker):
    """Its connection and share session stay open; leaving (epoch -1) is enough."""
    topic, group = setup_group(broker.bootstrap, records=2)
    leaver, _, topic_id = join(conn, group, topic)
    assert acquired(fetch(conn, group, leaver, 0, topic_id)) == [(0, 1, 1)]
    with BrokerConnection.from_bootstrap(broker.bootstrap) as other:
        member_id, _, _ = join(other, group, topic)
        assert acquired(fetch(other, group, member_id, 0, topic_id)) == []  # all held by the leaver
        assert heartbeat(conn, group, leaver, -1).error_code == 0
        assert acquired(fetch(other, group, member_id, 1, topic_id, max_wait_ms=5000)) == [(0, 1, 2)]


def test_by_duration_starts_at_the_records_written_since(conn, broker):
    topic, _ = setup_group(broker.bootstrap, records=2)
    wait_until_monotonic(time.monotonic() + 2.0)  # the first two are now more than 2 s old
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"recent", partition=0)
    assert producer.flush(30) == 0
    group = "dur-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "by_duration:PT1.5S", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    member_id, _, topic_id = join(conn, group, topic)
    assert acquired(fetch(conn, group, member_id, 0, topic_id, max_wait_ms=2000)) == [(2, 2, 1)]
