"""Share groups on a 3-broker ZooKeeper cluster (issue 37 step 4, docs/share-groups.md): share partitions
live on their partition's leader, their state on the share coordinator (the leader of the key's
``__share_group_state`` partition), reached by Kafka's RPCs 83-87 when that is another broker.
Unmodified confluent-kafka ShareConsumers; one cluster for the module (a test that kills a broker starts
it again before it ends).

Each test picks a group whose coordinators suit it (by ZooKeeper's leaders): mostly a share coordinator
that is not the partition's leader, so the RPC path is the one taken, and a group coordinator that is not
the broker it stops, except in the test of the group coordinator's failover."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, ElectionType, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from eoslog.client.connection import BrokerConnection
from eoslog.cluster.zk import layout
from eoslog.protocol import messages
from eoslog.protocol.coordinator_partition import partition_for
from eoslog.protocol.errors import ErrorCode
from eoslog.testing.cluster import embedded_cluster

pytestmark = pytest.mark.interop

CHILD = Path(__file__).with_name("share_child.py")
LOCK_MS = 2000
STATE_PARTITIONS = 4  # share.coordinator.state.topic.num.partitions below
OFFSETS_PARTITIONS = 4  # the embedded cluster's offsets.topic.num.partitions
SHARE_STATE = "__share_group_state"
PROPERTIES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "200",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.session.timeout.ms": "2000",
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with embedded_cluster(3, tmp_path_factory.mktemp("share-cluster"), properties=PROPERTIES) as made:
        _create_internal_topics(made)
        yield made


# ---- the cluster --------------------------------------------------------------------------------------

def _request(bootstrap: str, api_key: int, version: int, request):
    wire = BrokerConnection.from_bootstrap(bootstrap)
    try:
        return wire.request(api_key, version, request)
    finally:
        wire.close()


def _create_internal_topics(cluster) -> None:
    """FindCoordinator creates ``__share_group_state`` (key type 2) and ``__consumer_offsets`` (key type 0),
    as the first share group would; both led and in sync before the tests pick groups by their leaders."""
    key = "g:" + base64.urlsafe_b64encode(bytes(16)).decode().rstrip("=") + ":0"
    _request(cluster.broker(1).bootstrap, 10, 4, messages.FindCoordinatorRequest(key_type=2, coordinator_keys=[key]))
    _request(cluster.broker(1).bootstrap, 10, 4, messages.FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]))
    cluster.wait_for(lambda s: all(len(s.isr_of(SHARE_STATE, i)) == 3 for i in range(STATE_PARTITIONS))
                     and all(s.leader_of("__consumer_offsets", i) in s.brokers for i in range(OFFSETS_PARTITIONS)),
                     60, "the internal topics led and in sync")


def new_topic(cluster) -> tuple[str, uuid.UUID]:
    name = "share-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})])[name].result(30)
    cluster.wait_for(lambda s: len(s.isr_of(name, 0)) == 3, 60, f"{name} in sync")
    data = cluster._client().get(layout.topic_path(name))[0]
    return name, layout.TopicAssignment.decode(name, data).topic_id


def share_key(group: str, topic_id: uuid.UUID, partition: int = 0) -> str:
    return f"{group}:{base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip('=')}:{partition}"


def coordinators(cluster, group: str, topic_id: uuid.UUID) -> tuple[int, int]:
    """(share coordinator, group coordinator) of the group's share partition 0, by ZooKeeper."""
    state = cluster.state()
    return (state.leader_of(SHARE_STATE, partition_for(share_key(group, topic_id), STATE_PARTITIONS)),
            state.leader_of("__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS)))


def new_group(cluster, topic_id: uuid.UUID, fits, lock_ms: int = LOCK_MS) -> tuple[str, int]:
    """A group for which ``fits(share coordinator, group coordinator)``, its configs set. Returns it and its
    share coordinator."""
    for _ in range(200):
        group = "sg-" + uuid.uuid4().hex[:8]
        share_coordinator, group_coordinator = coordinators(cluster, group, topic_id)
        if fits(share_coordinator, group_coordinator):
            break
    else:
        raise AssertionError("no group name fits")
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(lock_ms)}.items()])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(30)
    return group, share_coordinator


