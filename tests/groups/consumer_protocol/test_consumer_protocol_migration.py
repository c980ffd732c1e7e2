"""A group moves from the classic protocol to the consumer protocol (KIP-848), with confluent-kafka
consumers while messages flow. Offline: classic members leave, consumer-protocol members take the
Empty group over and resume from the committed offsets, then leave and classic members take it back.
Online (Kafka 4.0's mixed group): consumer-protocol members join a live classic group, the classic
members carry on inside the consumer group and hand partitions over, then leave one by one.
Commit-after-process: every message processed, none that was committed processed again."""

from __future__ import annotations

import threading

import pytest

from eoslog.client.connection import BrokerConnection
from eoslog.testing.wait import wait_until
from eoslog.tools.groups_cli import describe_group, list_groups
from tests.groups.conftest import create_topic
from tests.groups.harness import (
    ConsumerProcess,
    PacedProducer,
    check_at_least_once,
    distinct_processed,
    read_history,
    stop_running,
)

PARTITIONS = 4


def group_type_and_state(bootstrap: str, group: str):
    with BrokerConnection.from_bootstrap(bootstrap) as conn:
        listed = {g.group_id: (g.group_type, g.state) for g in list_groups(conn)}
    return listed.get(group)


def test_classic_to_consumer_protocol_and_back_without_loss(consumer_broker, tmp_path):
    count = 9_000
    bootstrap = consumer_broker.bootstrap
    topic, group = "migrate", "migrating"
    create_topic(bootstrap, topic, PARTITIONS)
    members: list[ConsumerProcess] = []

    def start_phase(phase: int, assignor: str) -> list[ConsumerProcess]:
        started = [ConsumerProcess(tmp_path, f"p{phase}m{i}", "confluent", bootstrap, group, topic, assignor)
                   for i in range(2)]
        members.extend(started)
        return started

    # Each phase must find records left to consume: the members of a phase process until their close ends,
    # and on a loaded machine the 3 s of production could end inside the first phase (seen: the classic
    # members processed all 9,000, and the next phase waited for work that could not come). Production
    # goes on during each hand-over, but its last records wait for the next phase's members.
    second_phase, third_phase = threading.Event(), threading.Event()
    producer = PacedProducer(bootstrap, topic, count, PARTITIONS, rate=3000,
                             holds={6_000: second_phase, 8_000: third_phase})
    try:
        classic = start_phase(0, "range")
        producer.start()
        wait_until(lambda: distinct_processed(members) >= 2000, 30, "2,000 messages with classic members")
        assert group_type_and_state(bootstrap, group)[0] == "classic"
        for member in classic:
            member.terminate()
        wait_until(lambda: group_type_and_state(bootstrap, group) == ("classic", "Empty"), 10, "an empty classic group")

        consumers = start_phase(1, "consumer")
        second_phase.set()
        # The classic members process until their close ends, so the total alone may pass 5,000 before a
        # consumer-protocol member has joined (seen in a fresh-clone run): wait for these members' own work.
        wait_until(lambda: distinct_processed(members) >= 5000 and sum(m.processed() for m in consumers) >= 500,
                   30, "5,000 messages, 500 of them by consumer-protocol members")
        assert group_type_and_state(bootstrap, group)[0] == "consumer"
        for member in consumers:
            member.terminate()
        wait_until(lambda: group_type_and_state(bootstrap, group) == ("consumer", "Empty"), 10,
                   "an empty consumer group")

        classic_again = start_phase(2, "range")
        third_phase.set()
        producer.join(30)
        assert not producer.errors and producer.delivered == count
        wait_until(lambda: distinct_processed(members) >= count and sum(m.processed() for m in classic_again) > 0,
                   30, "every message processed, some by the classic members again")
        assert group_type_and_state(bootstrap, group)[0] == "classic"
        stop_running(members)
    finally:
        second_phase.set()
        third_phase.set()
        for member in members:
            member.cleanup()
    verdict = check_at_least_once(read_history(members), count, members)
    print(f"migration: {verdict}")
    assert verdict.duplicates == 0  # clean hand-overs: nothing processed twice
    for phase in range(3):  # each protocol's members really consumed their share
        assert sum(m.processed() for m in members if m.name.startswith(f"p{phase}")) > 0, f"phase {phase}"


@pytest.mark.parametrize("leaving", ["classic", "consumer"])
def test_mixed_group_classic_members_then_consumer_protocol_members(consumer_broker, tmp_path, leaving):
    """Consumer-protocol members join a live classic group (it becomes a consumer group, the classic members
    carry on inside it); then one side leaves: the classic members (a consumer group remains) or the
    consumer-protocol ones (a classic group again, Kafka 4.0's downgrade)."""
    count = 16_000  # 8 s at 2,000/s: still producing while the new members get their partitions
    bootstrap = consumer_broker.bootstrap
    topic, group = f"mixed-{leaving}", f"mixing-{leaving}"
    create_topic(bootstrap, topic, PARTITIONS)
    members: list[ConsumerProcess] = []

    def start(name: str, assignor: str) -> ConsumerProcess:
        member = ConsumerProcess(tmp_path, name, "confluent", bootstrap, group, topic, assignor)
        members.append(member)
        return member

    def processed_by(prefix: str) -> int:
        return sum(m.processed() for m in members if m.name.startswith(prefix))

    producer = PacedProducer(bootstrap, topic, count, PARTITIONS, rate=2000)
    try:
        classic = [start("classic0", "range"), start("classic1", "range")]
        producer.start()
        wait_until(lambda: processed_by("classic") >= 1500, 30, "1,500 messages with classic members")

        def stable_with_both():
            with BrokerConnection.from_bootstrap(bootstrap) as conn:
                view = describe_group(conn, group)
            return view.state == "Stable" and len(view.members) == 2

        # As in Kafka, only a Stable classic group converts (else the heartbeat is GROUP_ID_NOT_FOUND,
        # fatal to the client): upgrades are rolled onto a settled group.
        wait_until(stable_with_both, 15, "a Stable classic group of 2")
        new = [start("new0", "consumer"), start("new1", "consumer")]
        # The group became a consumer group with the classic members still in it; the new members get
        # partitions once the classic ones gave them up.
        wait_until(lambda: group_type_and_state(bootstrap, group)[0] == "consumer", 15, "the upgrade")
        # Each of them: the later assertion is about each, and new1 may get its partition a second or two
        # after new0 (its process started later, or the classic member giving it up heartbeats later).
        wait_until(lambda: processed_by("new") >= 500 and all(m.processed() > 0 for m in new), 30,
                   "each new member consuming")
        for member in classic if leaving == "classic" else new:
            member.terminate()
        remaining = new if leaving == "classic" else classic
        expected_type = "consumer" if leaving == "classic" else "classic"
        wait_until(lambda: group_type_and_state(bootstrap, group)[0] == expected_type, 15, f"a {expected_type} group")
        producer.join(30)
        assert not producer.errors and producer.delivered == count
        wait_until(lambda: len(read_history(members).values()) >= count, 30, "every message processed")
        assert all(m.processed() > 0 for m in new)
        assert group_type_and_state(bootstrap, group) == (expected_type, "Stable")
        for member in remaining:
            member.terminate()
    finally:
        for member in members:
            member.cleanup()
    verdict = check_at_least_once(read_history(members), count, members)
    print(f"mixed group, {leaving} members leaving: {verdict}")
