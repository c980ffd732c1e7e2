"""Shared pieces of the group tests: consumer subprocesses, a paced producer, the history analysis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

CHILD = Path(__file__).with_name("consumer_child.py")



class ConsumerProcess:
    """One consumer_child.py; its stderr goes to a file next to its history."""

    def __init__(self, workdir: Path, name: str, client: str, bootstrap: str, group: str, topic: str,
                 assignor: str, session_ms: int = 6000, commit_delay_ms: int = 0) -> None:
        self.name = name
        self.client = client
        self.history = workdir / f"{name}.history"
        self.stderr = workdir / f"{name}.stderr"
        self.crashed = False
        with open(self.stderr, "ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, str(CHILD), client, bootstrap, group, topic, assignor, str(self.history),
                 str(session_ms), str(commit_delay_ms)], stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)

    def processed(self) -> int:
        try:
            return sum(1 for line in self.history.read_text().splitlines() if line.startswith("P "))
        except FileNotFoundError:
            return 0

    def terminate(self, timeout: float = 30) -> None:
        """Clean shutdown: the client closes and leaves the group."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout)

    def kill(self) -> None:
        self.crashed = True
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def cleanup(self) -> None:
        if self.process.poll() is None:
            try:
                os.kill(self.process.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.process.kill()
            self.process.wait(10)


class PacedProducer(threading.Thread):
    """Produces values "0".."count-1" (value i to partition i % partitions) at about ``rate`` per second.
    ``holds`` (value -> event): production waits before that value until the event is set, so a test's later
    phase is sure to have records left to consume however long the earlier phases took."""

    def __init__(self, bootstrap: str, topic: str, count: int, partitions: int, rate: float,
                 holds: dict[int, threading.Event] | None = None) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.count, self.partitions, self.rate = bootstrap, topic, count, partitions, rate
        self.holds = holds or {}
        self.delivered = 0
        self.errors: list = []

    def run(self) -> None:
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                                             "linger.ms": 5, "log_level": 3})

        def on_delivery(err, msg):
            if err is not None:
                self.errors.append(err)
            else:
                self.delivered += 1

        started, paced_from = time.monotonic(), 0
        for i in range(self.count):
            if i in self.holds:
                producer.poll(0)
                self.holds[i].wait()
                started, paced_from = time.monotonic(), i  # the pace resumes here, without a burst
            while True:
                try:
                    producer.produce(self.topic, str(i).encode(), partition=i % self.partitions,
                                     on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 100 == 99:
                producer.poll(0)
                ahead = (i + 1 - paced_from) / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        remaining = producer.flush(120)
        if remaining:
            self.errors.append(f"{remaining} undelivered")


@dataclass
class Processing:
    member: str
    partition: int
    offset: int
    value: int
    covered: bool = False  # a later successful commit of this member covered it
    failed_commit: bool = False  # its own commit failed


@dataclass
class History:
    processings: list[Processing] = field(default_factory=list)
    last_commit: dict[tuple[str, int], int] = field(default_factory=dict)  # (member, partition) -> next offset

    def values(self) -> set[int]:
        return {p.value for p in self.processings}


def read_history(members: list[ConsumerProcess]) -> History:
    history = History()
    for member in members:
        try:
            lines = member.history.read_text().splitlines()
        except FileNotFoundError:
            continue
        uncovered: dict[int, list[Processing]] = defaultdict(list)
        for line in lines:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "P" and len(parts) == 4:
                p = Processing(member.name, int(parts[1]), int(parts[2]), int(parts[3]))
                history.processings.append(p)
                uncovered[p.partition].append(p)
            elif parts[0] in ("C", "F") and len(parts) == 3:
                partition, next_offset = int(parts[1]), int(parts[2])
                still = []
                for p in uncovered[partition]:
                    if p.offset < next_offset:
                        if parts[0] == "C":
                            p.covered = True
                        else:
                            p.failed_commit = True
                            still.append(p)
                    else:
                        still.append(p)
                uncovered[partition] = still
                if parts[0] == "C":
                    key = (member.name, partition)
                    history.last_commit[key] = max(history.last_commit.get(key, 0), next_offset)
    return history


@dataclass
class Verdict:
    processed: int
    distinct: int
    duplicates: int
    crash_tail_duplicates: int
    failed_commit_duplicates: int


def distinct_processed(members: list[ConsumerProcess]) -> int:
    """How many distinct messages the members have processed so far (from their history files)."""
    return len(read_history(members).values())


def stop_running(members: list[ConsumerProcess]) -> None:
    """A clean shutdown (LeaveGroup) of every member still running; crashed ones are left as they are."""
    for member in members:
        if member.process.poll() is None:
            member.terminate()


def check_at_least_once(history: History, count: int, members: list[ConsumerProcess]) -> Verdict:
    """Every value processed; a value processed twice only where all but (at most) one processing was
    never committed, and each uncommitted duplicate belongs to a crashed member's tail or to a batch
    whose commit the client saw fail."""
    crashed = {m.name for m in members if m.crashed}
    missing = set(range(count)) - history.values()
    assert not missing, f"{len(missing)} messages never processed, e.g. {sorted(missing)[:10]}"
    by_value: dict[int, list[Processing]] = defaultdict(list)
    for p in history.processings:
        by_value[p.value].append(p)
    crash_tail = failed = 0
    for value, processings in by_value.items():
        if len(processings) == 1:
            continue
        covered = [p for p in processings if p.covered]
        assert len(covered) <= 1, f"value {value} was committed and processed again: {processings}"
        for p in processings:
            if p.covered:
                continue
            if p.member in crashed:
                crash_tail += 1
            elif p.failed_commit:
                failed += 1
            else:
                raise AssertionError(f"value {value} processed again after a clean processing: {processings}")
    counts = Counter(p.value for p in history.processings)
    return Verdict(len(history.processings), len(counts), sum(c - 1 for c in counts.values()), crash_tail, failed)