def produce(cluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0


def summary(bootstrap: str, group: str, topic_id: uuid.UUID):
    """ReadShareGroupStateSummary of the share partition, asked of one broker's share coordinator."""
    m = messages.ReadShareGroupStateSummaryRequest
    answer = _request(bootstrap, 87, 1, m(group_id=group, topics=[m.ReadStateSummaryData(
        topic_id=topic_id, partitions=[m.PartitionData(partition=0, leader_epoch=0)])]))
    return answer.results[0].partitions[0]


def described(cluster, group: str, broker_id: int):
    """ShareGroupDescribe at ``broker_id`` once it serves the group (a new coordinator loads it first)."""
    deadline = time.monotonic() + 30
    while True:
        answer = _request(cluster.broker(broker_id).bootstrap, 77, 1, messages.ShareGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False)).groups[0]
        if answer.error_code not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            assert answer.error_code == 0, answer
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)


def restart(cluster, broker_id: int) -> None:
    """The killed broker back, and every partition in sync again, for the next test."""
    cluster.broker(broker_id).start()
    cluster.wait_for(lambda s: broker_id in s.brokers and all(
        len(isr) == 3 for (topic, _), isr in ((tp, s.isr_of(*tp)) for tp in s.partitions)
        if not topic.startswith("__consumer")), 120, f"broker {broker_id} back in sync")
    # leaders back to their preferred replicas, so the next test finds groups whose coordinators fit
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept alive until the answer comes
    admin.elect_leaders(ElectionType.PREFERRED, None).result(30)


# ---- consumers ----------------------------------------------------------------------------------------

def share_consumer(cluster, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    return consumer


def consume_until(consumer: ShareConsumer, done, on_message, timeout: float = 90.0) -> list:
    seen: list = []
    deadline = time.monotonic() + timeout
    while not done(seen):
        assert time.monotonic() < deadline, f"gave up after {len(seen)} messages"
        for message in consumer.poll(0.5) or ():
            assert message.error() is None, message.error()
            seen.append(message)
            on_message(consumer, message)
    return seen


def accept_ten_then_hold(cluster, group: str, topic: str, count: int) -> tuple[set[int], set[int], subprocess.Popen]:
    """A member accepts the first ten records (commit_sync answered) and releases the rest; then a member
    in a process of its own acquires some of those and holds them. Returns (accepted, held, that process)."""
    consumer = share_consumer(cluster, group, topic)
    accepted: set[int] = set()

    def accept_ten(consumer, message):
        if len(accepted) < 10:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            accepted.add(message.offset())
        else:
            consumer.acknowledge(message, AcknowledgeType.RELEASE)

    try:
        consume_until(consumer, lambda s: len(accepted) >= 10, accept_ten)
        assert all(error is None for error in consumer.commit_sync(30).values())
    finally:
        consumer.close()
    child = subprocess.Popen([sys.executable, str(CHILD), cluster.bootstrap, group, topic], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    held = {offset for _, offset in json.loads(child.stdout.readline() or "[]")}
    assert held and not held & accepted and held <= set(range(count))
    return accepted, held, child


def the_rest_once(cluster, group: str, topic: str, count: int, accepted: set[int], held: set[int]) -> None:
    """No accepted record comes again; every other one does, once more than before (the held ones twice)."""
    after = share_consumer(cluster, group, topic)
    rest_expected = set(range(count)) - accepted
    try:
        rest = consume_until(after, lambda s: {m.offset() for m in s} >= rest_expected,
                             lambda consumer, m: consumer.acknowledge(m, AcknowledgeType.ACCEPT))
        offsets = [m.offset() for m in rest]
        assert not set(offsets) & accepted
        assert sorted(set(offsets)) == sorted(rest_expected)
        assert {m.offset(): m.delivery_count() for m in rest} == {o: 3 if o in held else 2 for o in rest_expected}
        assert all(error is None for error in after.commit_sync(30).values())
    finally:
        after.close()


# ---- tests ----------------------------------------------------------------------------------------------

def test_the_share_coordinator_on_another_broker_keeps_the_state(cluster):
    """The partition's leader reads and writes its share state at the share coordinator of another broker
    (RPCs 83-87): that broker has the acknowledgements, the leader's own share coordinator does not."""
    topic, topic_id = new_topic(cluster)
    leader = cluster.state().leader_of(topic, 0)
    group, share_coordinator = new_group(cluster, topic_id, lambda share, _: share != leader)
    produce(cluster, topic, 10)
    consumer = share_consumer(cluster, group, topic)
    try:
        seen = consume_until(consumer, lambda s: len({m.offset() for m in s}) >= 10,
                             lambda consumer, m: consumer.acknowledge(m, AcknowledgeType.ACCEPT))
        assert sorted({m.offset() for m in seen}) == list(range(10))
        assert all(error is None for error in consumer.commit_sync(30).values())
    finally:
        consumer.close()
    there = summary(cluster.broker(share_coordinator).bootstrap, group, topic_id)
    assert (there.error_code, there.start_offset) == (0, 10)
    assert summary(cluster.broker(leader).bootstrap, group, topic_id).error_code == ErrorCode.NOT_COORDINATOR


def test_a_broker_not_leading_the_partition_refuses_share_fetch_and_acknowledge(cluster):
    """ShareFetch and ShareAcknowledge to a follower: NOT_LEADER_OR_FOLLOWER, with the leader to go to."""
    topic, topic_id = new_topic(cluster)
    state = cluster.state()
    leader = state.leader_of(topic, 0)
    follower = next(b for b in state.brokers if b != leader)
    group, member = "sg-" + uuid.uuid4().hex[:8], uuid.uuid4().hex
    wire = BrokerConnection.from_bootstrap(cluster.broker(follower).bootstrap)
    try:
        f = messages.ShareFetchRequest
        fetched = wire.request(78, 1, f(
            group_id=group, member_id=member, share_session_epoch=0, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            max_records=10, batch_size=10, topics=[f.FetchTopic(topic_id=topic_id, partitions=[f.FetchPartition(
                partition_index=0, partition_max_bytes=0, acknowledgement_batches=[])])], forgotten_topics_data=[]))
        assert fetched.error_code == 0
        [answer] = fetched.responses[0].partitions
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) \
            == (leader, state.epoch_of(topic, 0))
        a = messages.ShareAcknowledgeRequest
        acked = wire.request(79, 1, a(group_id=group, member_id=member, share_session_epoch=1, topics=[
            a.AcknowledgeTopic(topic_id=topic_id, partitions=[a.AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[a.AcknowledgementBatch(
                    first_offset=0, last_offset=0, acknowledge_types=[1])])])]))
        assert acked.error_code == 0
        [answer] = acked.responses[0].partitions
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert answer.current_leader.leader_id == leader
    finally:
        wire.close()


