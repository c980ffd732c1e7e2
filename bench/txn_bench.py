"""What idempotence and transactions cost, measured with confluent-kafka against an `eoslog serve` process.

    .venv/bin/python bench/txn_bench.py [--messages N] [--write]

Rows (1 KiB values, 3 partitions, acks=all, linger.ms=5, one producer):
- plain vs idempotent produce throughput;
- transactional at commit intervals of 10 ms, 100 ms and 1 s vs idempotent;
- read_committed vs read_uncommitted consume throughput over the same committed data.
``--write`` appends one section to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import confluent_kafka
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from eoslog.testing.process import BrokerProcess

VALUE = b"x" * 1024
PARTITIONS = 3


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, count: int, *, idempotent: bool = False,
            transactional_id: str | None = None, commit_interval_s: float | None = None,
            max_in_flight: int | None = None) -> float:
    """Messages per second, acknowledged (and committed) included."""
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": idempotent,
              "queue.buffering.max.messages": 200_000}
    if transactional_id:
        config["transactional.id"] = transactional_id
    if max_in_flight is not None:
        config["max.in.flight.requests.per.connection"] = max_in_flight
    producer = confluent_kafka.Producer(config)
    if transactional_id:
        producer.init_transactions(30)
        producer.begin_transaction()
    started = time.perf_counter()
    last_commit = started
    for i in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.005)
        producer.poll(0)
        if transactional_id and time.perf_counter() - last_commit >= commit_interval_s:
            producer.commit_transaction(60)
            producer.begin_transaction()
            last_commit = time.perf_counter()
    if transactional_id:
        producer.commit_transaction(60)
    else:
        producer.flush(120)
    return count / (time.perf_counter() - started)


def consume(bootstrap: str, topic: str, count: int, isolation: str) -> float:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = 0
    started = time.perf_counter()
    deadline = started + 120
    while seen < count and time.perf_counter() < deadline:
        for message in consumer.consume(10_000, 0.5):
            if not message.error():
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    if seen < count:
        raise RuntimeError(f"{isolation} read {seen} of {count}")
    return count / elapsed


def run(messages: int, rounds: int = 3) -> list[tuple[str, float, str]]:
    """Every workload once per round, in turn (so a noisy neighbour hits them alike); best of the rounds."""
    best: dict[str, float] = {}
    # "plain5" has the idempotent producer's in-flight limit (5): the ratio to it is what idempotence
    # costs the broker; the ratio to "plain" (librdkafka's default, 1,000,000 in flight) is what a user sees.
    workloads = [("plain", {}), ("plain5", {"max_in_flight": 5}), ("idem", {"idempotent": True})] + [
        (f"txn{ms}", {"idempotent": True, "commit_interval_s": ms / 1000}) for ms in (10, 100, 1000)]
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(data_dir=Path(tmp) / "data") as broker:
        bs = broker.bootstrap
        create(bs, "warmup")
        produce(bs, "warmup", messages // 10)
        for r in range(rounds):
            for name, options in workloads:
                topic = f"{name}-{r}"
                create(bs, topic)
                if "commit_interval_s" in options:
                    options = {**options, "transactional_id": f"bench-{topic}"}
                rate = produce(bs, topic, messages, **options)
                best[name] = max(best.get(name, 0.0), rate)
            for isolation in ("read_uncommitted", "read_committed"):
                rate = consume(bs, f"txn100-{r}", messages, isolation)
                best[isolation] = max(best.get(isolation, 0.0), rate)
    rows = [("plain produce (librdkafka default in-flight)", best["plain"], "1.00x"),
            ("plain produce, max.in.flight=5", best["plain5"], f"{best['plain5'] / best['plain']:.2f}x of plain"),
            ("idempotent produce (max.in.flight=5)", best["idem"],
             f"{best['idem'] / best['plain5']:.2f}x of plain with the same in-flight limit; "
             f"{best['idem'] / best['plain']:.2f}x of default plain")]
    for ms in (10, 100, 1000):
        rate = best[f"txn{ms}"]
        rows.append((f"transactional, commit every {ms} ms", rate, f"{rate / best['idem']:.2f}x of idempotent"))
    rows.append(("consume read_uncommitted", best["read_uncommitted"], "1.00x"))
    rows.append(("consume read_committed", best["read_committed"],
                 f"{best['read_committed'] / best['read_uncommitted']:.2f}x of read_uncommitted"))
    return rows


def markdown(rows, messages: int) -> str:
    lines = [
        "## Idempotence and transactions",
        "",
        (f"`bench/txn_bench.py --messages {messages}`, run {date.today().isoformat()} on the project machine "
         f"({platform.machine()}, Python {platform.python_version()}, 2 vCPUs shared with other engineers' "
         "work): one confluent-kafka producer or consumer against an `eoslog serve` process, 1 KiB values "
         "over 3 partitions, acks=all, linger.ms=5, fsync on acknowledgement (the default)."),
        "",
        "Best of 3 rounds; each round runs every workload once, in turn, on fresh topics.",
        "",
        "| workload | messages/s | ratio |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {rate:,.0f} | {ratio} |" for name, rate, ratio in rows]
    lines += [
        "",
        "- Idempotence costs what `max.in.flight=5` and the per-batch producer-state check cost: fewer",
        "  requests in flight against a broker that fsyncs before it acknowledges.",
        "- Transactional runs come out *faster* than idempotent ones here. That is librdkafka, not the broker:",
        "  each new transaction holds its first records until AddPartitionsToTxn is answered (one fsync'ed",
        "  `__transaction_state` record), so they leave in fewer, larger batches; the more often it commits,",
        "  the bigger the effect. Each commit costs PrepareCommit, one marker per partition and CompleteCommit",
        "  (three group-commit fsync rounds, about a millisecond each on this disk), which at 10 ms intervals",
        "  is less than the batching gain.",
        "- This machine is shared: figures swing by 2-3x between runs, ratios included.",
        "- read_committed reads up to the last stable offset and gets the aborted-transaction list with each",
        "  fetch (only computed when an aborted transaction overlaps the range); over committed data it",
        "  costs the consumer nothing measurable.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--write", action="store_true", help="append the section to docs/benchmarks.md")
    args = parser.parse_args()
    rows = run(args.messages)
    section = markdown(rows, args.messages)
    print(section)
    if args.write:
        path = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
        text = path.read_text()
        start = text.find("## Idempotence and transactions")
        if start >= 0:  # replace the previous run's section
            end = text.find("\n## ", start + 1)
            text = text[:start] + (text[end + 1 :] if end >= 0 else "")
        path.write_text(text.rstrip("\n") + "\n\n" + section)


if __name__ == "__main__":
    main()
