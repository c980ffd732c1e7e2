"""The verifier's moving parts without a broker: how a worker classifies outcomes, and the nemesis
schedule (with stand-ins for the broker process and the proxy)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from eoslog.verify.faults import ALL_KINDS, Nemesis
from eoslog.verify.workload import Worker


class FakeProducer:
    """Records calls; raises the queued error from the named method."""

    def __init__(self, fail: dict[str, list[KafkaError]] | None = None) -> None:
        self.fail = fail or {}
        self.calls: list[str] = []

    def _call(self, name: str, *_args, **_kwargs):
        self.calls.append(name)
        errors = self.fail.get(name)
        if errors:
            raise KafkaException(errors.pop(0))

    def begin_transaction(self):
        self._call("begin_transaction")

    def produce(self, topic, value, partition, on_delivery):
        self._call("produce")
        on_delivery(None, FakeMessage(partition, 7))

    def poll(self, timeout):
        return 0

    def flush(self, timeout):
        self._call("flush")
        return 0

    def purge(self):
        self.calls.append("purge")

    def send_offsets_to_transaction(self, offsets, metadata, timeout):
        self._call("send_offsets_to_transaction")

    def commit_transaction(self, timeout):
        self._call("commit_transaction")

    def abort_transaction(self, timeout):
        self._call("abort_transaction")


class FakeMessage:
    def __init__(self, partition: int, offset: int, value: bytes = b"") -> None:
        self._partition, self._offset, self._value = partition, offset, value

    def error(self):
        return None

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

    def value(self):
        return self._value


class FakeConsumer:
    def __init__(self, batches: list[list[FakeMessage]] | None = None) -> None:
        self.batches = batches or []
        self.assignments = 0

    def consume(self, num_messages, timeout):
        return self.batches.pop(0) if self.batches else []

    def assign(self, partitions):
        self.assignments += 1

    def unassign(self):
        pass

    def consumer_group_metadata(self):
        return object()


def make_worker(producer: FakeProducer, consumer: FakeConsumer | None = None, abort_rate: float = 0.0):
    lines: list[tuple] = []
    worker = Worker("127.0.0.1:1", 3, 0, "t", 4, seed=1, abort_rate=abort_rate,
                    emit=lambda type_, f, value: lines.append((type_, f, value)))
    worker.producer = producer
    worker.consumer = consumer or FakeConsumer()
    return worker, lines


def error(code: int, *, fatal: bool = False, retriable: bool = False, abortable: bool = False) -> KafkaError:
    return KafkaError(code, "test", fatal=fatal, retriable=retriable, txn_requires_abort=abortable)


def test_committed_transaction_reports_offsets_and_polls():
    consumer = FakeConsumer([[FakeMessage(1, 4, b"30000009")]])
    worker, lines = make_worker(FakeProducer(), consumer)
    outcome = worker.transaction([["send", "t-2", 30000001], ["poll"]])
    assert outcome == "ok"
    assert lines[0] == ("invoke", "txn", [["send", "t-2", 30000001], ["poll"]])
    assert lines[1] == ("ok", "txn", [["send", "t-2", 30000001, 7], ["poll", {"t-1": [[4, 30000009]]}]])
    assert worker.polled == {1: 5}
    assert "send_offsets_to_transaction" in worker.producer.calls


def test_voluntary_abort_is_a_definite_failure_and_rewinds_the_consumer():
    consumer = FakeConsumer()
    worker, lines = make_worker(FakeProducer(), consumer, abort_rate=1.0)
    assert worker.transaction([["send", "t-0", 30000001]]) == "fail"
    assert worker.producer.calls[-2:] == ["flush", "abort_transaction"]  # flushed so the data is in the log
    assert lines[-1] == ("ok", "assign", ["t-0", "t-1", "t-2", "t-3"])
    assert consumer.assignments == 1


@pytest.mark.parametrize("failing_call, failure, expected", [
    # Before the commit is attempted nothing can commit the transaction: definite.
    ("send_offsets_to_transaction", error(KafkaError._TIMED_OUT, retriable=True), "fail"),
    ("send_offsets_to_transaction", error(KafkaError.PRODUCER_FENCED, fatal=True), "fail"),
    ("send_offsets_to_transaction", error(KafkaError.INVALID_PRODUCER_EPOCH, abortable=True), "fail"),
    # Once the commit was asked for, any error leaves the outcome unknown.
    ("commit_transaction", error(KafkaError._TRANSPORT, abortable=True), "info"),
    ("commit_transaction", error(KafkaError.PRODUCER_FENCED, fatal=True), "info"),
    ("commit_transaction", error(KafkaError.UNKNOWN, retriable=False), "info"),
])
def test_outcome_classification(failing_call, failure, expected):
    producer = FakeProducer({failing_call: [failure]})
    worker, lines = make_worker(producer, FakeConsumer([[FakeMessage(0, 1, b"5")]]))
    assert worker.transaction([["poll"], ["send", "t-1", 30000002]]) == expected
    assert lines[-2][0] == expected
    if failure.fatal():
        assert worker.producer is None  # recreated (and so fenced) before the next transaction
    else:
        assert "abort_transaction" in producer.calls


def test_retriable_commit_error_is_retried_and_commits():
    producer = FakeProducer({"commit_transaction": [error(KafkaError._TIMED_OUT, retriable=True)]})
    worker, _ = make_worker(producer)
    assert worker.transaction([["send", "t-3", 30000003]]) == "ok"
    assert producer.calls.count("commit_transaction") == 2


def test_failed_abort_after_definite_error_is_indefinite():
    producer = FakeProducer({"send_offsets_to_transaction": [error(KafkaError._TIMED_OUT, retriable=True)],
                             "abort_transaction": [error(KafkaError._TIMED_OUT, retriable=True)]})
    worker, _ = make_worker(producer, FakeConsumer([[FakeMessage(0, 1, b"5")]]))
    assert worker.transaction([["poll"]]) == "info"
    assert worker.producer is None


def test_values_are_unique_per_process():
    a, _ = make_worker(FakeProducer())
    values = [mop[2] for _ in range(200) for mop in a.plan() if mop[0] == "send"]
    assert len(values) == len(set(values))
    assert all(3 * 10_000_000 < v < 4 * 10_000_000 for v in values)


# --------------------------------------------------------------------------------------- nemesis


class FakeBroker:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.process = self  # poll() below stands in for Popen.poll
        self.alive = True

    def poll(self):
        return None if self.alive else -9

    def kill(self):
        self.events.append("kill")
        self.alive = False

    def start(self):
        self.events.append("start")
        self.alive = True

    def pause(self):
        self.events.append("pause")

    def resume(self):
        self.events.append("resume")


class FakeProxy:
    def __init__(self) -> None:
        self.settings: list[dict] = []
        self.paused = False

    def set_faults(self, **rates):
        self.settings.append(rates)

    def pause(self):
        self.paused = True

    def resume(self):
        self.paused = False


def test_nemesis_injects_every_kind_each_round_and_heals():
    broker, proxy, kills = FakeBroker(), FakeProxy(), []
    nemesis = Nemesis(ALL_KINDS, seed=5, broker=broker, proxy=proxy,
                      kill_client=lambda: kills.append(1) or "killed one",
                      fault_seconds=(0.0, 0.01), quiet_seconds=(0.0, 0.01))
    nemesis.start()
    deadline = time.monotonic() + 10
    while min((nemesis.counts[k] for k in ALL_KINDS), default=0) < 2:
        assert time.monotonic() < deadline, nemesis.counts
        time.sleep(0.01)
    nemesis.stop()
    assert nemesis.error is None
    assert set(nemesis.counts) == set(ALL_KINDS)
    # Rounds: no kind runs a third time before every kind has run twice.
    assert max(nemesis.counts.values()) - min(nemesis.counts.values()) <= 1
    assert kills and broker.alive and not proxy.paused
    assert proxy.settings[-1] == {"drop_response_rate": 0.0, "delay_response_rate": 0.0, "cut_rate": 0.0}
    assert broker.events.count("pause") == broker.events.count("resume")
    windows = nemesis.windows
    assert all(w.start <= w.end for w in windows)
    assert [w.start for w in windows] == sorted(w.start for w in windows)


def test_nemesis_heals_a_fault_cut_short_by_stop():
    broker, proxy = FakeBroker(), FakeProxy()
    nemesis = Nemesis(["proxy-pause"], seed=1, broker=broker, proxy=proxy,
                      fault_seconds=(30.0, 30.0), quiet_seconds=(0.0, 0.0))
    nemesis.start()
    deadline = time.monotonic() + 5
    while not proxy.paused:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    nemesis.stop()
    assert not proxy.paused


def test_nemesis_refuses_faults_it_cannot_inject():
    with pytest.raises(ValueError, match="broker faults"):
        Nemesis(["broker-kill"], seed=1, proxy=FakeProxy())
    with pytest.raises(ValueError, match="proxy faults"):
        Nemesis(["proxy-cut"], seed=1, broker=FakeBroker())
    with pytest.raises(ValueError, match="unknown fault kinds"):
        Nemesis(["meteor"], seed=1)
