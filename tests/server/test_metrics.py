"""The Prometheus endpoint (issue 17) against a live broker: a real HTTP client scrapes it during a
confluent-kafka workload, prometheus_client's own parser reads the text, and the values must move the
way the workload moves them: traffic counters grow, a stopped group's lag rises and falls again once it
resumes, an open transaction shows as ongoing and holds the last stable offset back, an orphaned one
shows as hanging, and refused requests are counted by error code."""

from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until

TOPIC = "metered"


@pytest.fixture
def metered_broker(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "data", properties={"eoslog.metrics.listen": "127.0.0.1:0"}) as broker:
        yield broker


class Scrape:
    """One scrape: ``value(name, **labels)`` is the sample's value, None when there is no such sample."""

    def __init__(self, port: int) -> None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain")
            text = response.read().decode()
        self.samples = [sample for family in text_string_to_metric_families(text) for sample in family.samples]

    def value(self, name: str, **labels) -> float | None:
        wanted = {key: str(value) for key, value in labels.items()}
        found = [s.value for s in self.samples if s.name == name and all(s.labels.get(k) == v for k, v in wanted.items())]
        assert len(found) <= 1, f"{name}{labels} is ambiguous: {found}"
        return found[0] if found else None


def _scrape(broker: EmbeddedBroker) -> Scrape:
    return Scrape(broker.broker.metrics.bound_port)


