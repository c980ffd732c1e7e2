"""The broker is SIGKILLed under a running group; a consumer goes silent (SIGSTOP)."""

from __future__ import annotations

import time

from eoslog.client.connection import BrokerConnection
from eoslog.testing.wait import wait_until
from eoslog.tools.groups_cli import describe_group
from tests.groups.conftest import create_topic
from tests.groups.harness import ConsumerProcess, PacedProducer, check_at_least_once, read_history

PARTITIONS = 6


def test_broker_sigkill_keeps_commits_and_group_state(broker_process, tmp_path):
    count = 30_000
    bootstrap = broker_process.bootstrap
    topic, group = "survive", "survivors"
    create_topic(bootstrap, topic, PARTITIONS)
    members = [ConsumerProcess(tmp_path, f"m{i}-{client}", client, bootstrap, group, topic, "range")
               for i, client in enumerate(["confluent", "kafka-python", "aiokafka"])]
    producer = PacedProducer(bootstrap, topic, count, PARTITIONS, rate=2000)
    try:
        producer.start()
        wait_until(lambda: len(read_history(members).values()) >= 10_000, 60, "10,000 messages")

        def stable_with_all_members():
            with BrokerConnection.from_bootstrap(bootstrap) as conn:
                view = describe_group(conn, group)
            return view if view.state == "Stable" and len(view.members) == 3 else None

        before = wait_until(stable_with_all_members, 30, "a Stable group of 3")
        broker_process.kill()
        # Every commit a client saw acknowledged is in a history file now: none can happen while the
        # broker is down.
        acknowledged = read_history(members).last_commit
        broker_process.start()
        with BrokerConnection.from_bootstrap(bootstrap) as conn:
            after = describe_group(conn, group)
        # The group came back from __consumer_offsets as it was: same members, same assignment.
        assert after.state == "Stable"
        assert {(m.member_id, tuple(sorted((t, tuple(p)) for t, p in m.assignment.items())))
                for m in after.members} == \
               {(m.member_id, tuple(sorted((t, tuple(p)) for t, p in m.assignment.items())))
                for m in before.members}
        committed = {p.partition: p.committed_offset for p in after.partitions}
        for (member, partition), offset in acknowledged.items():
            assert committed[partition] >= offset, \
                f"{member}'s acknowledged commit {offset} of partition {partition} was lost: {committed}"

        producer.join(90)
        assert not producer.errors and producer.delivered == count
        wait_until(lambda: len(read_history(members).values()) >= count, 90, "every message processed")
        for member in members:
            member.terminate()
    finally:
        for member in members:
            member.cleanup()
    # Consumers resumed from their commits: no committed message was processed again.
    verdict = check_at_least_once(read_history(members), count, members)
    print(f"broker kill: {verdict}")


def test_session_timeout_expels_a_silent_member(broker_process, tmp_path):
    bootstrap = broker_process.bootstrap
    topic, group = "silence", "quiet"
    session_ms = 6000
    create_topic(bootstrap, topic, PARTITIONS)
    members = [ConsumerProcess(tmp_path, f"m{i}-{client}", client, bootstrap, group, topic, "range",
                               session_ms=session_ms)
               for i, client in enumerate(["confluent", "aiokafka"])]
    try:
        def view():
            with BrokerConnection.from_bootstrap(bootstrap) as conn:
                return describe_group(conn, group)

        def assigned(v) -> dict[str, int]:
            return {m.client_id: sum(len(p) for p in m.assignment.values()) for m in v.members}

        wait_until(lambda: (v := view()).state == "Stable" and sorted(assigned(v).values()) == [3, 3], 60,
                   "two members with three partitions each")
        members[1].pause()
        silenced = time.monotonic()
        survivor = wait_until(lambda: (v := view()).state == "Stable" and list(assigned(v).values()) == [6]
                              and v, 30, "the survivor to own every partition", interval=0.05)
        elapsed = time.monotonic() - silenced
        assert survivor.members[0].client_id.startswith("confluent")
        # Expelled by the session timeout (not earlier), and the partitions moved within it (plus the
        # survivor's one-second heartbeat that learns of the rebalance and its rejoin).
        assert session_ms / 1000 - 1.5 <= elapsed <= session_ms / 1000 + 3, elapsed
        print(f"silent member expelled and its partitions reassigned {elapsed:.2f} s after SIGSTOP")

        # The survivor now consumes every partition.
        PacedProducer(bootstrap, topic, 600, PARTITIONS, rate=10_000).run()
        wait_until(lambda: {p.partition for p in read_history(members[:1]).processings} == set(range(PARTITIONS)),
                   30, "the survivor to read every partition")
        # The silent member wakes up, learns it was expelled, and rejoins.
        members[1].resume()
        wait_until(lambda: (v := view()).state == "Stable" and sorted(assigned(v).values()) == [3, 3], 60,
                   "the woken member to rejoin")
        for member in members:
            member.terminate()
    finally:
        for member in members:
            member.cleanup()
