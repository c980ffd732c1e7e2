"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) over TCP against a real broker process:
requests captured from librdkafka 2.16 (confluent-kafka 2.16.1, ``group.protocol=consumer``) decoded and
replayed, and the edge cases: unknown member, stale epoch, regex with no match, unknown assignor,
invalid regex, an instance id still in use, OffsetCommit with a stale member epoch, and how the classic
APIs (JoinGroup, DescribeGroups, ListGroups) see a consumer group."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import codec, messages
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.process import BrokerProcess
from eoslog.testing.wait import wait_until
from tests.groups.conftest import create_topic
from tests.groups.consumer_protocol.conftest import CONSUMER_GROUP_PROPERTIES

# librdkafka's first heartbeat for consumer.subscribe(["^ord.*"]) with group.remote.assignor=uniform
# (client id "capture", group "capture"): v1, epoch 0, an empty topic name list, the regex as "(^ord.*)".
CAPTURED_JOIN = bytes.fromhex(
    "0044000100000003000763617074757265000863617074757265174b4433554c7872475336326276576167347042395341"
    "000000000000000493e00109285e6f72642e2a2908756e69666f726d0100")
# Its next heartbeat: epoch 1, owning partitions 0 and 1 of the topic with this id.
CAPTURED_ACK = bytes.fromhex(
    "0044000100000006000763617074757265000863617074757265174b4433554c7872475336326276576167347042395341"
    "000000010000ffffffff000000028dd11eef0fb94aba9448bfc11dfc32e60300000000000000010000")
# Its leave: epoch -1.
CAPTURED_LEAVE = bytes.fromhex(
    "0044000100000007000763617074757265000863617074757265174b4433554c7872475336326276576167347042395341"
    "ffffffff0000ffffffff0000000000")
MEMBER = "KD3ULxrGS62bvWag4pB9SA"


# The members here are driven request by request and never heartbeat between a test's steps, so a session
# must outlast a whole test on a loaded machine. With the crash tests' 3 s sessions, a pause between two
# steps removed a group's only consumer member, and the classic member joining next met an empty group
# (made a classic one, generation 1): failed once in a fresh-clone CI run, reproduced with a 3.5 s pause.
# Kafka's default session; no test in this module waits for a member to expire.
WIRE_PROPERTIES = {**CONSUMER_GROUP_PROPERTIES, "group.consumer.session.timeout.ms": "45000"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("wire") / "data", properties=WIRE_PROPERTIES) as b:
        create_topic(b.bootstrap, "orders", 2)
        create_topic(b.bootstrap, "other", 3)
        yield b


@pytest.fixture
def conn(broker):
    with BrokerConnection.from_bootstrap(broker.bootstrap) as c:
        yield c


def heartbeat(conn, group, member_id, epoch, version=1, **fields):
    fields.setdefault("rebalance_timeout_ms", 30_000 if epoch == 0 else -1)
    request = messages.ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch,
                                                     **fields)
    return conn.request(68, version, request)


def join(conn, group, topics=("orders",), **fields):
    member_id = uuid.uuid4().hex
    return member_id, heartbeat(conn, group, member_id, 0, subscribed_topic_names=list(topics), **fields)


def assigned(response):
    return sorted((tp.topic_id, tuple(tp.partitions)) for tp in response.assignment.topic_partitions)


def topic_ids(conn):
    md = conn.request(3, 12, messages.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                       include_topic_authorized_operations=False))
    return {t.name: t.topic_id for t in md.topics}


def replay(bootstrap: str, frame: bytes):
    """Sends a captured request frame as is; returns the decoded response."""
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read(s, 4))[0]
        api_key, version = struct.unpack(">hh", frame[:4])
        return codec.decode_response(api_key, version, _read(s, size))