def _produce(bootstrap: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(TOPIC, value=b"v%05d" % i, partition=0)
    assert producer.flush(15) == 0


def _consume_and_commit(bootstrap: str, group: str, expected: int) -> None:
    """Reads ``expected`` records as group ``group``, commits, and leaves (the group becomes Empty)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    consumer.subscribe([TOPIC])
    seen = 0
    deadline = time.monotonic() + 20
    while seen < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    assert seen == expected
    consumer.commit(asynchronous=False)
    consumer.close()


def _lag(broker, name: str = "kafka_consumergroup_lag") -> float | None:
    return _scrape(broker).value(name, group="readers", topic=TOPIC, partition=0)


def test_values_move_with_the_workload(metered_broker):
    broker = metered_broker
    bootstrap = broker.bootstrap
    _produce(bootstrap, 20)
    first = _scrape(broker)
    assert first.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 20
    bytes_in = first.value("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
    assert bytes_in > 20 * 6
    assert first.value("kafka_log_log_logendoffset", topic=TOPIC, partition=0) == 20
    assert first.value("kafka_log_log_size", topic=TOPIC, partition=0) == bytes_in
    assert first.value("kafka_log_log_numlogsegments", topic=TOPIC, partition=0) == 1
    assert first.value("kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert first.value("kafka_network_requestmetrics_totaltime_seconds_count", request="Produce") >= 1
    assert first.value("kafka_network_requestmetrics_totaltime_seconds_bucket", request="Produce", le="+Inf") >= 1
    assert first.value("kafka_log_logflushstats_logflushrateandtime_seconds_count") >= 1  # acks=all fsyncs

    # A group reads everything and commits: no lag. It stops; 30 more records: lag 30. It resumes: 0.
    _consume_and_commit(bootstrap, "readers", 20)
    assert _lag(broker) == 0
    assert _scrape(broker).value("kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) >= bytes_in
    _produce(bootstrap, 30, start=20)
    wait_until(lambda: _lag(broker) == 30, 10, "the stopped group's lag rises to 30")
    stopped = _scrape(broker)
    assert stopped.value("kafka_consumergroup_lag_stable", group="readers", topic=TOPIC, partition=0) == 30
    assert stopped.value("kafka_consumergroup_current_offset", group="readers", topic=TOPIC, partition=0) == 20
    assert stopped.value("kafka_coordinator_group_groupmetadatamanager_numgroups", state="Empty") == 1
    assert stopped.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 50
    # __consumer_offsets is compacted: the cleaner reports its dirty ratio and progress for the group's
    # partition (nothing is cleanable yet, all of it is in the active segment).
    offsets_partitions = [s for s in stopped.samples if s.name == "eoslog_log_cleaner_dirty_ratio"
                          and s.labels["topic"] == "__consumer_offsets"]
    assert offsets_partitions and all(0 <= s.value <= 1 for s in offsets_partitions)
    assert stopped.value("eoslog_log_cleaner_passes_total") == 0
    _consume_and_commit(bootstrap, "readers", 30)
    assert _lag(broker) == 0

    # A transaction left open: Ongoing at the coordinator, open on the partition, and the last stable
    # offset held back, so a read_committed group's lag to it stays while its lag to the HW grows.
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "metered-tx", "linger.ms": 5})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(TOPIC, value=b"tx%d" % i, partition=0)
    assert producer.flush(15) == 0
    open_txn = _scrape(broker)
    assert open_txn.value("eoslog_transaction_coordinator_transactional_ids", state="Ongoing") == 1
    assert open_txn.value("eoslog_partition_open_transactions", topic=TOPIC, partition=0) == 1
    assert open_txn.value("eoslog_partition_last_stable_offset_lag", topic=TOPIC, partition=0) == 5
    assert open_txn.value("eoslog_partition_hanging_transactions", topic=TOPIC, partition=0) == 0
    assert open_txn.value("eoslog_partition_producer_ids", topic=TOPIC, partition=0) >= 1
    assert open_txn.value("kafka_consumergroup_lag", group="readers", topic=TOPIC, partition=0) == 5
    assert open_txn.value("kafka_consumergroup_lag_stable", group="readers", topic=TOPIC, partition=0) == 0

    # An orphan: a transactional batch no coordinator knows about (written past the KIP-890 check, as a
    # lost marker would leave it). It is hanging until an ABORT marker ends it.
    partition = broker.broker.registry.partition(TOPIC, 0)

    def write_orphan() -> int:
        verifier, partition.transaction_verifier = partition.transaction_verifier, None
        try:
            batch = build_batch([SimpleRecord(None, b"orphan")], producer_id=987654, producer_epoch=3,
                                base_sequence=0, is_transactional=True)
            return partition.append(batch, transactional_id="gone").first_offset
        finally:
            partition.transaction_verifier = verifier

    broker.call(write_orphan)
    hanging = _scrape(broker)
    assert hanging.value("eoslog_partition_open_transactions", topic=TOPIC, partition=0) == 2
    assert hanging.value("eoslog_partition_hanging_transactions", topic=TOPIC, partition=0) == 1
    producer.abort_transaction(15)

    def aborted() -> Scrape | None:
        # EndTxn answers once the markers are written; the wait only covers a loaded machine's slow answer.
        scrape = _scrape(broker)
        return scrape if scrape.value("eoslog_partition_open_transactions", topic=TOPIC, partition=0) == 1 else None

    after_abort = wait_until(aborted, 10, "the aborted transaction closed on the partition")
    assert after_abort.value("eoslog_transaction_coordinator_transactional_ids", state="Ongoing") == 0
    assert after_abort.value("eoslog_transaction_coordinator_transactional_ids", state="CompleteAbort") == 1
    assert after_abort.value("eoslog_partition_hanging_transactions", topic=TOPIC, partition=0) == 1


def test_refusals_are_counted_by_error_code_and_connections_by_listener(metered_broker):
    broker = metered_broker
    bootstrap = broker.bootstrap
    _produce(bootstrap, 3)
    assert _scrape(broker).value("kafka_network_requestmetrics_errors_total", request="Fetch",
                                 error="OFFSET_OUT_OF_RANGE") is None
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "strict", "auto.offset.reset": "error",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 1000)])

    def refused() -> bool:
        message = consumer.poll(0.2)
        return message is not None and message.error() is not None \
            and message.error().code() == KafkaError._AUTO_OFFSET_RESET

    wait_until(refused, 10, "the consumer is told its offset is out of range")
    scrape = _scrape(broker)
    assert scrape.value("kafka_network_requestmetrics_errors_total", request="Fetch", error="OFFSET_OUT_OF_RANGE") >= 1
    assert scrape.value("kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT") >= 1
    consumer.close()


def test_the_endpoint_stops_with_the_broker(tmp_path):
    broker = EmbeddedBroker(data_dir=tmp_path / "data", properties={"eoslog.metrics.listen": "127.0.0.1:0"})
    broker.start()
    port = broker.broker.metrics.bound_port
    assert Scrape(port).value("kafka_network_requestmetrics_requests_total", request="Produce") is None
    broker.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_a_taken_metrics_port_is_a_configuration_error(tmp_path):
    import socket

    from eoslog.server.config import ConfigError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = EmbeddedBroker(data_dir=tmp_path / "data", properties={"eoslog.metrics.listen": f"127.0.0.1:{port}"})
        with pytest.raises(ConfigError, match="eoslog.metrics.listen"):
            broker.start()
