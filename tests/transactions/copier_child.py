"""A consume-transform-produce copier: read_committed from the input topic, each record copied to the same
partition of the output topic inside a transaction that also commits the consumer's offsets
(send_offsets_to_transaction). About one transaction in ten is aborted on purpose and its input re-read."""

import random
import sys

import confluent_kafka
from confluent_kafka import TopicPartition

bootstrap, group, transactional_id, source, target = sys.argv[1:6]
rng = random.Random(transactional_id)
consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                     "isolation.level": "read_committed", "enable.auto.commit": False,
                                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                     "linger.ms": 5})
producer.init_transactions(60)
consumer.subscribe([source])
while True:
    messages = [m for m in consumer.consume(750, 1.0) if not m.error()]
    if not messages:
        continue
    start = {}
    for m in messages:
        start.setdefault((m.topic(), m.partition()), m.offset())
    producer.begin_transaction()
    for m in messages:
        producer.produce(target, value=m.value(), partition=m.partition())
    producer.flush(60)
    if rng.random() < 0.1:
        producer.abort_transaction(60)
        for (topic, partition), offset in start.items():
            consumer.seek(TopicPartition(topic, partition, offset))
        continue
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), 60)
    producer.commit_transaction(60)