def test_the_share_coordinators_broker_killed_loses_no_acknowledgement(cluster):
    """SIGKILL of the share coordinator's broker while a member holds records: the state moves with its
    ``__share_group_state`` partition; nothing accepted comes again, the rest comes once more, the held
    records with their delivery count raised."""
    topic, topic_id = new_topic(cluster)
    leader = cluster.state().leader_of(topic, 0)
    group, share_coordinator = new_group(cluster, topic_id, lambda share, group: leader != share != group)
    produce(cluster, topic, 20)
    accepted, held, child = accept_ten_then_hold(cluster, group, topic, 20)
    index = partition_for(share_key(group, topic_id), STATE_PARTITIONS)
    epoch = cluster.state().epoch_of(SHARE_STATE, index)
    try:
        cluster.broker(share_coordinator).kill()
    finally:
        child.kill()
        child.wait(10)
    try:
        moved = cluster.wait_for(lambda s: s.leader_of(SHARE_STATE, index) not in (None, -1, share_coordinator)
                                 and s.epoch_of(SHARE_STATE, index) > epoch, 60, "the share coordinator moved")
        the_rest_once(cluster, group, topic, 20, accepted, held)
        state = summary(cluster.broker(moved.leader_of(SHARE_STATE, index)).bootstrap, group, topic_id)
        assert (state.error_code, state.start_offset) == (0, 20)
    finally:
        restart(cluster, share_coordinator)


def test_the_partition_leader_killed_hands_its_share_partition_on(cluster):
    """SIGKILL of the partition's leader while a member holds records: the new leader reads the share
    partition from the share coordinator with its newer leader epoch; nothing accepted comes again, the
    rest comes once more, the held records with their delivery count raised (their acquisition was
    persisted)."""
    topic, topic_id = new_topic(cluster)
    leader = cluster.state().leader_of(topic, 0)
    group, _ = new_group(cluster, topic_id, lambda share, group: leader not in (share, group))
    produce(cluster, topic, 20)
    accepted, held, child = accept_ten_then_hold(cluster, group, topic, 20)
    epoch = cluster.state().epoch_of(topic, 0)
    try:
        cluster.broker(leader).kill()
    finally:
        child.kill()
        child.wait(10)
    try:
        cluster.wait_for(lambda s: s.leader_of(topic, 0) not in (None, -1, leader) and s.epoch_of(topic, 0) > epoch,
                         60, "the partition's leadership moved")
        the_rest_once(cluster, group, topic, 20, accepted, held)
    finally:
        restart(cluster, leader)



