"""`eoslog consume` draining a backlog of small records: the console consumer's short fetch back-off
(tools/console_cli.py CONSOLE_FETCH_QUEUE_BACKOFF_MS) against librdkafka's default 1 s.

    PYTHONPATH=src python bench/console_consume_bench.py [--records 400000] [--pairs 3]

One `eoslog serve` subprocess; one topic of 4 partitions filled once with records of 100 B; then
`eoslog consume --from-beginning --max-messages N` (stdout to /dev/null) is run alternately with no
--command-config (the console's back-off) and with one that sets fetch.queue.backoff.ms=1000 (librdkafka's
default), and each run's wall time is printed, with the ratio of each pair.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.testing.process import BrokerProcess

TOPIC = "backlog"


def fill(bootstrap: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"x" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % 4)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def consume_seconds(bootstrap: str, records: int, command_config: Path | None) -> float:
    command = [sys.executable, "-m", "eoslog", "consume", TOPIC, "--from-beginning", "--max-messages",
               str(records), "-b", bootstrap]
    if command_config is not None:
        command += ["--command-config", str(command_config)]
    started = time.monotonic()
    with open(os.devnull, "w") as sink:
        subprocess.run(command, stdout=sink, stderr=subprocess.DEVNULL, check=True, timeout=600)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="console-consume-bench-") as tmp, \
            BrokerProcess(data_dir=Path(tmp) / "data") as broker:
        fill(broker.bootstrap, args.records)
        librdkafka_default = Path(tmp) / "default-backoff.properties"
        librdkafka_default.write_text("fetch.queue.backoff.ms=1000\n")
        print(f"{args.records} records of 100 B in 4 partitions; eoslog consume --from-beginning, wall seconds")
        for pair in range(args.pairs):
            # alternate which goes first, so a machine getting busier favours neither
            order = [("console 20 ms", None), ("librdkafka 1 s", librdkafka_default)]
            if pair % 2:
                order.reverse()
            times = {name: consume_seconds(broker.bootstrap, args.records, config) for name, config in order}
            print(f"pair {pair + 1}: console 20 ms {times['console 20 ms']:.2f} s, librdkafka 1 s "
                  f"{times['librdkafka 1 s']:.2f} s, ratio {times['librdkafka 1 s'] / times['console 20 ms']:.2f}x")


if __name__ == "__main__":
    main()
