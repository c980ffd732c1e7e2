"""Real consumers of three clients in groups over a 6-partition topic while 30,000 messages flow:
members join, leave cleanly and crash (SIGKILL); with commit-after-process nothing is lost and the
only duplicates are a crashed member's uncommitted tail (or a batch whose commit the client saw
fail during a rebalance)."""

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

COUNT = 30_000
PARTITIONS = 6

# Each client under its own name for the assignor; aiokafka has no cooperative-sticky.
SCENARIOS = {
    "range": ["confluent", "kafka-python", "aiokafka", "confluent"],
    "roundrobin": ["aiokafka", "confluent", "kafka-python", "kafka-python"],
    "cooperative-sticky": ["confluent", "kafka-python", "confluent", "kafka-python"],
}


@pytest.mark.parametrize("assignor", [
    "range",
    pytest.param("roundrobin", marks=pytest.mark.slow),
    "cooperative-sticky",  # incremental rebalancing (KIP-429): a different protocol flow, always run
])
def test_members_join_leave_and_crash_while_messages_flow(broker_process, tmp_path, assignor):
    bootstrap = broker_process.bootstrap
    topic, group = f"flow-{assignor}", f"group-{assignor}"
    create_topic(bootstrap, topic, PARTITIONS)
    clients = SCENARIOS[assignor]
    members: list[ConsumerProcess] = []

    def start(i: int, commit_delay_ms: int = 0) -> ConsumerProcess:
        member = ConsumerProcess(tmp_path, f"m{i}-{clients[i]}", clients[i], bootstrap, group, topic, assignor,
                                 commit_delay_ms=commit_delay_ms)
        members.append(member)
        return member

    producer = PacedProducer(bootstrap, topic, COUNT, PARTITIONS, rate=1500)
    try:
        # The member that will crash processes slowly, so the SIGKILL most likely lands between
        # processing a batch and committing it.
        first = [start(0), start(1), start(2, commit_delay_ms=300)]
        producer.start()
        wait_until(lambda: distinct_processed(members) >= 3000, 60, "the first 3,000 messages")
        start(3)  # a fourth member joins
        wait_until(lambda: distinct_processed(members) >= 9000, 60, "9,000 messages after the join")
        first[1].terminate()  # a clean leave (LeaveGroup)
        wait_until(lambda: distinct_processed(members) >= 15000, 60, "15,000 messages after the leave")
        first[2].kill()  # a crash: its partitions return after the session timeout
        producer.join(60)
        assert not producer.errors and producer.delivered == COUNT
        wait_until(lambda: distinct_processed(members) >= COUNT, 60, "every message processed")
        stop_running(members)
    finally:
        for member in members:
            member.cleanup()
    verdict = check_at_least_once(read_history(members), COUNT, members)
    print(f"{assignor}: {verdict}")
    # The survivors did the work after the crash: each one processed something.
    for member in members:
        assert member.processed() > 0, f"{member.name} processed nothing"
