"""`eoslog produce` and `eoslog consume` against a real broker: what the console producer writes (keys,
headers, partitions, one transaction) is what a confluent-kafka consumer reads, and what the console
consumer prints is what a confluent-kafka producer wrote, at both isolation levels, with and without a
group."""

from __future__ import annotations

import json
import subprocess
import sys

import confluent_kafka
import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.testing.wait import wait_until
from eoslog.tools.console_cli import (
    CONSOLE_FETCH_QUEUE_BACKOFF_MS,
    client_config,
    consume_command,
    produce_command,
)

pytestmark = pytest.mark.interop


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> list:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "checker",
                                         "isolation.level": isolation, "enable.auto.commit": False})
    high = {p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 10)[1]
            for p in range(partitions)}
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    try:
        def caught_up() -> bool:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                records.append((message.partition(), message.key(), message.value(), message.headers() or []))
            return all(p.offset >= high[p.partition] for p in consumer.position(
                [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]) if high[p.partition])
        wait_until(caught_up, 15, f"reading {topic}")
    finally:
        consumer.close()
    return records


def produce(*args: str, input: str, code: int = 0):
    result = CliRunner().invoke(produce_command, list(args), input=input)
    assert result.exit_code == code, result.output
    return result


def consume(*args: str, code: int = 0):
    result = CliRunner().invoke(consume_command, list(args))
    assert result.exit_code == code, result.output
    return result


def test_produce_keys_headers_partitions_and_a_transaction(eoslog_broker):
    bootstrap = eoslog_broker
    create(bootstrap, "in", 2)
    done = produce("in", "--key-separator", ":", "--header", "source=cli", "--partition", "1", "-b", bootstrap,
                   input="k1:one\nk2:two:with colon\n\n")
    assert "wrote 2 records to in" in done.output
    assert read_all(bootstrap, "in", 2) == [(1, b"k1", b"one", [("source", b"cli")]),
                                            (1, b"k2", b"two:with colon", [("source", b"cli")])]

    lines = [json.dumps({"key": "a", "value": "x", "headers": {"h": "1"}, "partition": 0}),
             json.dumps({"value": "y", "partition": 0})]
    produce("in", "--json", "--transactional-id", "console-tx", "--bootstrap", bootstrap, input="\n".join(lines))
    committed = [r for r in read_all(bootstrap, "in", 2) if r[0] == 0]
    assert committed == [(0, b"a", b"x", [("h", b"1")]), (0, None, b"y", [])]
    # The records went through a transaction: a control record follows them, so the log end is past them.
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "checker"})
    assert consumer.get_watermark_offsets(confluent_kafka.TopicPartition("in", 0), 10) == (0, 3)
    consumer.close()

    bad = produce("in", "--json", "-b", bootstrap, input="[1, 2]\n", code=1)
    assert "not a JSON object" in bad.output
    no_separator = produce("in", "--key-separator", "|", "-b", bootstrap, input="no separator here\n", code=1)
    assert "no key separator '|'" in no_separator.output


def test_consume_at_both_isolation_levels_and_as_a_group(eoslog_broker):
    bootstrap = eoslog_broker
    create(bootstrap, "out", 2)
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    plain.produce("out", key=b"k", value=b"plain", partition=0, headers=[("h", b"v")])
    plain.produce("out", value=b"\xff\xfe", partition=1)
    assert plain.flush(10) == 0
    open_tx = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "open-tx"})
    open_tx.init_transactions(10)
    open_tx.begin_transaction()
    open_tx.produce("out", value=b"uncommitted", partition=0)
    assert open_tx.flush(10) == 0

    uncommitted = consume("out", "--from-beginning", "--isolation-level", "read_uncommitted", "--max-messages", "3",
                          "--json", "-b", bootstrap)
    rows = sorted((json.loads(line) for line in uncommitted.stdout.splitlines()),
                  key=lambda r: (r["partition"], r["offset"]))
    assert [(r["partition"], r["offset"], r.get("key"), r.get("value"), r.get("value_base64"), r["headers"])
            for r in rows] == [(0, 0, "k", "plain", None, [["h", "v"]]), (0, 1, None, "uncommitted", None, []),
                               (1, 0, None, None, "//4=", [])]
    committed = consume("out", "--from-beginning", "--isolation-level", "read_committed", "--timeout-ms", "1000",
                        "--print-key", "-b", bootstrap)
    assert sorted(committed.stdout.splitlines()) == ["None\t\\xff\\xfe", "k\tplain"]
    open_tx.abort_transaction(10)

    # As a group: what was printed is committed, so the next run goes on from there.
    first = consume("out", "--group", "console", "--from-beginning", "--max-messages", "1",
                    "--isolation-level", "read_committed", "-b", bootstrap)
    assert len(first.stdout.splitlines()) == 1
    checker = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "console"})
    committed_offsets = checker.committed([confluent_kafka.TopicPartition("out", p) for p in (0, 1)], 10)
    checker.close()
    assert sorted(max(tp.offset, 0) for tp in committed_offsets) == [0, 1]
    rest = consume("out", "--group", "console", "--from-beginning", "--max-messages", "1", "--timeout-ms", "5000",
                   "--isolation-level", "read_committed", "-b", bootstrap)
    assert len(rest.stdout.splitlines()) == 1 and rest.stdout not in first.stdout

    missing = consume("nope", "--max-messages", "1", "-b", bootstrap, code=1)
    assert "topic nope" in missing.output