def _read(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def test_captured_requests_decode_as_librdkafka_sent_them():
    header, join_request = codec.decode_request(CAPTURED_JOIN)
    assert (header.api_key, header.api_version, header.client_id) == (68, 1, "capture")
    assert join_request.group_id == "capture" and join_request.member_id == MEMBER
    assert join_request.member_epoch == 0 and join_request.rebalance_timeout_ms == 300_000
    # An empty name list (not null) beside the regex.
    assert join_request.subscribed_topic_names == [] and join_request.subscribed_topic_regex == "(^ord.*)"
    assert join_request.server_assignor == "uniform" and join_request.topic_partitions == []
    _, ack = codec.decode_request(CAPTURED_ACK)
    assert ack.member_epoch == 1 and ack.subscribed_topic_regex is None and ack.subscribed_topic_names is None
    assert [(tp.topic_id, tp.partitions) for tp in ack.topic_partitions] == \
        [(uuid.UUID("8dd11eef-0fb9-4aba-9448-bfc11dfc32e6"), [0, 1])]
    _, leave = codec.decode_request(CAPTURED_LEAVE)
    assert leave.member_epoch == -1
    # Our encoder writes the same bytes back.
    assert codec.encode_request(header, join_request) == struct.pack(">i", len(CAPTURED_JOIN)) + CAPTURED_JOIN


def test_captured_join_and_leave_replayed(broker, conn):
    joined = replay(broker.bootstrap, CAPTURED_JOIN)
    assert joined.error_code == 0, joined
    assert joined.member_id == MEMBER and joined.member_epoch >= 1
    assert joined.heartbeat_interval_ms == int(CONSUMER_GROUP_PROPERTIES["group.consumer.heartbeat.interval.ms"])
    # The regex matched "orders" (and not "other"): both its partitions, by the broker's topic id.
    assert assigned(joined) == [(topic_ids(conn)["orders"], (0, 1))]
    left = replay(broker.bootstrap, CAPTURED_LEAVE)
    assert left.error_code == 0 and left.member_epoch == -1
    described = conn.request(69, 1, messages.ConsumerGroupDescribeRequest(group_ids=["capture"],
                                                                        include_authorized_operations=False))
    assert described.groups[0].group_state == "Empty" and described.groups[0].members == []


def test_unknown_member_and_stale_epoch_are_fenced(conn):
    response = heartbeat(conn, "edge-fence", "nobody", 3)
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    member_id, joined = join(conn, "edge-fence")
    assert joined.error_code == 0
    epoch = joined.member_epoch
    response = heartbeat(conn, "edge-fence", member_id, epoch + 1)
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    response = heartbeat(conn, "edge-fence", "someone-else", epoch)
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(conn, "edge-fence", member_id, epoch).error_code == 0
    # OffsetCommit v9 carries the member epoch: another one is STALE_MEMBER_EPOCH (Kafka 4.x).
    commit = messages.OffsetCommitRequest(
        group_id="edge-fence", generation_id_or_member_epoch=epoch - 1, member_id=member_id,
        group_instance_id=None, retention_time_ms=-1,
        topics=[messages.OffsetCommitRequest.OffsetCommitRequestTopic(name="orders", partitions=[
            messages.OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")])])
    stale = conn.request(8, 9, commit)
    assert stale.topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    commit.generation_id_or_member_epoch = epoch
    assert conn.request(8, 9, commit).topics[0].partitions[0].error_code == 0


def test_regex_with_no_match_joins_with_nothing(conn):
    response = heartbeat(conn, "edge-regex", uuid.uuid4().hex, 0, subscribed_topic_regex="nothing-here.*")
    assert response.error_code == 0 and response.member_epoch >= 1
    assert response.assignment.topic_partitions == []
    bad = heartbeat(conn, "edge-regex", uuid.uuid4().hex, 0, subscribed_topic_regex="(unclosed")
    assert bad.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION and "(unclosed" in bad.error_message


def test_unknown_assignor_is_refused(conn):
    _, response = join(conn, "edge-assignor", server_assignor="sticky")
    assert response.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert "sticky" in response.error_message
    # The refused join left no group behind.
    listed = conn.request(16, 5, messages.ListGroupsRequest(states_filter=[], types_filter=[]))
    assert "edge-assignor" not in {g.group_id for g in listed.groups}
    _, ranged = join(conn, "edge-assignor", server_assignor="range")
    assert ranged.error_code == 0


def test_invalid_requests(conn):
    v1_without_id = heartbeat(conn, "edge-invalid", "", 0, subscribed_topic_names=["orders"])
    assert v1_without_id.error_code == ErrorCode.INVALID_REQUEST
    no_subscription = heartbeat(conn, "edge-invalid", uuid.uuid4().hex, 0)
    assert no_subscription.error_code == ErrorCode.INVALID_REQUEST
    # v0: the coordinator names the member.
    named = heartbeat(conn, "edge-invalid", "", 0, version=0, subscribed_topic_names=["orders"])
    assert named.error_code == 0 and named.member_id


def test_static_member_instance_id(conn):
    first, joined = join(conn, "edge-static", instance_id="i-1")
    assert joined.error_code == 0
    _, clash = join(conn, "edge-static", instance_id="i-1")
    assert clash.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    # A temporary leave (-2) keeps the partitions for the instance id; a new process takes them over.
    left = heartbeat(conn, "edge-static", first, -2, instance_id="i-1")
    assert left.error_code == 0 and left.member_epoch == -2
    _, back = join(conn, "edge-static", instance_id="i-1")
    assert back.error_code == 0
    assert back.member_epoch == joined.member_epoch and assigned(back) == assigned(joined)


def test_classic_apis_see_a_consumer_group(conn):
    _, joined = join(conn, "edge-classic")
    assert joined.error_code == 0
    listed = conn.request(16, 5, messages.ListGroupsRequest(states_filter=[], types_filter=["consumer"]))
    [group] = [g for g in listed.groups if g.group_id == "edge-classic"]
    assert (group.group_type, group.protocol_type, group.group_state) == ("consumer", "consumer", "Stable")
    classic_only = conn.request(16, 5, messages.ListGroupsRequest(states_filter=[], types_filter=["classic"]))
    assert "edge-classic" not in {g.group_id for g in classic_only.groups}
    described = conn.request(15, 5, messages.DescribeGroupsRequest(groups=["edge-classic"],
                                                                   include_authorized_operations=False))
    assert described.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    join_classic = conn.request(11, 9, messages.JoinGroupRequest(
        group_id="edge-classic", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        group_instance_id=None, protocol_type="consumer", reason=None,
        protocols=[messages.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    assert join_classic.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    not_consumer = conn.request(69, 0, messages.ConsumerGroupDescribeRequest(group_ids=["no-such-group"],
                                                                           include_authorized_operations=False))
    assert not_consumer.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def owned(response):
    return [messages.ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
            for tp in response.assignment.topic_partitions]


def test_revocation_before_assignment_and_describe(conn):
    a, first = join(conn, "edge-describe", topics=("other",), server_assignor="range")
    assert first.error_code == 0 and assigned(first) == [(topic_ids(conn)["other"], (0, 1, 2))]
    b, second = join(conn, "edge-describe", topics=("other",), server_assignor="range")
    assert second.error_code == 0
    # The new member's target partition is still owned by the first member: it gets nothing yet.
    assert assigned(second) == []
    # The first member learns what it keeps (range: b sorts after or before a; either way one loses).
    first_again = heartbeat(conn, "edge-describe", a, first.member_epoch,
                            topic_partitions=owned(first))
    kept = assigned(first_again)
    assert first_again.error_code == 0 and first_again.member_epoch == first.member_epoch  # not bumped yet
    assert len(kept[0][1]) < 3
    still_waiting = heartbeat(conn, "edge-describe", b, second.member_epoch, topic_partitions=[])
    assert assigned(still_waiting) == []
    # The first member reports the revocation done: its epoch moves on and the partitions are released.
    acked = heartbeat(conn, "edge-describe", a, first.member_epoch, topic_partitions=owned(first_again))
    assert acked.error_code == 0 and acked.member_epoch == second.member_epoch
    released = heartbeat(conn, "edge-describe", b, second.member_epoch, topic_partitions=[])
    got = assigned(released)
    assert len(got) == 1 and set(got[0][1]) | set(kept[0][1]) == {0, 1, 2}
    assert not set(got[0][1]) & set(kept[0][1])

    described = conn.request(69, 1, messages.ConsumerGroupDescribeRequest(group_ids=["edge-describe"],
                                                                        include_authorized_operations=True))
    group = described.groups[0]
    assert group.error_code == 0 and group.assignor_name == "range" and group.group_state == "Stable"
    assert group.group_epoch == group.assignment_epoch == second.member_epoch
    members = {m.member_id: m for m in group.members}
    assert set(members) == {a, b}
    for m in members.values():
        assert m.member_type == 1 and m.member_epoch == group.group_epoch
        assert m.subscribed_topic_names == ["other"]
        assert [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == \
            [(tp.topic_name, tp.partitions) for tp in m.target_assignment.topic_partitions]
    assert group.authorized_operations != -(2**31)


def test_groups_cli_shows_the_group_type(broker, conn):
    from click.testing import CliRunner

    from eoslog.tools.groups_cli import groups_group

    member_id, joined = join(conn, "edge-cli", topics=("orders",))
    assert joined.error_code == 0
    runner = CliRunner()
    listed = runner.invoke(groups_group, ["list", "-b", broker.bootstrap])
    assert listed.exit_code == 0, listed.output
    [row] = [line.split() for line in listed.output.splitlines() if line.startswith("edge-cli ")]
    assert row == ["edge-cli", "consumer", "Stable", "consumer"]
    described = runner.invoke(groups_group, ["describe", "edge-cli", "-b", broker.bootstrap])
    assert described.exit_code == 0, described.output
    assert "group edge-cli (consumer): Stable, protocol consumer/uniform, 1 member\n" in described.output
    assert member_id in described.output and "orders:0,1" in described.output


def test_a_real_client_sees_invalid_regular_expression(broker):
    # librdkafka checks a "^" subscription with its own regex engine first; "x**" passes there but not
    # RE2 (nor Python's re), so the coordinator's answer is what the application sees. librdkafka makes
    # it a fatal error whose text is its description of code 128 (for INVALID_REQUEST: "Invalid request").
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "edge-regex-client",
                                         "group.protocol": "consumer"})
    errors = []

    def refused() -> bool:
        message = consumer.poll(0.2)
        if message is not None and message.error() is not None:
            errors.append(message.error())
        return bool(errors)

    try:
        consumer.subscribe(["^x**"])
        wait_until(refused, 15, "the heartbeat's error reaching the application")
    finally:
        consumer.close()
    error = errors[0]
    assert error.code() == confluent_kafka.KafkaError._FATAL, error
    assert "The regular expression is not valid" in error.str(), error


def classic_join(conn, group, member_id="", instance_id=None, topics=("orders",)):
    from tests.coordinator.group.test_consumer_group import subscription

    return conn.request(11, 9, messages.JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", reason=None,
        protocols=[messages.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription(topics))]))


def classic_sync(conn, group, member_id, generation, instance_id=None):
    from eoslog.coordinator.group.consumer_classic import decode_assignment

    synced = conn.request(14, 5, messages.SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id,
        protocol_type="consumer", protocol_name="range", assignments=[]))
    assert synced.error_code == 0
    return decode_assignment(synced.assignment)


def test_a_classic_join_into_a_consumer_group_needs_a_member_id(conn):
    join(conn, "edge-member-id", topics=("other",))
    required = classic_join(conn, "edge-member-id")
    assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED and required.member_id
    joined = classic_join(conn, "edge-member-id", member_id=required.member_id)
    assert joined.error_code == 0 and joined.member_id == required.member_id and joined.generation_id >= 2
    assert classic_sync(conn, "edge-member-id", joined.member_id, joined.generation_id) == {
        "orders": frozenset({0, 1})}
    assert classic_join(conn, "edge-member-id", member_id="never-handed-out").error_code == \
        ErrorCode.UNKNOWN_MEMBER_ID


def test_a_classic_static_member_comes_back_to_its_partitions_without_a_rebalance(conn):
    group = "edge-classic-static"
    join(conn, group, topics=("other",))
    first = classic_join(conn, group, instance_id="static-1")  # static: no MEMBER_ID_REQUIRED round
    assert first.error_code == 0
    assignment = classic_sync(conn, group, first.member_id, first.generation_id, "static-1")
    assert assignment == {"orders": frozenset({0, 1})}
    epoch = conn.request(69, 1, messages.ConsumerGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False)).groups[0].group_epoch
    # The process restarts (a classic static member sends no LeaveGroup) and joins with no member id.
    back = classic_join(conn, group, instance_id="static-1")
    assert back.error_code == 0 and back.member_id != first.member_id
    assert back.generation_id == first.generation_id
    assert classic_sync(conn, group, back.member_id, back.generation_id, "static-1") == assignment
    described = conn.request(69, 1, messages.ConsumerGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False)).groups[0]
    assert described.group_epoch == epoch and len(described.members) == 2
    # The old member id is gone; naming it with the instance id is fenced.
    stale = conn.request(12, 4, messages.HeartbeatRequest(group_id=group, generation_id=first.generation_id,
                                                           member_id=first.member_id, group_instance_id=None))
    assert stale.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert classic_join(conn, group, member_id=first.member_id, instance_id="static-1").error_code == \
        ErrorCode.FENCED_INSTANCE_ID
