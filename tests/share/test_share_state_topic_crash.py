"""A broker SIGKILLed while it creates ``__share_group_state`` (the share group's first use): after the
restart the half-made partitions are gone and the group's InitializeShareGroupState died with the old
process. The restarted group coordinator must send it again at the next heartbeat, not after
group.share.initialize.retry.interval.ms (30 s), or the group's consumers get nothing for that long
(found by the queue verifier; coordinator/group/share_initialization.py, ``sent_here``)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer, ShareConsumer
from test_share_consumer import PROPERTIES, new_topic, set_group_configs

from eoslog.testing.process import BrokerProcess
from eoslog.testing.wait import wait_until

RECORDS = 100


def test_a_broker_killed_while_creating_the_share_state_topic_serves_the_group_again_within_seconds(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data_dir=data, properties=PROPERTIES) as broker:
        topic = new_topic(broker.bootstrap, partitions=1)
        set_group_configs(broker.bootstrap, "g", {"share.auto.offset.reset": "earliest"})
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(RECORDS):
            producer.produce(topic, b"%d" % i)
        assert producer.flush(30) == 0
        received: list[tuple[float, int]] = []
        stop = threading.Event()

        def consume() -> None:
            consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
            consumer.subscribe([topic])
            while not stop.is_set():
                for message in consumer.poll(0.2) or ():
                    if message.error() is None:
                        received.append((time.monotonic(), message.offset()))
            consumer.close()

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        try:
            wait_until(lambda: any(p.name.startswith("__share_group_state-") for p in data.iterdir()),
                       timeout=30, what="the share state topic's first partition directory", interval=0.002)
            broker.kill()
            broker.start()
            # Half the retry interval: without the retry at load the group waits the whole 30 s.
            # (Records acknowledged before the kill are not delivered again: count every delivery.)
            wait_until(lambda: {o for _, o in received} == set(range(RECORDS)), timeout=15,
                       what="every record delivered within seconds of the restart")
        finally:
            stop.set()
            thread.join(30)