def test_the_console_consumer_backs_off_briefly_unless_its_command_config_says_otherwise(eoslog_broker, tmp_path):
    # librdkafka's 1 s default stalled a drain of small records (docs/benchmarks.md "Consume at 100 B")
    assert client_config("b:1", None, consumer=True)["fetch.queue.backoff.ms"] == CONSOLE_FETCH_QUEUE_BACKOFF_MS
    assert "fetch.queue.backoff.ms" not in client_config("b:1", None)  # a producer has no fetch queue
    settings = tmp_path / "client.properties"
    settings.write_text("fetch.queue.backoff.ms=250\n")
    assert client_config("b:1", str(settings), consumer=True)["fetch.queue.backoff.ms"] == "250"

    create(eoslog_broker, "backoff", 1)
    produce("backoff", "-b", eoslog_broker, input="".join(f"v{i}\n" for i in range(300)))
    printed = consume("backoff", "--from-beginning", "--max-messages", "300", "--command-config", str(settings),
                      "-b", eoslog_broker)
    assert printed.stdout.split() == [f"v{i}" for i in range(300)]
    settings.write_text("fetch.queue.backoff.ms=soon\n")  # librdkafka is given the user's value, and says no
    refused = consume("backoff", "--from-beginning", "--max-messages", "1", "--command-config", str(settings),
                      "-b", eoslog_broker, code=1)
    assert refused.output.startswith("Error: consumer settings: ") and "fetch.queue.backoff.ms" in refused.output


def test_the_eoslog_command_stops_cleanly_when_its_reader_goes_away(eoslog_broker):
    """`eoslog consume ... | head -1` through the real entry point: no traceback, exit code 0, and the group
    commits no more than what went into the pipe."""
    bootstrap = eoslog_broker
    listed = subprocess.run([sys.executable, "-m", "eoslog", "topics", "list", "--json", "--bootstrap", bootstrap],
                            capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
    create(bootstrap, "piped", 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for n in range(2000):  # 200 kB: more than a pipe holds, so the consumer is still writing when it closes
        producer.produce("piped", value=b"%099d" % n)
    assert producer.flush(10) == 0

    process = subprocess.Popen([sys.executable, "-m", "eoslog", "consume", "piped", "--group", "piped",
                                "--from-beginning", "-b", bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.readline() == b"%099d\n" % 0
    process.stdout.close()
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0 and b"Traceback" not in stderr, stderr.decode()
    written = int(stderr.decode().split("processed ")[1].split()[0])
    checker = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "piped"})
    [committed] = checker.committed([confluent_kafka.TopicPartition("piped", 0)], 10)
    checker.close()
    assert 1 <= committed.offset == written < 2000


def test_without_confluent_kafka_the_commands_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # as if it were not installed
    from eoslog.cli import main

    for command in ("produce", "consume"):
        result = CliRunner().invoke(main, [command, "t", "-b", "127.0.0.1:1"], input="x\n")
        assert result.exit_code == 1
        assert result.output == (f"Error: eoslog {command} needs the console extra (confluent_kafka is not "
                                 "installed): pip install 'eoslog[console]'\n")


def test_a_busy_console_port_is_one_line():
    import socket

    from eoslog.cli import main

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        result = CliRunner().invoke(main, ["console", "--listen", f"127.0.0.1:{port}", "-b", "127.0.0.1:1"])
    assert result.exit_code == 1
    assert result.output == (f"Error: port 127.0.0.1:{port} is in use (another console?) — stop it or choose "
                             "another --listen HOST:PORT\n")
