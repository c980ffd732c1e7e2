"""How fast `eoslog bench`'s producer loop runs with no broker at all: an upper bound for any broker.

    .venv/bin/python bench/client_ceiling.py [--sizes 100,1024] [--seconds 5] [--repeat 3]

The same loop as `eoslog bench`'s produce run (confluent-kafka, idempotent, acks=all, linger.ms 5, a
fresh 8-byte key per message, payloads from a pool of random ones, poll(0) every 1,024 messages), into
a producer whose bootstrap address has nobody listening, with a local queue large enough never to fill
(emptied every 4,096 messages, off the clock). Nothing is sent and no delivery report comes, so the loop
runs at the pace of produce() alone: the Python call, librdkafka's copy of the message and its enqueueing. Against any broker the same client also
has its delivery reports to take and its requests to build and send, on the same 2 cores as the broker, so
no broker can be measured above these figures with this client. The bound is loose: at 100 B the same
client delivered a third of it to librdkafka's in-process mock (docs/benchmarks.md, "A round's answers
written when its delivery ends").
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import time

from confluent_kafka import Producer

from eoslog.testing.process import free_port

KEY = struct.Struct(">Q")
POOL = 1024
PURGE_MASK = 4095  # purge every 4,096 messages


def one_run(size: int, seconds: float) -> float:
    """msgs/s of produce() alone for ``seconds``."""
    producer = Producer({
        "bootstrap.servers": f"127.0.0.1:{free_port()}",  # nobody listens there: connections are refused
        "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "batch.size": 1_000_000, "log_level": 0,
        "queue.buffering.max.messages": 2_147_483_647, "queue.buffering.max.kbytes": 2_147_483_647,
        "message.timeout.ms": 600_000,
    })
    payloads = [os.urandom(size) for _ in range(POOL)]
    produce, poll, pack, clock = producer.produce, producer.poll, KEY.pack, time.perf_counter
    excluded = 0.0
    started = clock()
    deadline = started + seconds
    i = 0
    while True:
        if not i & 1023:
            poll(0)
            if not i & PURGE_MASK:
                # Drop what queued, off the clock: memory stays reused, as it is when a broker acknowledges
                # (on this VM fresh pages cost several times warm ones: docs/benchmarks.md, "This VM's
                # fresh pages"), and freeing is librdkafka's background work in a real run.
                paused = clock()
                producer.purge()
                poll(0)
                excluded += clock() - paused
            if clock() > deadline + excluded:
                break
        produce("ceiling", payloads[i & (POOL - 1)], pack(i))
        i += 1
    rate = i / (clock() - started - excluded)
    producer.purge()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("size B   msgs/s (median)   MB/s    runs (msgs/s)")
    for size in (int(s) for s in args.sizes.split(",")):
        rates = [one_run(size, args.seconds) for _ in range(args.repeat)]
        rate = statistics.median(rates)
        print(f"{size:6d}   {rate:15,.0f}   {rate * size / 1e6:6.1f}   " + ", ".join(f"{r:,.0f}" for r in rates))


if __name__ == "__main__":
    main()
