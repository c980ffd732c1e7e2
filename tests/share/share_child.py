"""A share group member in a process of its own, for tests/share/test_share_consumer.py to SIGKILL: polls
until it holds records, prints their (partition, offset) pairs as one JSON line, then holds them (never
acknowledging) until it is killed."""

import json
import sys
import time

from confluent_kafka import ShareConsumer

bootstrap, group, topic = sys.argv[1:4]
consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([topic])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    held = [(m.partition(), m.offset()) for m in consumer.poll(0.5) or () if m.error() is None]
    if held:
        print(json.dumps(held), flush=True)
        break
sys.stdin.read()  # holds them: the test kills this process
