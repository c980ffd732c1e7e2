"""The embedded broker and the pytest plugin: a real broker, reached over TCP by a real client."""

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition

from eoslog.testing.embedded import embedded_broker


def roundtrip(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for i in range(count):
        producer.produce(topic, value=f"m{i}".encode())
    assert producer.flush(20) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    values = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, "no end-of-partition within 10 s"
        if msg.error():
            assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, msg.error()
            break
        values.append(msg.value())
    consumer.close()
    return values


def test_pytest_plugin_fixture_gives_a_working_broker(eoslog_broker):
    host, port = eoslog_broker.split(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert roundtrip(eoslog_broker, "plugin", 100) == [f"m{i}".encode() for i in range(100)]


def test_context_manager_keeps_data_in_the_given_directory_across_restarts(tmp_path):
    with embedded_broker(tmp_path / "data") as bootstrap:
        roundtrip(bootstrap, "kept", 10)
    with embedded_broker(tmp_path / "data") as bootstrap:
        assert roundtrip(bootstrap, "kept", 5) == [f"m{i}".encode() for i in range(10)] + [f"m{i}".encode() for i in range(5)]


def test_a_second_broker_cannot_open_the_same_data_directory(tmp_path):
    with embedded_broker(tmp_path / "data"):
        with pytest.raises(Exception, match="(?i)lock"):
            with embedded_broker(tmp_path / "data"):
                pass
