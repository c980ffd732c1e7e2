"""One output style for the admin tools (issue 40): with nothing to show they print "none" (or `[]` with
--json), a name that does not exist is a one-line error with exit status 1, and --json prints what the
table shows. Tables have upper-case, hyphenated headers and no box.

Two embedded brokers for the module: one never written to (the empty cases do not depend on which tests
ran before them on this worker) and one the JSON cases write to with confluent-kafka.
"""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.cli import main
from eoslog.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.interop


def eoslog(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def empty(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("empty") / "data") as broker:
        yield broker.bootstrap


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("written") / "data") as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("one", 1, 1)]).values():
            future.result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "style-tx"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("one", b"v")
        producer.commit_transaction(30)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "style-group",
                                             "enable.auto.commit": False})
        consumer.commit(offsets=[confluent_kafka.TopicPartition("one", 0, 1)], asynchronous=False)
        consumer.close()
        yield bootstrap


EMPTY = [("topics", "list"), ("groups", "list"), ("transactions", "list"), ("transactions", "find-hanging"),
         ("users", "list"), ("share-groups", "list")]


@pytest.mark.parametrize("command", EMPTY, ids=" ".join)
def test_nothing_to_show_is_none_and_an_empty_json_list(empty, command):
    assert eoslog(*command, "-b", empty) == (0, "none\n")
    assert eoslog(*command, "-b", empty, "--json") == (0, "[]\n")


NOT_FOUND = [
    (("topics", "describe", "nope"), "Error: topic nope: UNKNOWN_TOPIC_OR_PARTITION"),
    (("topics", "delete", "nope"), "Error: DeleteTopics nope: UNKNOWN_TOPIC_OR_PARTITION"),
    (("configs", "describe", "--topic", "nope"),
     "Error: DescribeConfigs topic nope: UNKNOWN_TOPIC_OR_PARTITION: topic 'nope' does not exist"),
    (("groups", "describe", "nope"), "Error: group nope not found (eoslog groups list shows the groups)"),
    (("transactions", "describe", "nope"), "Error: DescribeTransactions nope: TRANSACTIONAL_ID_NOT_FOUND"),
    (("producers", "describe", "nope-0"), "Error: DescribeProducers nope-0: UNKNOWN_TOPIC_OR_PARTITION"),
    (("share-groups", "describe", "nope"), "Error: share group nope not found (eoslog share-groups list shows them)"),
]


@pytest.mark.parametrize(("command", "line"), NOT_FOUND, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_not_found_is_one_line_and_exit_status_1(empty, command, line):
    for as_json in ([], ["--json"]):
        assert eoslog(*command, "-b", empty, *as_json) == (1, line + "\n")


def test_json_shows_what_the_tables_show(written):
    code, output = eoslog("topics", "list", "-b", written, "--json")
    topics = {t["topic"]: t for t in json.loads(output)}
    assert code == 0 and topics["one"] == {"topic": "one", "partitions": 1, "replication_factor": 1,
                                           "internal": False}
    code, output = eoslog("topics", "list", "-b", written)
    header, *rows = output.splitlines()
    assert code == 0 and header.split() == ["TOPIC", "PARTITIONS", "REPLICATION", "INTERNAL"]
    assert ["one", "1", "1"] in [row.split() for row in rows]
    assert not any(ch in output for ch in "│─┃━"), output  # no box
    code, output = eoslog("topics", "describe", "one", "-b", written)
    assert code == 0 and output.startswith("topic one: 1 partition, replication factor 1,"), output

    code, output = eoslog("transactions", "list", "-b", written, "--json")
    [listed] = json.loads(output)
    assert code == 0 and (listed["transactional_id"], listed["state"], listed["checks"]) == (
        "style-tx", "CompleteCommit", None)
    code, output = eoslog("transactions", "list", "-b", written)
    header, row = output.splitlines()
    assert header.split() == ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "CHECKS"]
    assert row.split() == ["style-tx", str(listed["producer_id"]), "CompleteCommit", "-"]
    code, output = eoslog("transactions", "describe", "style-tx", "-b", written, "--json")
    described = json.loads(output)
    assert (code, described["state"], described["partitions"], described["check_back"]) == (
        0, "CompleteCommit", [], None)

    code, output = eoslog("producers", "describe", "one-0", "-b", written, "--json")
    [producer] = json.loads(output)
    assert code == 0 and producer["producer_id"] == listed["producer_id"]
    assert producer["current_txn_start_offset"] == -1

    code, output = eoslog("topics", "alter", "one", "--config", "retention.ms=86400000", "-b", written, "--json")
    assert (code, json.loads(output)) == (0, {"topic": "one", "configs_set": {"retention.ms": "86400000"},
                                              "configs_deleted": [], "partitions": None})
    code, output = eoslog("configs", "alter", "--topic", "one", "--delete", "retention.ms", "-b", written, "--json")
    assert (code, json.loads(output)) == (0, {"resource": "topic one", "set": {}, "deleted": ["retention.ms"],
                                              "validate_only": False})

    code, output = eoslog("groups", "describe", "style-group", "-b", written, "--json")
    group = json.loads(output)
    assert code == 0 and [(p["topic"], p["committed_offset"]) for p in group["partitions"]] == [("one", 1)]
    code, output = eoslog("groups", "describe", "style-group", "-b", written)
    first, _, header, row, *_ = output.splitlines()
    assert code == 0 and first.startswith("group style-group (classic): Empty") and first.endswith(", 0 members")
    assert header.split() == ["TOPIC", "PARTITION", "COMMITTED", "LAST-STABLE", "LAG", "MEMBER"]
    assert row.split() == ["one", "0", "1", "2", "1", "-"]


def test_users_offline_json_and_not_found(tmp_path):
    """`eoslog users` on a data directory (no broker): add and delete print JSON with --json, and deleting
    a user that has no credential is an error with exit status 1."""
    data_dir = str(tmp_path / "data")
    result = CliRunner().invoke(main, ["users", "add", "alice", "--password-file", "-", "--mechanism", "SCRAM-SHA-256",
                                       "--iterations", "4096", "--data-dir", data_dir, "--json"], input="secret\n")
    assert (result.exit_code, json.loads(result.output)) == (0, {"user": "alice", "set": ["SCRAM-SHA-256"],
                                                                 "iterations": 4096})
    assert json.loads(eoslog("users", "list", "--data-dir", data_dir, "--json")[1]) == [
        {"user": "alice", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096}]}]
    assert eoslog("users", "list", "--data-dir", data_dir) == (
        0, "USER   MECHANISMS\nalice  SCRAM-SHA-256 (4096 iterations)\n")
    code, output = eoslog("users", "delete", "alice", "--data-dir", data_dir, "--json")
    assert (code, json.loads(output)) == (0, {"user": "alice", "removed": ["SCRAM-SHA-256"]})
    assert eoslog("users", "list", "--data-dir", data_dir) == (0, "none\n")
    assert eoslog("users", "delete", "alice", "--data-dir", data_dir) == (1, "Error: user alice has no such credential\n")