def test_a_leadership_that_comes_back_reads_the_state_again(cluster):
    """The leader is paused (SIGSTOP) past its ZooKeeper session, so another broker leads and accepts more
    records; resumed, it follows, and a preferred-leader election gives it the partition back: it serves
    what the share coordinator has now, never the share partition it kept from its first leadership."""
    topic, topic_id = new_topic(cluster)
    state = cluster.state()
    leader = state.leader_of(topic, 0)
    assert leader == state.replicas[(topic, 0)][0]  # the preferred replica, so an election brings it back
    group, _ = new_group(cluster, topic_id, lambda share, group: leader not in (share, group))
    produce(cluster, topic, 20)
    accept = lambda consumer, m: consumer.acknowledge(
        m, AcknowledgeType.ACCEPT if m.offset() < 5 else AcknowledgeType.RELEASE)
    first = share_consumer(cluster, group, topic)
    try:
        consume_until(first, lambda s: {m.offset() for m in s} >= set(range(5)), accept)
        assert all(error is None for error in first.commit_sync(30).values())
    finally:
        first.close()
    epoch = state.epoch_of(topic, 0)
    cluster.broker(leader).pause()
    try:
        cluster.wait_for(lambda s: s.leader_of(topic, 0) not in (None, -1, leader) and s.epoch_of(topic, 0) > epoch,
                         60, "another broker leads")
        second = share_consumer(cluster, group, topic)
        try:
            seen = consume_until(second, lambda s: {m.offset() for m in s} >= set(range(5, 20)),
                                 lambda consumer, m: consumer.acknowledge(m, AcknowledgeType.ACCEPT))
            assert not {m.offset() for m in seen} & set(range(5))
            assert all(error is None for error in second.commit_sync(30).values())
        finally:
            second.close()
    finally:
        cluster.broker(leader).resume()
    cluster.wait_for(lambda s: leader in s.isr_of(topic, 0), 60, "the old leader in sync again")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    cluster.wait_for(lambda s: s.leader_of(topic, 0) == leader, 60, "the old leader leads again")
    produce_one(cluster, topic)  # offset 20: once it is seen, everything before it was offered
    third = share_consumer(cluster, group, topic)
    try:
        seen = consume_until(third, lambda s: 20 in {m.offset() for m in s},
                             lambda consumer, m: consumer.acknowledge(m, AcknowledgeType.ACCEPT))
        assert sorted({m.offset() for m in seen}) == [20]
    finally:
        third.close()
    cluster.wait_for(lambda s: all(len(s.isr_of(*tp)) == 3 for tp in s.partitions
                                   if not tp[0].startswith("__consumer")), 60, "all in sync")


def test_a_follower_leaving_the_isr_keeps_what_members_hold(cluster):
    """A follower SIGKILLed: the controller takes it out of the ISR with a new leader epoch, but the leader
    never stopped leading, so the records a member holds stay its own and it can accept them."""
    topic, topic_id = new_topic(cluster)
    leader = cluster.state().leader_of(topic, 0)
    group, share_coordinator = new_group(cluster, topic_id, lambda share, group: True, lock_ms=30_000)
    group_coordinator = coordinators(cluster, group, topic_id)[1]
    # a follower that is not the group coordinator; not the share coordinator either where the layout allows
    followers = sorted(cluster.state().brokers - {leader, group_coordinator}, key=lambda b: b == share_coordinator)
    follower = followers[0]
    produce(cluster, topic, 10)
    consumer = share_consumer(cluster, group, topic)
    try:
        held = consume_until(consumer, lambda s: len(s) > 0, lambda consumer, m: None)
        epoch = cluster.state().epoch_of(topic, 0)
        cluster.broker(follower).kill()
        try:
            cluster.wait_for(lambda s: follower not in s.isr_of(topic, 0) and s.epoch_of(topic, 0) > epoch, 60,
                             "the follower out of the ISR, in a new leader epoch")
            for message in held:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            assert all(error is None for error in consumer.commit_sync(30).values())
            produce_one(cluster, topic)  # offset 10
            rest = consume_until(consumer, lambda s: 10 in {m.offset() for m in s},
                                 lambda consumer, m: consumer.acknowledge(m, AcknowledgeType.ACCEPT))
            assert not {m.offset() for m in rest} & {m.offset() for m in held}
        finally:
            restart(cluster, follower)
    finally:
        consumer.close()


