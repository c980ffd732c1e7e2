"""Crashes and timers: the broker SIGKILLed with transactions open, a decision logged whose markers were
never written (finished from the log at the next start), and the transaction timeout."""

from __future__ import annotations

import asyncio
import time

import confluent_kafka
import pytest
from txn_clients import READERS, create_topics

from eoslog.coordinator.transaction.state import TransactionState
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.process import BrokerProcess


def wait_for(condition, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"{what} not reached within {timeout} s")


def txn_producer(bootstrap: str, transactional_id: str, **extra) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                         "linger.ms": 5, **extra})
    producer.init_transactions(30)
    return producer


def produce(producer, topic: str, values: dict[int, list[bytes]]) -> None:
    for partition, items in values.items():
        for value in items:
            producer.produce(topic, value=value, partition=partition)
    producer.flush(30)


def test_broker_sigkilled_with_open_transactions(tmp_path):
    with BrokerProcess(data_dir=tmp_path / "data") as broker:
        create_topics(broker.bootstrap, {"crash": 2})
        committer = txn_producer(broker.bootstrap, "crash-commit")
        aborter = txn_producer(broker.bootstrap, "crash-abort")
        committer.begin_transaction()
        aborter.begin_transaction()
        produce(committer, "crash", {0: [b"c0", b"c1"], 1: [b"c2"]})
        produce(aborter, "crash", {0: [b"a0"], 1: [b"a1", b"a2"]})
        broker.kill()
        broker.start()
        # Both clients carry on against the restarted broker: the coordinator reloaded their Ongoing
        # transactions from __transaction_state, the partitions their open transactions from the log.
        committer.commit_transaction(60)
        aborter.abort_transaction(60)
        tps = [("crash", 0), ("crash", 1)]
        for reader in READERS.values():
            assert reader(broker.bootstrap, tps, "read_committed") == {("crash", 0): [b"c0", b"c1"],
                                                                       ("crash", 1): [b"c2"]}
        everything = READERS["confluent"](broker.bootstrap, tps, "read_uncommitted")
        assert sorted(everything[("crash", 0)] + everything[("crash", 1)]) == [b"a0", b"a1", b"a2", b"c0", b"c1", b"c2"]


def test_logged_decision_is_finished_after_restart(tmp_path):
    """PrepareCommit is logged but no marker is written (the marker writer hangs), the broker stops;
    the next start must write the markers and the CompleteCommit record from what the log says."""
    data_dir = tmp_path / "data"
    with EmbeddedBroker(data_dir=data_dir) as broker:
        create_topics(broker.bootstrap, {"prepared": 2})
        coordinator = broker.broker.coordinators.transactions

        async def never(*args, **kwargs):
            await asyncio.Future()

        coordinator.markers.write = never
        producer = txn_producer(broker.bootstrap, "prepared-id")
        producer.begin_transaction()
        produce(producer, "prepared", {0: [b"p0"], 1: [b"p1"]})
        producer.commit_transaction(60)  # answered after the Prepare record, markers still pending
        state = broker.call(lambda: coordinator.describe("prepared-id").state)
        assert state is TransactionState.PREPARE_COMMIT
        tps = [("prepared", 0), ("prepared", 1)]
        assert READERS["kafka-python"](broker.bootstrap, tps, "read_committed") == {tps[0]: [], tps[1]: []}
        producer.flush(1)
    with EmbeddedBroker(data_dir=data_dir) as broker:
        coordinator = broker.broker.coordinators.transactions
        wait_for(lambda: broker.call(lambda: coordinator.describe("prepared-id").state)
                 is TransactionState.COMPLETE_COMMIT, what="CompleteCommit after restart")
        for reader in READERS.values():
            assert reader(broker.bootstrap, tps, "read_committed") == {tps[0]: [b"p0"], tps[1]: [b"p1"]}


def test_timed_out_transaction_is_aborted_and_producer_recovers(txn_broker):
    from kafka import KafkaProducer
    from kafka.errors import InvalidProducerEpochError

    bootstrap = txn_broker.bootstrap
    create_topics(bootstrap, {"timeout": 1})
    coordinator = txn_broker.broker.coordinators.transactions
    slow = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="slow", transaction_timeout_ms=3000)
    slow.init_transactions()
    slow.begin_transaction()
    for value in (b"slow-0", b"slow-1"):
        slow.send("timeout", value, partition=0).get(30)
    doomed = txn_producer(bootstrap, "doomed", **{"transaction.timeout.ms": 3000})
    doomed.begin_transaction()
    produce(doomed, "timeout", {0: [b"doomed-0", b"doomed-1"]})
    other = txn_producer(bootstrap, "other")
    other.begin_transaction()
    produce(other, "timeout", {0: [b"other-0"]})
    other.commit_transaction(30)
    # Until the timeout fires, the open transactions hold the last stable offset at their first record
    # (state and offsets read together on the broker's loop, so this does not race the timer).
    partition = txn_broker.broker.registry.partition("timeout", 0)
    state, lso, hw = txn_broker.call(lambda: (coordinator.describe("slow").state, partition.last_stable_offset,
                                              partition.high_watermark))
    if state is TransactionState.ONGOING:
        assert (lso, hw) == (0, 6)  # slow-0/1, doomed-0/1, other-0, other's COMMIT marker
    for transactional_id in ("slow", "doomed"):
        wait_for(lambda tid=transactional_id: txn_broker.call(lambda: coordinator.describe(tid).state)
                 is TransactionState.COMPLETE_ABORT, what=f"the timeout abort of {transactional_id}")
    for reader in READERS.values():
        assert reader(bootstrap, [("timeout", 0)], "read_committed") == {("timeout", 0): [b"other-0"]}
    # A timed-out transaction can never be committed (librdkafka treats the refusal as a fence)...
    with pytest.raises(confluent_kafka.KafkaException):
        doomed.commit_transaction(30)
    # ...and a producer that learns of the timeout from a refused write (INVALID_PRODUCER_EPOCH, abortable
    # per KIP-588) bumps its epoch with a KIP-360 InitProducerId and carries on: kafka-python does so.
    with pytest.raises(InvalidProducerEpochError):
        slow.send("timeout", b"too-late", partition=0).get(30)

    def begin():  # the client's epoch bump runs in its background thread
        try:
            slow.begin_transaction()
            return True
        except Exception:  # noqa: BLE001 - still bumping
            return False

    wait_for(begin, what="kafka-python's epoch bump")
    slow.send("timeout", b"recovered", partition=0).get(30)
    slow.commit_transaction()
    slow.close(5)
    for reader in READERS.values():
        assert reader(bootstrap, [("timeout", 0)], "read_committed") == {("timeout", 0): [b"other-0", b"recovered"]}
