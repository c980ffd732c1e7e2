"""The Spark sink's task writers outside Spark: the same Arrow batches written by each, CPU and wall time.

    .venv/bin/python bench/sink_writer_bench.py [--records 1000000] [--size 100] [--rounds 3]

A broker subprocess and a 2-partition topic; RECORDS rows (key = the row number, value SIZE bytes) in
Arrow batches of 10,000 rows, as Spark hands them to a task. Each variant writes them all as one task
would, in turn, ROUNDS times (alternating, so the machine's load falls on all alike):

- ``eos-native`` / ``eos-librdkafka``: ``task_writer.write_transaction`` with ``eoslog.writer`` native or
  librdkafka (the transaction prepared and left open, as in a micro-batch; it is committed afterwards,
  outside the timing, with EndTxn);
- ``alo-native`` / ``alo-librdkafka``: the at-least-once baseline of the same rows: the native producer
  without a transactional id, or a confluent-kafka idempotent producer with the same produce loop.

Reports rows/s of wall time and the CPU seconds of this process (every thread, librdkafka's included)
per million rows; the broker's CPU is reported separately.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time


def _batches(records: int, size: int):
    import pyarrow as pa

    value = b"v" * size
    per = 10_000
    return [pa.RecordBatch.from_pydict({"key": pa.array([str(i).encode() for i in range(start, min(start + per, records))],
                                                        pa.binary()),
                                        "value": pa.array([value] * (min(start + per, records) - start), pa.binary())})
            for start in range(0, records, per)]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _write(variant: str, bootstrap: str, topic: str, batches, n: int):
    from eoslog.client.txn_groups import TxnMember
    from eoslog.spark.end_txn import end_transaction
    from eoslog.spark.task_writer import write_transaction

    guarantee, writer = variant.split("-", 1)
    if guarantee == "eos":
        message = write_transaction(iter(batches), client={"bootstrap.servers": bootstrap}, topic_option=topic,
                                    txn_id=f"bench-{variant}-{n}", group="bench", partition_id=0, attempt=0,
                                    transaction_timeout_ms=300_000, writer=writer)
        return lambda: end_transaction(bootstrap, TxnMember(message.transactional_id, message.producer_id,
                                                            message.producer_epoch), commit=True)
    if writer == "native":
        from eoslog.spark.native_producer import NativeProducer

        producer = NativeProducer(bootstrap, None)
        try:
            producer.init()
            for batch in batches:
                producer.send(batch, topic)
            producer.flush()
        finally:
            producer.close()
        return lambda: None
    from confluent_kafka import Producer

    from eoslog.spark.task_writer import PRODUCER_DEFAULTS, _produce_all, _Rows

    rows = _Rows(topic)
    producer = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap, "enable.idempotence": True})
    for batch in batches:
        _produce_all(producer, *rows.columns(batch))
        producer.poll(0)
    assert producer.flush(120) == 0
    return lambda: None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default="eos-native,eos-librdkafka,alo-native,alo-librdkafka")
    args = parser.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    from eoslog.testing.process import BrokerProcess

    variants = args.variants.split(",")
    batches = _batches(args.records, args.size)
    results: dict[str, list[dict]] = {v: [] for v in variants}
    with BrokerProcess() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("sink", 2, 1)])["sink"].result(30)
        _write("eos-native", broker.bootstrap, "sink", batches[:2], -1)()  # warm-up: imports, connections
        _write("eos-librdkafka", broker.bootstrap, "sink", batches[:2], -2)()
        for round_ in range(args.rounds):
            for variant in variants:
                cpu, broker_cpu, started = _cpu(), _process_cpu(broker.process.pid), time.monotonic()
                commit = _write(variant, broker.bootstrap, "sink", batches, round_)
                elapsed = time.monotonic() - started
                result = {"variant": variant, "round": round_, "rows_per_s": round(args.records / elapsed),
                          "cpu_s_per_million": round((_cpu() - cpu) * 1e6 / args.records, 2),
                          "broker_cpu_s_per_million": round((_process_cpu(broker.process.pid) - broker_cpu)
                                                            * 1e6 / args.records, 2)}
                commit()
                print(json.dumps(result), flush=True)
                results[variant].append(result)
    print(f"\n{args.records:,} rows of {args.size} B, {args.rounds} rounds; medians")
    print("| variant | rows/s (wall) | writer CPU s per 1M rows | broker CPU s per 1M rows |")
    print("|---|---:|---:|---:|")
    for variant, rs in results.items():
        print(f"| {variant} | {statistics.median(r['rows_per_s'] for r in rs):,.0f} | "
              f"{statistics.median(r['cpu_s_per_million'] for r in rs)} | "
              f"{statistics.median(r['broker_cpu_s_per_million'] for r in rs)} |")


if __name__ == "__main__":
    main()
