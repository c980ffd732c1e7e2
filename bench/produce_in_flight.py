"""How many ProduceRequests a confluent-kafka producer keeps in flight, read from librdkafka's debug log.

    .venv/bin/python bench/produce_in_flight.py [--partitions 1] [--seconds 3] [--no-idempotence]
        [--fsync-on-ack true] [--bootstrap H:P | --tansu]

Starts `eoslog serve` (unless --bootstrap names a broker, or --tansu starts Tansu 0.6 with in-memory
storage), creates a topic, and runs `eoslog bench`'s producer loop (1 KiB values, acks=all, linger.ms 5,
batch.size 1,000,000) for SECONDS with librdkafka's ``debug=protocol`` (``--debug protocol,queue`` also
logs how many messages wait in the partition's queue at each request). Then it counts, over librdkafka's "Sent
ProduceRequest" and "Received ProduceResponse" lines, how many requests were outstanding after each
send. docs/benchmarks.md, "Target 1 measured again on 2026-11-27", has what it found: an idempotent
producer keeps one request in flight per partition, whatever the broker.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if not os.environ.get("PYTHONPATH"):  # PYTHONPATH=<tree>/src measures that tree's broker
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from eoslog.testing.process import BrokerProcess

VALUE = 1024


def _produce(bootstrap: str, args, log_path: str) -> float:
    """The bench's loop with librdkafka's debug log going to ``log_path``; returns MB/s."""
    import logging

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"in-flight-{int(time.time())}"
    configs = {} if args.tansu else {"eoslog.fsync.on.ack": args.fsync_on_ack}
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the topic is made
    admin.create_topics([NewTopic(topic, args.partitions, 1, config=configs)])[topic].result(30)
    logger = logging.getLogger("librdkafka")
    logger.propagate = False
    handler = logging.FileHandler(log_path)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": args.idempotence,
                         "linger.ms": 5, "batch.size": 1_000_000, "debug": args.debug}, logger=logger)
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    payloads = [os.urandom(VALUE) for _ in range(64)]
    sent = 0
    started = time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        for i in range(1024):
            try:
                producer.produce(topic, payloads[i & 63])
            except BufferError:  # the local queue is full: wait for delivery reports
                producer.poll(0.001)
        producer.poll(0)
        sent += 1024
    if producer.flush(60) != 0:
        raise SystemExit("the producer did not deliver everything within 60 s")
    seconds = time.perf_counter() - started
    handler.close()
    return sent * VALUE / 1e6 / seconds


def _in_flight(log_path: str) -> collections.Counter:
    """After each "Sent ProduceRequest": how many were sent and not yet answered (itself included)."""
    outstanding, after_send = 0, collections.Counter()
    with open(log_path) as log:
        for line in log:
            if "Sent ProduceRequest" in line:
                outstanding += 1
                after_send[outstanding] += 1
            elif "Received ProduceResponse" in line:
                outstanding -= 1
    return after_send


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--no-idempotence", dest="idempotence", action="store_false")
    parser.add_argument("--fsync-on-ack", default="true", choices=["true", "false"])
    parser.add_argument("--bootstrap", help="a running broker instead of starting one")
    parser.add_argument("--tansu", action="store_true", help="Tansu 0.6 with in-memory storage instead")
    parser.add_argument("--debug", default="protocol",
                        help="librdkafka debug contexts; protocol is needed, queue shows the partition's queue")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="eoslog-in-flight-")
    try:
        with contextlib.ExitStack() as stack:
            bootstrap = args.bootstrap
            if bootstrap is None and args.tansu:
                from eoslog.loadgen.targets import tansu_broker

                bootstrap = stack.enter_context(tansu_broker())
            elif bootstrap is None:
                bootstrap = stack.enter_context(BrokerProcess(Path(scratch) / "data")).bootstrap
            log_path = f"{scratch}/librdkafka.log"
            rate = _produce(bootstrap, args, log_path)
        after_send = _in_flight(log_path)
        target = "Tansu" if args.tansu else args.bootstrap or "eoslog"
        print(f"{target}, {args.partitions} partition(s), idempotence {'on' if args.idempotence else 'off'}: "
              f"{rate:.0f} MB/s, {sum(after_send.values())} ProduceRequests, at most {max(after_send, default=0)} "
              f"in flight")
        print("requests outstanding after each send:", dict(sorted(after_send.items())))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

if __name__ == "__main__":
    main()
