"""confluent-kafka consumers with ``group.protocol=consumer`` (KIP-848) against a real broker process:
three members over a 6-partition topic while messages flow; one is SIGKILLed and a new one starts.
Commit-after-process: nothing is lost, and a message is processed twice only in the crashed member's
uncommitted tail -- no committed message is processed again, which needs the coordinator to hand a
partition to a new owner only after the old one revoked it (or its session ended)."""

from __future__ import annotations

import pytest

from eoslog.testing.wait import wait_until
from tests.groups.conftest import create_topic
from tests.groups.harness import (
    ConsumerProcess,
    PacedProducer,
    check_at_least_once,
    distinct_processed,
    read_history,
    stop_running,
)

PARTITIONS = 6


@pytest.mark.parametrize("assignor", ["consumer", "consumer:range"])
def test_three_members_crash_and_restart_consume_every_message_once_committed(consumer_broker, tmp_path, assignor):
    count = 12_000
    bootstrap = consumer_broker.bootstrap
    topic, group = "kip848", f"kip848-{assignor.replace(':', '-')}"
    create_topic(bootstrap, topic, PARTITIONS)
    members: list[ConsumerProcess] = []

    def start(i: int, commit_delay_ms: int = 0) -> ConsumerProcess:
        member = ConsumerProcess(tmp_path, f"m{i}", "confluent", bootstrap, group, topic, assignor,
                                 commit_delay_ms=commit_delay_ms)
        members.append(member)
        return member

    producer = PacedProducer(bootstrap, topic, count, PARTITIONS, rate=3000)
    try:
        # The member that will crash processes slowly, so the SIGKILL most likely lands between
        # processing a batch and committing it.
        first = [start(0), start(1), start(2, commit_delay_ms=200)]
        producer.start()
        wait_until(lambda: distinct_processed(members) >= 3000, 30, "the first 3,000 messages")
        first[2].kill()
        start(3)  # the restart: a new process takes the crashed one's place
        producer.join(30)
        assert not producer.errors and producer.delivered == count
        wait_until(lambda: distinct_processed(members) >= count, 30, "every message processed")
        stop_running(members)
    finally:
        for member in members:
            member.cleanup()
    verdict = check_at_least_once(read_history(members), count, members)
    print(f"{assignor}: {verdict}")
    assert members[3].processed() > 0, "the restarted member got no partitions"
    # Every message's offset is committed: the group's committed positions reach the log end.
    from confluent_kafka import Consumer, TopicPartition

    admin = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = admin.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    finally:
        admin.close()
    assert sum(tp.offset for tp in committed) == count, committed
