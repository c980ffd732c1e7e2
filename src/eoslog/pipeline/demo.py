"""`eoslog demo`: an embedded broker, a real Kafka client, and what happened, in words.

Until the Spark pipeline lands this shows the broker end to end: create a topic, produce with an
idempotent confluent-kafka producer, consume it back, and print offsets and timings.
"""

from __future__ import annotations

import time

import click


def run_demo(messages: int = 100_000) -> None:
    import confluent_kafka
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from eoslog.server.embedded import EmbeddedBroker

    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap
        click.echo(f"started an embedded eoslog broker on {bootstrap} in {broker.startup_seconds * 1000:.0f} ms "
                   f"(data in {broker.config.data_dir})")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("demo", 3, 1)])["demo"].result(30)
        click.echo("created topic 'demo' with 3 partitions")

        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                             "linger.ms": 5, "compression.type": "lz4"})
        started = time.monotonic()
        for i in range(messages):
            while True:
                try:
                    producer.produce("demo", key=str(i % 1000).encode(), value=f"payment-{i:08d}".encode())
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(60)
        produce_seconds = time.monotonic() - started
        click.echo(f"produced {messages:,} messages (idempotent, lz4, acks=all) in {produce_seconds:.2f} s "
                   f"= {messages / produce_seconds:,.0f} msg/s")

        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "demo-reader",
                                             "isolation.level": "read_committed", "enable.partition.eof": True})
        consumer.assign([TopicPartition("demo", p, confluent_kafka.OFFSET_BEGINNING) for p in range(3)])
        seen = set()
        eof = set()
        started = time.monotonic()
        while len(eof) < 3:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                continue
            eof.discard(msg.partition())
            seen.add(msg.value())
        consume_seconds = time.monotonic() - started
        ends = [consumer.get_watermark_offsets(TopicPartition("demo", p))[1] for p in range(3)]
        consumer.close()
        click.echo(f"consumed {len(seen):,} distinct messages in {consume_seconds:.2f} s; "
                   f"partition end offsets {ends} (sum {sum(ends):,})")
        verdict = "every message exactly once" if len(seen) == messages == sum(ends) else "MISMATCH"
        click.echo(f"verified: {verdict}")
        if verdict != "every message exactly once":
            raise SystemExit(1)
