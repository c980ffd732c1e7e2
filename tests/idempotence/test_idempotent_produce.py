"""Idempotent producers of all three clients through a fault-injecting proxy (dropped and delayed
responses, cut connections) and across broker SIGKILLs: every acknowledged message is in the log exactly
once, and each partition holds the messages in the order they were sent."""

from __future__ import annotations

import asyncio
import threading
import time

import confluent_kafka
import pytest
from txn_clients import READERS, create_topics

from eoslog.testing.faultproxy import FaultProxy
from eoslog.testing.process import BrokerProcess, free_port

COUNT = 50_000
PARTITIONS = 3
CLIENTS = ("confluent", "kafka-python", "aiokafka")


def value_of(i: int) -> bytes:
    return f"{i:08d}".encode()


def produce_confluent(bootstrap, topic, count, acked):
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                         "linger.ms": 5, "batch.num.messages": 100, "socket.timeout.ms": 3000, "message.timeout.ms": 300_000,
                                         "retry.backoff.ms": 50})

    def on_delivery(err, msg):
        if err is None:
            acked.add(int(msg.value()))

    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value_of(i), partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(300) == 0


def produce_kafka_python(bootstrap, topic, count, acked):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5,
                             batch_size=4096, request_timeout_ms=3000, delivery_timeout_ms=300_000, retry_backoff_ms=50,
                             reconnect_backoff_ms=50)
    for i in range(count):
        producer.send(topic, value_of(i), partition=i % PARTITIONS).add_callback(
            lambda metadata, i=i: acked.add(i))
    producer.flush(300)
    producer.close(10)


def produce_aiokafka(bootstrap, topic, count, acked):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaTimeoutError

    async def go():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5,
                                    max_batch_size=4096, request_timeout_ms=3000, retry_backoff_ms=50)
        await producer.start()
        try:
            futures = []
            for i in range(count):
                while True:
                    try:
                        future = await producer.send(topic, value_of(i), partition=i % PARTITIONS)
                        break
                    except KafkaTimeoutError:
                        # aiokafka's send() waits at most request_timeout_ms for room in a full batch, and a
                        # broker restart on a loaded machine can take longer; the record was not taken,
                        # so sending it again is no duplicate (as BufferError for confluent-kafka above)
                        continue
                future.add_done_callback(lambda f, i=i: f.exception() is None and acked.add(i))
                futures.append(future)
            await asyncio.gather(*futures, return_exceptions=True)
        finally:
            await producer.stop()

    asyncio.run(go())


PRODUCERS = {"confluent": produce_confluent, "kafka-python": produce_kafka_python, "aiokafka": produce_aiokafka}


def check_log(bootstrap, topic, acked: set[int], count: int) -> None:
    tps = [(topic, p) for p in range(PARTITIONS)]
    got = READERS["confluent"](bootstrap, tps, "read_uncommitted")
    seen: list[int] = []
    for (_, partition), values in got.items():
        numbers = [int(v) for v in values]
        assert all(n % PARTITIONS == partition for n in numbers)
        assert numbers == sorted(numbers), f"partition {partition} is out of send order"
        seen.extend(numbers)
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} duplicates"
    missing = acked - set(seen)
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
    assert set(seen) <= set(range(count))


@pytest.mark.parametrize("client", CLIENTS)
def test_idempotent_producer_through_faults(tmp_path, client):
    proxy_port = free_port()
    with BrokerProcess(data_dir=tmp_path / "data", advertised=f"127.0.0.1:{proxy_port}") as broker:
        proxy = FaultProxy("127.0.0.1", broker.port, listen_port=proxy_port, drop_response_rate=0.02,
                           delay_response_rate=0.05, delay_ms=(10, 200), cut_rate=0.005, seed=7,
                           drop_close_ms=100)
        proxy.start_in_thread()
        try:
            topic = f"idem-{client}"
            create_topics(f"127.0.0.1:{proxy_port}", {topic: PARTITIONS})
            acked: set[int] = set()
            started = time.monotonic()
            PRODUCERS[client](f"127.0.0.1:{proxy_port}", topic, COUNT, acked)
            elapsed = time.monotonic() - started
            faults = proxy.snapshot()
            proxy.set_faults(drop_response_rate=0, delay_response_rate=0, cut_rate=0)
            assert len(acked) == COUNT, f"{COUNT - len(acked)} messages never acknowledged"
            assert faults["responses_dropped"] + faults["cuts"] > 0, faults
            check_log(f"127.0.0.1:{proxy_port}", topic, acked, COUNT)
            print(f"{client}: {COUNT} messages in {elapsed:.1f} s through {faults}")
        finally:
            proxy.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_idempotent_producer_across_broker_kills(tmp_path, client):
    with BrokerProcess(data_dir=tmp_path / "data") as broker:
        topic = f"killed-{client}"
        create_topics(broker.bootstrap, {topic: PARTITIONS})
        acked: set[int] = set()
        done = threading.Event()
        kills = []

        def killer():
            # Three SIGKILLs while the producer is mid-stream; each restart recovers producer state from
            # the snapshot and the log tail, so retries after the restart are still de-duplicated.
            while len(kills) < 3 and not done.wait(0.05):
                if len(acked) >= (len(kills) + 1) * COUNT // 5:
                    broker.kill()
                    kills.append(len(acked))
                    broker.start()

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            PRODUCERS[client](broker.bootstrap, topic, COUNT, acked)
        finally:
            done.set()
            thread.join(60)
        assert len(kills) == 3, f"the producer finished before three kills: {kills}"
        check_log(broker.bootstrap, topic, acked, COUNT)