def produce_one(cluster, topic: str) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    producer.produce(topic, value=b"marker", partition=0)
    assert producer.flush(30) == 0


def test_the_group_coordinators_broker_killed_the_member_goes_on(cluster):
    """SIGKILL of the share group's coordinator: the new one loads the group from ``__consumer_offsets``;
    the member goes on consuming, and nothing it accepted comes again."""
    topic, topic_id = new_topic(cluster)
    leader = cluster.state().leader_of(topic, 0)
    group, _ = new_group(cluster, topic_id, lambda share, group: group not in (leader, share))
    group_coordinator = coordinators(cluster, group, topic_id)[1]
    index = partition_for(group, OFFSETS_PARTITIONS)
    produce(cluster, topic, 10)
    consumer = share_consumer(cluster, group, topic)
    try:
        consume_until(consumer, lambda s: {m.offset() for m in s} >= set(range(10)), lambda consumer, m:
                      consumer.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 5 else AcknowledgeType.RELEASE))
        assert all(error is None for error in consumer.commit_sync(30).values())
        before = described(cluster, group, group_coordinator)
        epoch = cluster.state().epoch_of("__consumer_offsets", index)
        cluster.broker(group_coordinator).kill()
        try:
            moved = cluster.wait_for(lambda s: s.leader_of("__consumer_offsets", index) not in (
                None, -1, group_coordinator) and s.epoch_of("__consumer_offsets", index) > epoch, 60,
                "the group coordinator moved")
            produce(cluster, topic, 10)  # offsets 10-19
            rest = consume_until(consumer, lambda s: {m.offset() for m in s} >= set(range(5, 20)),
                                 lambda consumer, m: consumer.acknowledge(m, AcknowledgeType.ACCEPT))
            assert not {m.offset() for m in rest} & set(range(5))
            assert all(error is None for error in consumer.commit_sync(30).values())
            # the same member at the same epochs: it went on, it did not join again
            after = described(cluster, group, moved.leader_of("__consumer_offsets", index))
            assert [(m.member_id, m.member_epoch) for m in after.members] \
                == [(m.member_id, m.member_epoch) for m in before.members]
            assert after.group_epoch == before.group_epoch
        finally:
            restart(cluster, group_coordinator)
    finally:
        consumer.close()


def test_acknowledgements_inside_a_transaction_across_brokers(cluster):
    """Issue 37 step 6 on the cluster: the share partition's leader, its share coordinator and the
    transaction's coordinator are three different brokers. The leader asks the transaction coordinator over
    the wire before applying (a producer that did not register is refused), the markers reach the share
    coordinator's ``__share_group_state`` partition, and the leader learns the outcome from there: an abort
    gives the records back with their delivery count kept, a commit acknowledges them with the output."""
    from eoslog.client.share_txn import ACCEPT, ShareAcknowledgeError, ShareTxnProducer
    from tests.share.test_share_txn_broker import Member, committed_output, offsets_in

    topic, topic_id = new_topic(cluster)
    output, _ = new_topic(cluster)
    leader = cluster.state().leader_of(topic, 0)
    group, share_coordinator = new_group(cluster, topic_id, lambda share, _: share != leader)
    group_coordinator = coordinators(cluster, group, topic_id)[1]
    warm_up = ShareTxnProducer(cluster.bootstrap, "warm-" + uuid.uuid4().hex[:8], timeout_s=60)
    warm_up.init()  # __transaction_state exists now
    warm_up.close()
    state = cluster.state()
    transactional_id = next(t for t in ("w-" + uuid.uuid4().hex[:8] for _ in range(200))
                            if state.leader_of("__transaction_state", partition_for(t, 4))
                            not in (leader, share_coordinator))
    produce(cluster, topic, 5)
    member = Member(cluster.broker(group_coordinator).bootstrap, group, topic, cluster.broker(leader).bootstrap)
    other = Member(cluster.broker(group_coordinator).bootstrap, group, topic, cluster.broker(leader).bootstrap)
    producer = ShareTxnProducer(cluster.bootstrap, transactional_id, transaction_timeout_ms=20_000, timeout_s=60)
    producer.init()
    try:
        assert member.fetch_until(lambda got: got) == [(0, 4, 1)]
        producer.send(output, b"aborted")
        producer.acknowledge(group, [(topic, 0, o, ACCEPT) for o in range(3)], member_id=member.member_id)
        assert other.fetch_until(lambda got: 3 in offsets_in(got)) == [(3, 4, 2)]  # 0-2 held past their lock
        producer.abort()
        assert other.fetch_until(lambda got: 0 in offsets_in(got)) == [(0, 2, 2)]
        # unregistered (a fresh transaction that registered only its output): the remote check refuses it
        producer.send(output, b"committed")
        producer._registered.add((group, topic_id, 0))  # make the client skip AddSharePartitionsToTxn
        with pytest.raises(ShareAcknowledgeError) as refused:
            producer.acknowledge(group, [(topic, 0, 0, ACCEPT)])
        assert refused.value.code == ErrorCode.INVALID_TXN_STATE
        producer._registered.clear()
        producer.acknowledge(group, [(topic, 0, o, ACCEPT) for o in range(5)])
        producer.commit()
        assert committed_output(cluster.bootstrap, output) == [b"committed"]
        produce(cluster, topic, 1)
        assert member.fetch_until(lambda got: 5 in offsets_in(got)) == [(5, 5, 1)]
    finally:
        producer.close()
        member.close()
        other.close()


