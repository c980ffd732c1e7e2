"""The consume-transform-produce copier run shared by the copier tests (classic and consumer group protocol
on one broker; the cluster copier uses its input and its checks): numbered records copied from a
4-partition topic to a 3-partition one by transactional copiers (copier_child.py) while faults land at
fractions of the copy, then a read_committed reader's checks -- no duplicates, output set == input set,
each input partition's order preserved."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import confluent_kafka

from eoslog.records.batch import iter_batches
from eoslog.records.control import parse_control_batch
from eoslog.records.errors import CorruptRecordError
from eoslog.testing.process import BrokerProcess
from tests.transactions.txn_clients import READERS, create_topics

INPUT_PARTITIONS = 4
OUTPUT_PARTITIONS = 3
COPIERS = 2
CHILD = Path(__file__).parent / "copier_child.py"


def expected(count: int) -> set[bytes]:
    return {f"{i % INPUT_PARTITIONS}:{i:06d}".encode() for i in range(count)}


def seed(bootstrap: str, topic: str, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=f"{i % INPUT_PARTITIONS}:{i:06d}".encode(), partition=i % INPUT_PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def commit_start_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """Commits offset 0 of every input partition for the copiers' group before any copier starts, so
    that no copier ever looks up a logical offset (auto.offset.reset, or its rewind's OFFSET_BEGINNING).

    Why: librdkafka 2.16 can move a partition back to such a position after the application seeked it
    elsewhere (its issue 2256). A partition assigned without a committed offset is looked up
    (ListOffsets); if the copier rewinds (seek) while that lookup is in flight, the outdated answer
    re-arms the client's lookup timer, neither the fresh answer nor a later seek stops it, and half a
    second later the partition jumps back to the beginning: records already copied and committed are
    copied again, in a later transaction that commits too. The client's debug log shows it ("outdated
    offset response: (re)starting offset query timer", then "timed offset query for offset BEGINNING
    in state active"); the broker had no part in it. It made the consumer-protocol copier test fail
    in 3 of 120 runs, four at a time on two cores (docs/verification.md)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)],
                        asynchronous=False)
    finally:
        consumer.close()


def committed_progress(bootstrap: str, group: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(INPUT_PARTITIONS)]
        return sum(max(tp.offset, 0) for tp in consumer.committed(tps, 10))
    except confluent_kafka.KafkaException:
        return 0  # the broker is restarting
    finally:
        consumer.close()


def fence_copiers(bootstrap: str, topic: str, partitions: int) -> None:
    """What a replacement copier does first: InitProducerId under each copier's transactional id, which
    aborts the transaction a killed (or stuck) copier left open and waits until its markers are written.
    Without it a read_committed reader would stop at that transaction's first offset (the last stable
    offset) and miss whatever was committed after it; with it, every output partition must be stable to
    its end (a transaction still open would be one the coordinator lost)."""
    for n in range(COPIERS):
        fencer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"copier-{n}"})
        fencer.init_transactions(60)
        fencer.flush(10)
    probes = {isolation: confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "fence-check",
                                                    "isolation.level": isolation})
              for isolation in ("read_committed", "read_uncommitted")}
    try:
        deadline = time.monotonic() + 30  # the abort markers may still be on their way
        while True:
            behind = {}
            for p in range(partitions):
                tp = confluent_kafka.TopicPartition(topic, p)
                stable = probes["read_committed"].get_watermark_offsets(tp, timeout=10, cached=False)[1]
                end = probes["read_uncommitted"].get_watermark_offsets(tp, timeout=10, cached=False)[1]
                if stable != end:
                    behind[f"{topic}-{p}"] = (stable, end)
            if not behind:
                return
            assert time.monotonic() < deadline, f"(last stable offset, end) after fencing the copiers: {behind}"
            time.sleep(0.2)
    finally:
        for probe in probes.values():
            probe.close()


def _whole_batches(data: bytes):
    """The batches of a segment file up to the first one cut short or damaged."""
    batches = iter_batches(data)
    while True:
        try:
            yield next(batches)
        except (StopIteration, CorruptRecordError):
            return


