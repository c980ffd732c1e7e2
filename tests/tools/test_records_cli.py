"""`eoslog records delete-before` against a real broker: the new log start offsets are what a
confluent-kafka consumer sees as the low watermarks and where it starts reading."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.tools.records_cli import records_group

pytestmark = pytest.mark.interop


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(records_group, ["delete-before", *args])
    assert result.exit_code == code, result.output
    return result


def low_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "checker"})
    try:
        return [consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 10)[0]
                for p in range(partitions)]
    finally:
        consumer.close()


def test_delete_before_an_offset_a_file_of_offsets_and_the_high_watermark(eoslog_broker, tmp_path):
    bootstrap = eoslog_broker
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("d", 3, 1)])["d"].result(10)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for n in range(30):
        producer.produce("d", value=b"%d" % n, partition=n % 3)
    assert producer.flush(10) == 0

    table = run("--topic", "d", "--partition", "1", "--offset", "4", "-b", bootstrap).output
    assert ["d", "1", "4", "4", "-"] in [line.split() for line in table.splitlines()]
    assert low_watermarks(bootstrap, "d", 3) == [0, 4, 0]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "fresh",
                                         "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition("d", 1, confluent_kafka.OFFSET_BEGINNING)])
    first = consumer.consume(1, 10)
    consumer.close()
    assert [(m.offset(), m.value()) for m in first] == [(4, b"13")]

    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [{"topic": "d", "partition": 0, "offset": 7},
                                                                {"topic": "d", "partition": 2, "offset": -1}]}))
    rows = json.loads(run("--offset-json-file", str(offsets), "--bootstrap", bootstrap, "--json").output)
    assert rows == [{"topic": "d", "partition": 0, "requested": 7, "low_watermark": 7, "error": ""},
                    {"topic": "d", "partition": 2, "requested": -1, "low_watermark": 10, "error": ""}]
    assert low_watermarks(bootstrap, "d", 3) == [7, 4, 10]

    beyond = run("--topic", "d", "--partition", "0", "--offset", "50", "-b", bootstrap, code=1)
    assert "1 of 1 partitions failed: d-0 OFFSET_OUT_OF_RANGE" in beyond.output
    assert low_watermarks(bootstrap, "d", 3) == [7, 4, 10]
    missing = run("--topic", "d", "--partition", "5", "--offset", "1", "-b", bootstrap, code=1)
    assert "topic d has no partition 5" in missing.output
    no_topic = run("--topic", "nope", "--offset", "1", "-b", bootstrap, code=1)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in no_topic.output
    offsets.write_text('{"partitions": [{"topic": "d"}]}')
    malformed = run("--offset-json-file", str(offsets), "-b", bootstrap, code=2)
    assert "expected" in malformed.output
    incomplete = run("--topic", "d", "-b", bootstrap, code=2)
    assert "give --topic and --offset" in incomplete.output
