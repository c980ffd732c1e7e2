"""An EndTxn whose connection closes while its PrepareCommit is being made durable still commits.

The broker cancels a closed connection's in-flight requests (server/network.py). The coordinator
finishes a decision it has prepared whatever happens to the request (coordinator/transaction/shard.py,
``_carry_out``): the PrepareCommit record goes to the log, the id's state follows it, the markers are
written. Before, the cancellation rolled the state back while the record stayed logged, and a new
producer's InitProducerId then aborted a transaction the log said commits.

Real broker (in this process, so the test can hold the append), real producer (confluent-kafka) for the
transaction's records, our own wire client for the EndTxn (its socket is closed mid-request), and a
read_committed consumer for the outcome."""

from __future__ import annotations

import asyncio
import threading
import time

import confluent_kafka
import pytest

from eoslog.client.connection import BrokerConnection
from eoslog.cluster.topics import TRANSACTION_STATE
from eoslog.protocol import messages
from eoslog.testing.embedded import EmbeddedBroker
from eoslog.testing.wait import wait_until
from tests.interop.clients import poll_values

pytestmark = pytest.mark.interop

TRANSACTIONAL_ID = "cancelled-end-txn"
TOPIC = "cancelled-end-txn"
RECORDS = 5


class HeldTransactionLog:
    """Wraps the coordinator runtime's ``write_durably``: once armed, the next ``__transaction_state``
    append is written at once but reported durable only after :meth:`release`."""

    def __init__(self, embedded: EmbeddedBroker) -> None:
        self.embedded = embedded
        runtime = embedded.broker.coordinator_runtime
        self._write_durably = runtime.write_durably
        runtime.write_durably = self._held
        self.armed = False
        self.holding = threading.Event()
        self.appender: asyncio.Task | None = None  # the task that made the held append
        self._gate: asyncio.Event | None = None

    def _held(self, topic: str, index: int, batch: bytes):
        future = self._write_durably(topic, index, batch)
        if topic != TRANSACTION_STATE or not self.armed:
            return future
        self.armed = False
        self.appender = asyncio.current_task()
        self._gate = asyncio.Event()

        async def after_release():
            self.holding.set()
            await self._gate.wait()
            return await future

        return asyncio.ensure_future(after_release())

    def release(self) -> None:
        self.embedded.call(lambda: self._gate.set())


def _open_transaction(embedded: EmbeddedBroker):
    """A transaction with RECORDS records, left open; (its shard, producer id, producer epoch)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": embedded.bootstrap, "transactional.id": TRANSACTIONAL_ID})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"committed-%d" % i, partition=0)
    assert producer.flush(30) == 0
    shard = embedded.call(lambda: embedded.broker.coordinators.shard(TRANSACTION_STATE))
    metadata = embedded.call(lambda: shard.get(TRANSACTIONAL_ID))
    return shard, metadata.producer_id, metadata.producer_epoch


def _end_txn(bootstrap: str, producer_id: int, producer_epoch: int) -> BrokerConnection:
    wire = BrokerConnection.from_bootstrap(bootstrap)
    wire.send(26, 3, messages.EndTxnRequest(transactional_id=TRANSACTIONAL_ID, producer_id=producer_id,
                                            producer_epoch=producer_epoch, committed=True))
    return wire


def test_an_end_txn_cancelled_mid_append_completes_as_committed(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as embedded:
        bootstrap = embedded.bootstrap
        shard, producer_id, producer_epoch = _open_transaction(embedded)

        held = HeldTransactionLog(embedded)
        held.armed = True
        wire = _end_txn(bootstrap, producer_id, producer_epoch)
        host, port = wire.sock.getsockname()[:2]
        closed = threading.Event()
        embedded.broker.dispatcher.close_listeners.append(
            lambda connection: connection.peer == f"{host}:{port}" and closed.set())
        assert held.holding.wait(30), "the PrepareCommit append never started"
        wire.close()  # the client hangs up: the broker cancels the EndTxn it is serving
        assert closed.wait(30), "the broker never saw the connection close"
        held.release()

        # Nobody asks again, yet the logged decision is carried out: markers, then CompleteCommit.
        wait_until(lambda: embedded.call(lambda: shard.get(TRANSACTIONAL_ID).state.kafka_name) == "CompleteCommit",
                   30, "the logged PrepareCommit carried out to CompleteCommit")
        # A new producer with the same id (InitProducerId aborts an ongoing transaction) finds nothing
        # left to abort: the records are committed.
        successor = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID})
        successor.init_transactions(60)
        committed = poll_values({"bootstrap.servers": bootstrap}, TOPIC, RECORDS, timeout=15)
        assert committed == [b"committed-%d" % i for i in range(RECORDS)]


def test_a_decision_held_at_shutdown_is_cancelled_and_awaited(tmp_path):
    """The shielded append belongs to the shard: the broker's shutdown cancels and awaits it rather
    than leaving it pending on a closed loop."""
    embedded = EmbeddedBroker(tmp_path / "data")
    embedded.start()
    try:
        _, producer_id, producer_epoch = _open_transaction(embedded)
        held = HeldTransactionLog(embedded)
        held.armed = True
        wire = _end_txn(embedded.bootstrap, producer_id, producer_epoch)
        assert held.holding.wait(30), "the PrepareCommit append never started"
    finally:
        started = time.monotonic()
        embedded.stop()
    wire.close()
    assert time.monotonic() - started < 25, "the shutdown waited for the held append"
    assert held.appender is not None and held.appender.done(), "the held decision outlived the broker"
