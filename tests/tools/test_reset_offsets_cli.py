"""`eoslog groups reset-offsets` against a real broker, checked with what a confluent-kafka consumer of
the group reads as committed: a dry run commits nothing, --execute commits each target (earliest, latest,
datetime, offset, shift), and a group with an active member is refused. ``plan`` is unit-tested apart."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.testing.wait import wait_until
from eoslog.tools.groups_cli import groups_group
from eoslog.tools.reset_offsets import Reset, Target, parse_datetime, plan

pytestmark = pytest.mark.interop
GROUP = "resettable"
TP0, TP1 = ("r", 0), ("r", 1)


def test_plan_keeps_targets_within_the_log():
    current = {TP0: 5, TP1: None}
    low, high = {TP0: 2, TP1: 0}, {TP0: 10, TP1: 4}
    assert [r.new_offset for r in plan(Target("earliest"), current, low, high)] == [2, 0]
    assert [r.new_offset for r in plan(Target("latest"), current, low, high)] == [10, 4]
    assert [r.new_offset for r in plan(Target("offset", 7), current, low, high)] == [7, 4]
    assert [r.new_offset for r in plan(Target("offset", 0), current, low, high)] == [2, 0]
    assert [r.new_offset for r in plan(Target("shift", -4), current, low, high)] == [2, 0]
    assert [r.new_offset for r in plan(Target("shift", 3), current, low, high)] == [8, 3]
    # no record at or after the time: the high watermark, as Kafka does
    assert plan(Target("datetime", 1), current, low, high, {TP0: 6, TP1: -1}) == [Reset("r", 0, 5, 6),
                                                                                   Reset("r", 1, None, 4)]
    assert parse_datetime("2026-11-25T08:00:00Z") == parse_datetime("2026-11-25T08:00:00") == 1795593600000
    assert parse_datetime("2026-11-25T09:00:00+01:00") == 1795593600000


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(groups_group, ["reset-offsets", GROUP, *args])
    assert result.exit_code == code, result.output
    return result


def committed(bootstrap: str) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        return {tp.partition: tp.offset for tp in consumer.committed(
            [confluent_kafka.TopicPartition("r", p) for p in (0, 1)], 10)}
    finally:
        consumer.close()


def test_dry_run_execute_each_target_and_refuse_an_active_group(eoslog_broker):
    bootstrap = eoslog_broker
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("r", 2, 1)])["r"].result(10)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for n in range(10):
        producer.produce("r", value=b"%d" % n, partition=n % 2, timestamp=1_000_000 + n * 1000)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    consumer.commit(offsets=[confluent_kafka.TopicPartition("r", 0, 3)], asynchronous=False)
    consumer.close()

    dry = run("--topic", "r", "--to-earliest", "-b", bootstrap)
    rows = [line.split() for line in dry.output.splitlines()]
    assert rows[:3] == [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                        [GROUP, "r", "0", "3", "0"], [GROUP, "r", "1", "-", "0"]]
    assert "dry run: nothing committed" in dry.output
    assert committed(bootstrap)[0] == 3 and committed(bootstrap)[1] < 0

    run("--topic", "r", "--to-latest", "--execute", "-b", bootstrap)
    assert committed(bootstrap) == {0: 5, 1: 5}
    run("--topic", "r:1", "--to-offset", "2", "--execute", "--bootstrap", bootstrap)
    assert committed(bootstrap) == {0: 5, 1: 2}
    shifted = json.loads(run("--all-topics", "--shift-by", "-1", "--execute", "--json", "-b", bootstrap).output)
    assert shifted["executed"] and [(p["partition"], p["current_offset"], p["new_offset"])
                                    for p in shifted["partitions"]] == [(0, 5, 4), (1, 2, 1)]
    assert committed(bootstrap) == {0: 4, 1: 1}
    # record n (partition n % 2) has timestamp 1000 s + n s: at or after 1006 s come records 6 and 7, offset 3 of each
    run("--topic", "r", "--to-datetime", "1970-01-01T00:16:46Z", "--execute", "-b", bootstrap)
    assert committed(bootstrap) == {0: 3, 1: 3}
    run("--topic", "r", "--to-offset", "99", "--execute", "-b", bootstrap)
    assert committed(bootstrap) == {0: 5, 1: 5}

    member = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                       "enable.auto.commit": False})
    member.subscribe(["r"])
    try:
        wait_until(lambda: member.poll(0.1) is not None or member.assignment(), 15, "the member's assignment")
        refused = run("--topic", "r", "--to-earliest", "--execute", "-b", bootstrap, code=1)
        assert f"group {GROUP} is Stable: offsets can be reset only while it has no active members" in refused.output
    finally:
        member.close()
    assert committed(bootstrap) == {0: 5, 1: 5}

    neither = run("--to-earliest", "-b", bootstrap, code=2)
    assert "give --topic (repeatable) or --all-topics" in neither.output
    two = run("--topic", "r", "--to-earliest", "--to-offset", "1", "-b", bootstrap, code=2)
    assert "exactly one of" in two.output
    bad_time = run("--topic", "r", "--to-datetime", "yesterday", "-b", bootstrap, code=2)
    assert "expected ISO 8601" in bad_time.output
    missing = run("--topic", "r:7", "--to-earliest", "-b", bootstrap, code=1)
    assert "topic r has no partition 7" in missing.output
