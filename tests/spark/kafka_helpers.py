"""Small confluent-kafka helpers for the Spark tests: create topics, produce, read everything back."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


class Kafka:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def create(self, topic: str, partitions: int = 1) -> str:
        self.admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
        return topic

    def produce(self, topic: str, records, transactional_id: str | None = None, commit: bool | None = True):
        """records: iterable of (key, value, headers|None, partition|None). Returns the producer when the
        transaction is left open (commit=None)."""
        config = {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "partitioner": "murmur2_random"}
        if transactional_id:
            config["transactional.id"] = transactional_id
        p = Producer(config)
        if transactional_id:
            p.init_transactions(30)
            p.begin_transaction()
        for key, value, headers, partition in records:
            kwargs = {"key": key, "value": value}
            if headers:
                kwargs["headers"] = headers
            if partition is not None:
                kwargs["partition"] = partition
            p.produce(topic, **kwargs)
        assert p.flush(30) == 0
        if transactional_id and commit is True:
            p.commit_transaction(30)
        elif transactional_id and commit is False:
            p.abort_transaction(30)
        elif transactional_id:
            return p
        return None

    def partitions(self, topic: str) -> list[int]:
        return sorted(self.admin.list_topics(topic, timeout=30).topics[topic].partitions)

    def read_all(self, topic: str, isolation: str = "read_committed", expect: int | None = None,
                 timeout: float = 30.0) -> list:
        """Every record visible to ``isolation`` (waiting for ``expect`` records if given), as messages."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._read_once(topic, isolation)
            if expect is None or len(found) >= expect or time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def _read_once(self, topic: str, isolation: str) -> list:
        parts = self.partitions(topic)
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "eoslog-test-reader",
                             "enable.auto.commit": False, "enable.partition.eof": True,
                             "isolation.level": isolation, "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in parts])
            at_eof: set[int] = set()
            out = []
            while len(at_eof) < len(parts):
                for m in consumer.consume(10_000, 1.0):
                    if m.error():
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            at_eof.add(m.partition())
                            continue
                        raise RuntimeError(m.error().str())
                    at_eof.discard(m.partition())
                    out.append(m)
            return out
        finally:
            consumer.close()
