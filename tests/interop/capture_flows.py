"""The same everyday flows driven by each Python client, for recording what each one sends.

Each client, under its own client id (``cap-<client>``): creates its topic with its admin API, produces
idempotently, runs a transaction that also commits a group's offsets, consumes read_committed in a
group and commits, and asks for offsets (earliest, latest, by time, max timestamp where the client has
it). Run as a script to print the version table of docs/clients.md:

    PYTHONPATH=src:. .venv/bin/python -m tests.interop.capture_flows
"""

from __future__ import annotations

import asyncio
import time

PARTITIONS = 3
COUNT = 12
BASE_TS = 1_700_000_000_000


def _values(client: str) -> list[bytes]:
    return [f"{client}-{i}".encode() for i in range(COUNT)]


def confluent(bootstrap: str) -> dict:
    import confluent_kafka
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

    topic, cid = "cap-confluent", "cap-confluent"
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": cid})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": cid, "enable.idempotence": True})
    for i, value in enumerate(_values("confluent")):
        producer.produce(topic, value, partition=i % PARTITIONS, timestamp=BASE_TS + i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": cid, "group.id": "cap-confluent-g",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message.value())
    consumer.commit(asynchronous=False)
    txn = Producer({"bootstrap.servers": bootstrap, "client.id": cid, "transactional.id": "cap-confluent-t"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, b"in-txn", partition=0, timestamp=BASE_TS + 1000)
    txn.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], consumer.consumer_group_metadata(), 30)
    txn.commit_transaction(30)
    consumer.close()
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    offsets = {}
    for name, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
                       ("max_timestamp", OffsetSpec.max_timestamp()), ("for_time", OffsetSpec.for_timestamp(BASE_TS + 4))):
        futures = admin.list_offsets({tp: spec for tp in partitions}, isolation_level=confluent_kafka.IsolationLevel.READ_COMMITTED)
        offsets[name] = {tp.partition: f.result(30).offset for tp, f in futures.items()}
    described = admin.describe_topics(confluent_kafka.TopicCollection([topic]))[topic].result(30)
    return {"consumed": sorted(got), "offsets": offsets, "described_partitions": len(described.partitions)}


def kafka_python(bootstrap: str) -> dict:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.structs import OffsetAndMetadata

    topic, cid = "cap-kafka-python", "cap-kafka-python"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=cid)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid, enable_idempotence=True, acks="all")
    for i, value in enumerate(_values("kafka-python")):
        producer.send(topic, value, partition=i % PARTITIONS, timestamp_ms=BASE_TS + i).get(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=cid, group_id="cap-kafka-python-g",
                             auto_offset_reset="earliest", isolation_level="read_committed",
                             enable_auto_commit=False)
    got = []
    deadline = time.monotonic() + 60
    while len(got) < COUNT and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    consumer.commit()
    txn = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid, transactional_id="cap-kafka-python-t")
    txn.init_transactions()
    txn.begin_transaction()
    txn.send(topic, b"in-txn", partition=0, timestamp_ms=BASE_TS + 1000)
    txn.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)}, "cap-kafka-python-g")
    txn.commit_transaction()
    txn.close()
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    offsets = {
        "earliest": {tp.partition: o for tp, o in consumer.beginning_offsets(partitions).items()},
        "latest": {tp.partition: o for tp, o in consumer.end_offsets(partitions).items()},
        "for_time": {tp.partition: (o.offset if o else -1)
                     for tp, o in consumer.offsets_for_times({tp: BASE_TS + 4 for tp in partitions}).items()},
    }
    consumer.close()
    described = admin.describe_topics([topic])
    admin.close()
    return {"consumed": sorted(got), "offsets": offsets, "described_partitions": len(described[0]["partitions"])}


def aiokafka(bootstrap: str) -> dict:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic, cid = "cap-aiokafka", "cap-aiokafka"

    async def run() -> dict:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=cid)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=cid, enable_idempotence=True)
        await producer.start()
        for i, value in enumerate(_values("aiokafka")):
            await producer.send_and_wait(topic, value, partition=i % PARTITIONS, timestamp_ms=BASE_TS + i)
        await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=cid, group_id="cap-aiokafka-g",
                                    auto_offset_reset="earliest", isolation_level="read_committed",
                                    enable_auto_commit=False)
        await consumer.start()
        got = []
        deadline = time.monotonic() + 60
        while len(got) < COUNT and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            got.extend(m.value for records in batches.values() for m in records)
        await consumer.commit()
        txn = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=cid, transactional_id="cap-aiokafka-t")
        await txn.start()
        async with txn.transaction():
            await txn.send_and_wait(topic, b"in-txn", partition=0, timestamp_ms=BASE_TS + 1000)
            await txn.send_offsets_to_transaction({TopicPartition(topic, 0): 1}, "cap-aiokafka-g")
        await txn.stop()
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        offsets = {
            "earliest": {tp.partition: o for tp, o in (await consumer.beginning_offsets(partitions)).items()},
            "latest": {tp.partition: o for tp, o in (await consumer.end_offsets(partitions)).items()},
            "for_time": {tp.partition: (o.offset if o else -1) for tp, o in
                         (await consumer.offsets_for_times({tp: BASE_TS + 4 for tp in partitions})).items()},
        }
        await consumer.stop()
        described = await admin.describe_topics([topic])
        await admin.close()
        return {"consumed": sorted(got), "offsets": offsets,
                "described_partitions": len(described[0]["partitions"]) if isinstance(described[0], dict)
                else len(described[0].partitions)}

    return asyncio.run(run())


CLIENTS = {"confluent": confluent, "kafka-python": kafka_python, "aiokafka": aiokafka}


def main() -> None:
    from eoslog.testing.embedded import EmbeddedBroker
    from eoslog.testing.request_recorder import RequestRecorder, api_name

    broker = EmbeddedBroker()
    with RequestRecorder() as recorder:
        bootstrap = broker.start()
        try:
            results = {name: flow(bootstrap) for name, flow in CLIENTS.items()}
        finally:
            broker.stop()
    for name in CLIENTS:
        print(f"\n## {name}: {results[name]['offsets']}")
        versions = recorder.versions(f"cap-{name}")
        fields = recorder.fields(f"cap-{name}")
        for key in sorted(versions):
            for version in sorted(versions[key]):
                print(f"| {key} {api_name(key)} | {version} | {', '.join(sorted(fields[(key, version)]))} |")


if __name__ == "__main__":
    main()