def test_the_share_coordinators_broker_killed_while_a_transaction_holds_records(cluster):
    """SIGKILL of the share coordinator's broker while a transaction holds records: the new share coordinator
    loads the pending set with the rest of the state, the transaction's COMMIT marker follows the
    ``__share_group_state`` partition to it, and the leader learns the outcome there: the records the
    transaction accepted never come again, the others do, and the output shows once."""
    from eoslog.client.share_txn import ACCEPT, ShareTxnProducer
    from tests.share.test_share_txn_broker import Member, committed_output, offsets_in

    topic, topic_id = new_topic(cluster)
    output, _ = new_topic(cluster)
    leader = cluster.state().leader_of(topic, 0)
    group, share_coordinator = new_group(cluster, topic_id, lambda share, group: leader != share != group)
    group_coordinator = coordinators(cluster, group, topic_id)[1]
    warm_up = ShareTxnProducer(cluster.bootstrap, "warm-" + uuid.uuid4().hex[:8], timeout_s=60)
    warm_up.init()  # __transaction_state exists now
    warm_up.close()
    state = cluster.state()
    transactional_id = next(t for t in ("k-" + uuid.uuid4().hex[:8] for _ in range(200))
                            if state.leader_of("__transaction_state", partition_for(t, 4))
                            not in (None, -1, share_coordinator))
    produce(cluster, topic, 4)
    index = partition_for(share_key(group, topic_id), STATE_PARTITIONS)
    epoch = state.epoch_of(SHARE_STATE, index)
    member = Member(cluster.broker(group_coordinator).bootstrap, group, topic, cluster.broker(leader).bootstrap)
    producer = ShareTxnProducer(cluster.bootstrap, transactional_id, transaction_timeout_ms=60_000, timeout_s=60)
    producer.init()
    try:
        assert member.fetch_until(lambda got: got) == [(0, 3, 1)]
        producer.send(output, b"done-0-1")
        producer.acknowledge(group, [(topic, 0, 0, ACCEPT), (topic, 0, 1, ACCEPT)], member_id=member.member_id)
        cluster.broker(share_coordinator).kill()
        moved = cluster.wait_for(lambda s: s.leader_of(SHARE_STATE, index) not in (None, -1, share_coordinator)
                                 and s.epoch_of(SHARE_STATE, index) > epoch, 60, "the share coordinator moved")
        producer.commit()
        assert committed_output(cluster.bootstrap, output) == [b"done-0-1"]
        # the commit applied, not merely held: the new share coordinator's start offset passes 0-1
        new_coordinator = cluster.broker(moved.leader_of(SHARE_STATE, index)).bootstrap
        deadline = time.monotonic() + 30
        while summary(new_coordinator, group, topic_id).start_offset != 2:
            assert time.monotonic() < deadline, summary(new_coordinator, group, topic_id)
            time.sleep(0.1)
        produce(cluster, topic, 1)
        got = member.fetch_until(lambda got: 4 in offsets_in(got), timeout=60)
        assert not offsets_in(got) & {0, 1}, got
        deadline, seen = time.monotonic() + 3 * LOCK_MS / 1000, offsets_in(got)
        while time.monotonic() < deadline:
            seen |= offsets_in(member.fetch(max_wait_ms=200))
        assert seen >= {2, 3, 4} and not seen & {0, 1}, seen
    finally:
        producer.close()
        member.close()
        restart(cluster, share_coordinator)
