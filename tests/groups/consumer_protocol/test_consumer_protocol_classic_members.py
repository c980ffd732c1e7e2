"""Classic-protocol confluent-kafka consumers inside a consumer group (KIP-848), on an in-process broker
whose request decoder is recorded: a dynamic one goes through MEMBER_ID_REQUIRED (its second JoinGroup
carries the id the first answer handed out, as against Kafka 4.x), and a static one
(``group.instance.id``) that restarts -- librdkafka sends no LeaveGroup for a static member -- comes
back to the same partitions while the others keep theirs and the group epoch stays."""

from __future__ import annotations

import confluent_kafka

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.request_recorder import RequestRecorder
from eoslog.testing.wait import wait_until
from tests.groups.conftest import create_topic
from tests.groups.consumer_protocol.conftest import CONSUMER_GROUP_PROPERTIES

TOPIC, GROUP = "mixed-static", "mixed-static-group"
JOIN_GROUP = 11


def described(bootstrap: str):
    with BrokerConnection.from_bootstrap(bootstrap) as conn:
        return conn.request(69, 1, messages.ConsumerGroupDescribeRequest(
            group_ids=[GROUP], include_authorized_operations=False)).groups[0]


def consumer(bootstrap: str, client_id: str, protocol: str, **extra) -> confluent_kafka.Consumer:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": protocol,
                                  "client.id": client_id, "auto.offset.reset": "earliest", **extra})
    c.subscribe([TOPIC])
    return c


def held(*consumers) -> list[set[int]]:
    for c in consumers:
        c.poll(0.05)
    return [{tp.partition for tp in c.assignment()} for c in consumers]


def test_classic_members_join_a_consumer_group_and_a_static_one_comes_back(tmp_path):
    static = {"group.instance.id": "static-1", "session.timeout.ms": 30000}
    with EmbeddedBroker(tmp_path / "data", properties=CONSUMER_GROUP_PROPERTIES) as broker, \
            RequestRecorder() as recorder:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, TOPIC, 6)
        modern = consumer(bootstrap, "modern", "consumer")
        members = [modern]
        try:
            wait_until(lambda: held(modern) == [set(range(6))], 15, "the consumer-protocol member holding all")
            members.append(consumer(bootstrap, "dynamic", "classic"))
            members.append(consumer(bootstrap, "static", "classic", **static))

            def settled() -> bool:
                sets = held(*members)
                return all(len(s) == 2 for s in sets) and set().union(*sets) == set(range(6))

            wait_until(settled, 30, "two partitions each")
            before = held(*members)
            epoch = described(bootstrap).group_epoch
            # The dynamic member's JoinGroups: the first without an id, answered MEMBER_ID_REQUIRED; the
            # next with the id that answer carried, which is the member the group now has.
            joins = [r.request for r in recorder.requests if r.api_key == JOIN_GROUP and r.client_id == "dynamic"]
            assert joins[0].member_id == "" and joins[1].member_id
            assert joins[1].member_id in {m.member_id for m in described(bootstrap).members}
            # The static member restarts: no LeaveGroup, a JoinGroup with its instance id and no member id.
            members.pop().close()
            members.append(consumer(bootstrap, "static", "classic", **static))
            wait_until(lambda: held(*members) == before, 20, "the static member back on its partitions")
            after = described(bootstrap)
            assert after.group_epoch == epoch and len(after.members) == 3  # no rebalance
            restarted = [r.request for r in recorder.requests if r.api_key == JOIN_GROUP and r.client_id == "static"]
            assert all(j.group_instance_id == "static-1" for j in restarted)
            assert not any(r.api_key == 13 and r.client_id == "static" for r in recorder.requests)  # LeaveGroup
        finally:
            for c in members:
                c.close()
