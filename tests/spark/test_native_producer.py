"""The native sink writer's producer against a real broker: fencing, lost connections, sequences."""

from __future__ import annotations

import socket

import pyarrow as pa
import pytest

from eoslog.client.txn_groups import TxnMember
from eoslog.spark.end_txn import end_transaction
from eoslog.spark.native_producer import NativeProducer, ProducerError


def _rows(start: int, count: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"key": pa.array([str(i).encode() for i in range(start, start + count)]),
                                       "value": pa.array([str(i).encode() for i in range(start, start + count)])})


def _commit(broker, producer: NativeProducer) -> None:
    end_transaction(broker.bootstrap, TxnMember(producer.transactional_id, producer.producer_id,
                                                producer.producer_epoch), commit=True)


def test_a_second_attempt_fences_the_first_and_only_its_rows_are_committed(broker, kafka, topic_name):
    kafka.create(topic_name, 2)
    first = NativeProducer(broker.bootstrap, f"{topic_name}-task", timeout_s=30)
    second = NativeProducer(broker.bootstrap, f"{topic_name}-task", timeout_s=30)
    try:
        first.init()
        first.send(_rows(0, 500), topic_name)
        first.flush()
        second.init()  # the retried attempt: aborts the first's open transaction, bumps the epoch
        assert second.producer_id == first.producer_id and second.producer_epoch > first.producer_epoch
        second.send(_rows(1000, 300), topic_name)
        second.flush()
        with pytest.raises(ProducerError, match="EPOCH|FENCED"):
            first.send(_rows(500, 100), topic_name)
            first.flush()
        _commit(broker, second)
    finally:
        first.close()
        second.close()
    values = sorted(int(m.value()) for m in kafka.read_all(topic_name, expect=300))
    assert values == list(range(1000, 1300))


def test_batches_of_a_lost_connection_are_resent_once_in_order(broker, kafka, topic_name):
    kafka.create(topic_name, 2)
    producer = NativeProducer(broker.bootstrap, f"{topic_name}-task", timeout_s=30)
    try:
        producer.init()
        for start in range(0, 3000, 1000):  # several requests in flight, unanswered
            producer.send(_rows(start, 1000), topic_name)
        for leader in producer._connections.values():
            leader.connection.sock.shutdown(socket.SHUT_RDWR)  # the connection dies under them
        producer.send(_rows(3000, 1000), topic_name)
        producer.flush()  # resends with the same sequence numbers: duplicates are recognised
        _commit(broker, producer)
    finally:
        producer.close()
    messages = kafka.read_all(topic_name, expect=4000)
    assert sorted(int(m.value()) for m in messages) == list(range(4000))  # each once
    for partition in {m.partition() for m in messages}:
        in_log = [int(m.value()) for m in messages if m.partition() == partition]
        assert in_log == sorted(in_log)  # in the order sent


def test_an_idempotent_producer_writes_without_a_transaction(broker, kafka, topic_name):
    kafka.create(topic_name, 3)
    producer = NativeProducer(broker.bootstrap, None, timeout_s=30)
    try:
        producer.init()
        assert producer.producer_id >= 0
        producer.send(pa.RecordBatch.from_pydict({"value": [b"a", b"b", None]}), topic_name)
        producer.flush()
    finally:
        producer.close()
    assert sorted((m.value() or b"") for m in kafka.read_all(topic_name, expect=3)) == [b"", b"a", b"b"]
