"""Transactional producers and isolation-aware readers, one per real client, each using its own API.

A *plan* is a list of transactions: ``(outcome, [(topic, partition, value), ...])`` with outcome
"commit", "abort" or "open" (flushed, then left undecided; the producer is returned still open so the
caller can inspect the partitions before finishing it).
"""

from __future__ import annotations

import asyncio
import time

import confluent_kafka
from confluent_kafka import TopicPartition as CTopicPartition

CLIENTS = ("confluent", "kafka-python", "aiokafka")
DEADLINE_S = 30.0


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, count, 1) for name, count in topics.items()]).values():
        future.result(30)


# --- producers -------------------------------------------------------------------------------------------
class ConfluentTxnProducer:
    def __init__(self, bootstrap: str, transactional_id: str, **extra) -> None:
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                                  "linger.ms": 5, **extra})
        self.producer.init_transactions(DEADLINE_S)
        self.errors: list = []

    def run(self, outcome: str, records, begin: bool = True) -> None:
        if begin:
            self.producer.begin_transaction()
        for topic, partition, value in records:
            self.producer.produce(topic, value=value, partition=partition,
                                  on_delivery=lambda err, msg: err and self.errors.append(err))
        self.producer.flush(DEADLINE_S)  # abort_transaction would purge unsent records otherwise
        if outcome == "commit":
            self.producer.commit_transaction(DEADLINE_S)
        elif outcome == "abort":
            self.producer.abort_transaction(DEADLINE_S)

    def finish_open(self, commit: bool) -> None:
        (self.producer.commit_transaction if commit else self.producer.abort_transaction)(DEADLINE_S)

    def close(self) -> None:
        self.producer.flush(1)


class KafkaPythonTxnProducer:
    def __init__(self, bootstrap: str, transactional_id: str, **extra) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, linger_ms=5,
                                      **extra)
        self.producer.init_transactions()

    def run(self, outcome: str, records, begin: bool = True) -> None:
        if begin:
            self.producer.begin_transaction()
        futures = [self.producer.send(topic, value, partition=partition) for topic, partition, value in records]
        self.producer.flush(DEADLINE_S)
        for future in futures:
            future.get(DEADLINE_S)
        if outcome == "commit":
            self.producer.commit_transaction()
        elif outcome == "abort":
            self.producer.abort_transaction()

    def finish_open(self, commit: bool) -> None:
        (self.producer.commit_transaction if commit else self.producer.abort_transaction)()

    def close(self) -> None:
        self.producer.close(5)


class AiokafkaTxnProducer:
    """aiokafka is asyncio-only: each call runs on a private event loop."""

    def __init__(self, bootstrap: str, transactional_id: str, **extra) -> None:
        from aiokafka import AIOKafkaProducer

        self.loop = asyncio.new_event_loop()

        async def make():
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                        enable_idempotence=True, linger_ms=5, **extra)
            await producer.start()
            return producer

        self.producer = self.loop.run_until_complete(make())

    def run(self, outcome: str, records, begin: bool = True) -> None:
        async def go():
            if begin:
                await self.producer.begin_transaction()
            futures = [await self.producer.send(topic, value, partition=partition)
                       for topic, partition, value in records]
            await asyncio.gather(*futures)
            if outcome == "commit":
                await self.producer.commit_transaction()
            elif outcome == "abort":
                await self.producer.abort_transaction()

        self.loop.run_until_complete(asyncio.wait_for(go(), DEADLINE_S))

    def finish_open(self, commit: bool) -> None:
        call = self.producer.commit_transaction if commit else self.producer.abort_transaction
        self.loop.run_until_complete(asyncio.wait_for(call(), DEADLINE_S))

    def close(self) -> None:
        self.loop.run_until_complete(self.producer.stop())
        self.loop.close()


PRODUCERS = {"confluent": ConfluentTxnProducer, "kafka-python": KafkaPythonTxnProducer,
             "aiokafka": AiokafkaTxnProducer}


def run_plan(client: str, bootstrap: str, transactional_id: str, plan, **extra):
    """Runs every transaction of ``plan``; returns the producer (its last transaction may be open)."""
    producer = PRODUCERS[client](bootstrap, transactional_id, **extra)
    for outcome, records in plan:
        producer.run(outcome, records)
    return producer


# --- readers -----------------------------------------------------------------------------------------------
# Each reads every assigned partition from its start up to the end offset its client reports for the
# isolation level (the LSO for read_committed, the high watermark otherwise) and returns
# {(topic, partition): [values in offset order]}.

def read_confluent(bootstrap: str, tps, isolation: str) -> dict:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader",
                                         "isolation.level": isolation, "enable.auto.commit": False,
                                         "enable.partition.eof": True})
    try:
        ctps = [CTopicPartition(t, p, confluent_kafka.OFFSET_BEGINNING) for t, p in tps]
        ends = {tp: consumer.get_watermark_offsets(CTopicPartition(*tp), timeout=10, cached=False)[1] for tp in tps}
        consumer.assign(ctps)
        out = {tp: [] for tp in tps}
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            positions = {(p.topic, p.partition): p.offset for p in consumer.position([CTopicPartition(*tp) for tp in tps])}
            if all(positions[tp] >= ends[tp] for tp in tps):
                return out
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            out[(message.topic(), message.partition())].append(message.value())
        raise TimeoutError(f"confluent reader did not reach {ends}")
    finally:
        consumer.close()


def read_kafka_python(bootstrap: str, tps, isolation: str) -> dict:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    try:
        ktps = [TopicPartition(t, p) for t, p in tps]
        consumer.assign(ktps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(ktps)
        out = {tp: [] for tp in tps}
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if all(consumer.position(tp) >= ends[tp] for tp in ktps):
                return out
            for tp, messages in consumer.poll(200).items():
                out[(tp.topic, tp.partition)].extend(m.value for m in messages)
        raise TimeoutError(f"kafka-python reader did not reach {ends}")
    finally:
        consumer.close()


def read_aiokafka(bootstrap: str, tps, isolation: str) -> dict:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def go():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
        await consumer.start()
        try:
            atps = [TopicPartition(t, p) for t, p in tps]
            consumer.assign(atps)
            await consumer.seek_to_beginning()
            ends = await consumer.end_offsets(atps)
            out = {tp: [] for tp in tps}
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                if all([await consumer.position(tp) >= ends[tp] for tp in atps]):
                    return out
                for tp, messages in (await consumer.getmany(timeout_ms=200)).items():
                    out[(tp.topic, tp.partition)].extend(m.value for m in messages)
            raise TimeoutError(f"aiokafka reader did not reach {ends}")
        finally:
            await consumer.stop()

    return asyncio.run(go())


READERS = {"confluent": read_confluent, "kafka-python": read_kafka_python, "aiokafka": read_aiokafka}


def expected_values(plan, outcomes) -> dict:
    """{(topic, partition): [values]} of the plan's transactions whose outcome is in ``outcomes``."""
    out: dict = {}
    for outcome, records in plan:
        if outcome in outcomes:
            for topic, partition, value in records:
                out.setdefault((topic, partition), []).append(value)
    return out