def where_on_disk(data_dir: Path, topics: dict[str, int], values: list[bytes]) -> str:
    """Where ``values`` are in the broker's segment files, each copy with its producer and what became of
    its transaction (COMMIT, ABORT, OPEN, or "plain" outside any transaction): tells a reader's mistake
    from a log that really holds a value twice, and one transaction appended twice from two transactions
    that both committed. Reads files the running broker writes, so the newest batch may be cut short."""
    wanted = set(values)
    found: dict[bytes, list[str]] = defaultdict(list)
    for topic, partitions in topics.items():
        for partition in range(partitions):
            open_txns: dict[int, list[tuple[int, bytes]]] = defaultdict(list)  # producer -> (offset, value)

            def settle(producer_id: int, epoch: int, outcome: str, name=f"{topic}-{partition}", txns=open_txns):
                for offset, value in txns.pop(producer_id, []):
                    found[value].append(f"{name}@{offset} pid {producer_id}/{epoch} {outcome}")

            for segment in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
                for batch in _whole_batches(segment.read_bytes()):
                    header = batch.header
                    if header.is_control:
                        marker = parse_control_batch(batch)
                        settle(header.producer_id, header.producer_epoch, marker.control_type.name)
                        continue
                    for record in batch.absolute_records():
                        if record.value in wanted:
                            if header.is_transactional:
                                open_txns[header.producer_id].append((record.offset, record.value))
                            else:
                                found[record.value].append(f"{topic}-{partition}@{record.offset} plain")
            for producer_id in list(open_txns):
                settle(producer_id, -1, "OPEN")
    return "; ".join(f"{value.decode()}: {found.get(value) or 'nowhere'}" for value in values)


def check_copied(got: dict, count: int, explain=None) -> None:
    """``got``: output partition -> values a read_committed reader found there. ``explain(values)``, when
    given, says where the values a check fails on are (``where_on_disk``)."""
    explain = explain or (lambda values: ", ".join(value.decode() for value in values))
    everything = [value for values in got.values() for value in values]
    counts = Counter(everything)
    twice = sorted(value for value, seen in counts.items() if seen > 1)
    assert not twice, f"{len(twice)} values more than once in the output, e.g. {explain(twice[:5])}"
    wanted = expected(count)
    missing = sorted(wanted - counts.keys())
    assert not missing, f"{len(missing)} values missing from the output, e.g. {explain(missing[:5])}"
    assert counts.keys() == wanted, f"values never produced: {sorted(counts.keys() - wanted)[:5]}"
    for values in got.values():
        per_input = defaultdict(list)
        for value in values:
            source, sequence = value.split(b":")
            per_input[source].append(int(sequence))
        for source, sequences in per_input.items():
            assert sequences == sorted(sequences), f"input partition {source.decode()} lost its order"


def run_copier(tmp_path: Path, count: int, schedule: list[tuple[float, str]], *, protocol: str = "classic",
               properties: dict[str, str] | None = None, deadline_s: float = 420) -> None:
    """Seeds ``count`` records, copies them with COPIERS copiers of the group ``protocol`` ("classic" or
    "consumer"), SIGKILLs the broker ("broker") or a copier ("copier") when the committed progress reaches
    each fraction of ``schedule`` (faults follow the copy, not the clock), and checks the output."""
    with BrokerProcess(data_dir=tmp_path / "data", properties=properties) as broker:
        bs = broker.bootstrap
        create_topics(bs, {"copy-in": INPUT_PARTITIONS, "copy-out": OUTPUT_PARTITIONS})
        seed(bs, "copy-in", count)
        commit_start_offsets(bs, "copiers", "copy-in", INPUT_PARTITIONS)
        logs = open(tmp_path / "copiers.log", "w")  # noqa: SIM115 - shared by every copier started below
        extra = [] if protocol == "classic" else [protocol]

        def start(n: int) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, str(CHILD), bs, "copiers", f"copier-{n}", "copy-in", "copy-out",
                 str(OUTPUT_PARTITIONS), *extra], stdout=logs, stderr=logs)

        copiers = {n: start(n) for n in range(COPIERS)}
        done: dict[str, int] = defaultdict(int)
        pending = list(schedule)
        deadline = time.monotonic() + deadline_s
        try:
            while True:
                assert time.monotonic() < deadline, f"copy did not finish; faults so far {dict(done)}"
                for n, child in copiers.items():
                    if child.poll() is not None:  # a copier that hit a fatal error exits; replace it
                        copiers[n] = start(n)
                progress = committed_progress(bs, "copiers", "copy-in")
                if pending and progress >= pending[0][0] * count:
                    _, fault = pending.pop(0)
                    if fault == "broker":
                        broker.restart(hard=True)
                    else:
                        victim = done["copier"] % COPIERS
                        os.kill(copiers[victim].pid, signal.SIGKILL)
                        copiers[victim].wait()
                        copiers[victim] = start(victim)
                    done[fault] += 1
                if progress >= count and not pending:
                    break
                time.sleep(0.1)
        finally:
            for child in copiers.values():
                child.kill()
                child.wait()
            logs.close()
        wanted: dict[str, int] = defaultdict(int)
        for _, fault in schedule:
            wanted[fault] += 1
        assert done == wanted

        fence_copiers(bs, "copy-out", OUTPUT_PARTITIONS)
        check_copied(READERS["confluent"](bs, [("copy-out", p) for p in range(OUTPUT_PARTITIONS)], "read_committed"),
                     count, lambda values: where_on_disk(
                         broker.data_dir, {"copy-in": INPUT_PARTITIONS, "copy-out": OUTPUT_PARTITIONS}, values))
