"""Transaction version 2 (KIP-890 part 2) against a real broker, over TCP.

No client installed here speaks it: confluent-kafka 2.16.1 (librdkafka 2.16) sends EndTxn v1 and Produce
v10, kafka-python 3.0.12 EndTxn v3 / Produce v9, aiokafka 0.14 EndTxn v0 / Produce v7, even with
``transaction.version`` 2 finalized (captured from this broker). So the version 2 producer here is eoslog's
own protocol code (``BrokerConnection``, the codec the admin tools use) following KIP-890's client rules: no
AddPartitionsToTxn, EndTxn v5, and the producer id / epoch of EndTxn's answer for the next transaction
(sequences start again at 0). Reads go through confluent-kafka (read_committed / read_uncommitted).

The delayed requests go through the suite's fault proxy (eoslog.testing.faultproxy): it holds a Produce
or an EndTxn on a second connection while the producer finishes its transaction and starts the next
one, then forwards it unchanged.
"""

from __future__ import annotations

import uuid

import confluent_kafka
import pytest
from txn_clients import create_topics, read_confluent

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.testing.faultproxy import FaultProxy

PRODUCE, INIT_PRODUCER_ID, END_TXN, API_VERSIONS, DESCRIBE_TRANSACTIONS = 0, 22, 26, 18, 65


class V2Producer:
    """A transaction version 2 producer on one connection: one partition per topic, acks=all."""

    def __init__(self, bootstrap: str, transactional_id: str) -> None:
        self.wire = BrokerConnection.from_bootstrap(bootstrap, client_id="tv2-producer")
        self.transactional_id = transactional_id
        self.producer_id, self.producer_epoch = -1, -1
        self.sequences: dict[str, int] = {}

    def init(self) -> None:
        response = self.wire.request(INIT_PRODUCER_ID, 4, messages.InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=60_000, producer_id=-1,
            producer_epoch=-1))
        assert response.error_code == 0
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self.sequences.clear()

    def produce_request(self, topic: str, value: bytes, *, sequence: int | None = None):
        if sequence is None:
            sequence = self.sequences.get(topic, 0)
            self.sequences[topic] = sequence + 1
        batch = build_batch([SimpleRecord(None, value)], producer_id=self.producer_id,
                            producer_epoch=self.producer_epoch, base_sequence=sequence, is_transactional=True)
        Data = messages.ProduceRequest.TopicProduceData
        return messages.ProduceRequest(transactional_id=self.transactional_id, acks=-1, timeout_ms=30_000,
                                       topic_data=[Data(name=topic, partition_data=[
                                           Data.PartitionProduceData(index=0, records=batch)])])

    def produce(self, topic: str, value: bytes) -> int:
        response = self.wire.request(PRODUCE, 12, self.produce_request(topic, value))
        return response.responses[0].partition_responses[0].error_code

    def end_txn_request(self, commit: bool):
        return messages.EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                      producer_epoch=self.producer_epoch, committed=commit)

    def end(self, commit: bool) -> tuple[int, int, int]:
        """EndTxn v5; on success the producer continues with the identity it answers."""
        response = self.wire.request(END_TXN, 5, self.end_txn_request(commit))
        if response.error_code == 0:
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
            self.sequences.clear()
        return response.error_code, response.producer_id, response.producer_epoch

    def describe(self):
        response = self.wire.request(DESCRIBE_TRANSACTIONS, 0, messages.DescribeTransactionsRequest(
            transactional_ids=[self.transactional_id]))
        return response.transaction_states[0]

    def close(self) -> None:
        self.wire.close()


@pytest.fixture
def topic(txn_broker):
    name = f"tv2-{uuid.uuid4().hex[:8]}"
    create_topics(txn_broker.bootstrap, {name: 1})
    return name


@pytest.fixture
def producer(txn_broker):
    p = V2Producer(txn_broker.bootstrap, f"tv2-{uuid.uuid4().hex[:8]}")
    p.init()
    yield p
    p.close()


@pytest.fixture
def proxy(txn_broker):
    host, _, port = txn_broker.bootstrap.rpartition(":")
    fault_proxy = FaultProxy(host, int(port))
    fault_proxy.start_in_thread()
    yield fault_proxy
    fault_proxy.stop()


def committed(bootstrap: str, topic: str) -> list[bytes]:
    return read_confluent(bootstrap, [(topic, 0)], "read_committed")[(topic, 0)]


def everything(bootstrap: str, topic: str) -> list[bytes]:
    return read_confluent(bootstrap, [(topic, 0)], "read_uncommitted")[(topic, 0)]


def test_the_broker_advertises_transaction_version_2(txn_broker):
    wire = BrokerConnection.from_bootstrap(txn_broker.bootstrap, client_id="tv2-features")
    try:
        response = wire.request(API_VERSIONS, 3, messages.ApiVersionsRequest(client_software_name="eoslog-test",
                                                                          client_software_version="1.0"))
        versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert versions[END_TXN][1] == 5 and versions[PRODUCE][1] == 13  # v12 is what TV2 needs; v13 adds topic ids
        assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
            ("transaction.version", 2, 2)]
        assert response.finalized_features_epoch >= 0
        assert [(f.name, f.max_version) for f in response.supported_features] == [("transaction.version", 2)]
        # librdkafka before 2.2 cannot parse tagged fields here: it is answered without them.
        old = wire.request(API_VERSIONS, 3, messages.ApiVersionsRequest(client_software_name="librdkafka",
                                                                     client_software_version="2.0.2"))
        assert old.finalized_features == [] and old.supported_features == []
        assert {k.api_key: (k.min_version, k.max_version) for k in old.api_keys} == versions
    finally:
        wire.close()


def test_every_end_txn_bumps_the_epoch_and_produce_adds_the_partition(txn_broker, topic, producer):
    pid, epoch = producer.producer_id, producer.producer_epoch
    # No AddPartitionsToTxn: the first Produce of the transaction adds its partition.
    assert producer.produce(topic, b"c1") == 0
    described = producer.describe()
    assert described.transaction_state == "Ongoing"
    assert [(t.topic, list(t.partitions)) for t in described.topics] == [(topic, [0])]
    assert producer.end(commit=True) == (0, pid, epoch + 1)
    assert producer.produce(topic, b"a1") == 0
    assert producer.end(commit=False) == (0, pid, epoch + 2)
    assert producer.produce(topic, b"c2") == 0
    assert producer.produce(topic, b"c3") == 0
    assert producer.end(commit=True) == (0, pid, epoch + 3)
    described = producer.describe()
    assert (described.transaction_state, described.producer_epoch) == ("CompleteCommit", epoch + 3)
    # The EndTxn that ended the last transaction, retried (its answer lost): the same answer, no bump.
    retry = producer.wire.request(END_TXN, 5, messages.EndTxnRequest(
        transactional_id=producer.transactional_id, producer_id=pid, producer_epoch=epoch + 2, committed=True))
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, pid, epoch + 3)
    # Abort with nothing open ("abort when unsure") still bumps, so nothing in flight can land later.
    assert producer.end(commit=False) == (0, pid, epoch + 4)
    assert committed(txn_broker.bootstrap, topic) == [b"c1", b"c2", b"c3"]
    assert everything(txn_broker.bootstrap, topic) == [b"c1", b"a1", b"c2", b"c3"]


@pytest.mark.parametrize("outcome", ["abort", "commit"])
def test_a_delayed_produce_of_a_finished_transaction_never_lands(txn_broker, topic, producer, proxy, outcome):
    assert producer.produce(topic, b"first") == 0
    # The producer's next batch is held in the network (a second connection, through the proxy)...
    late = BrokerConnection.from_bootstrap(f"127.0.0.1:{proxy.port}", client_id="tv2-late")
    try:
        proxy.hold_requests(PRODUCE)
        late.send(PRODUCE, 12, producer.produce_request(topic, b"late"))
        # ... the producer gives up on it and ends the transaction (or a buggy one commits anyway) ...
        assert producer.end(commit=outcome == "commit")[0] == 0
        # ... and starts the next transaction, under the bumped epoch.
        assert producer.produce(topic, b"second") == 0
        proxy.release_requests()
        response = late.receive()
        code = ErrorCode(response.responses[0].partition_responses[0].error_code)
        assert code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED), code
        assert proxy.snapshot()["requests_held"] == 1
    finally:
        late.close()
    assert producer.end(commit=True)[0] == 0
    first = [b"first"] if outcome == "commit" else []
    assert committed(txn_broker.bootstrap, topic) == first + [b"second"]
    assert everything(txn_broker.bootstrap, topic) == [b"first", b"second"]


def test_a_delayed_end_txn_never_ends_the_next_transaction(txn_broker, topic, producer, proxy):
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert producer.produce(topic, b"one") == 0
    late = BrokerConnection.from_bootstrap(f"127.0.0.1:{proxy.port}", client_id="tv2-late")
    try:
        proxy.hold_requests(END_TXN)
        late.send(END_TXN, 5, producer.end_txn_request(commit=True))
        # The producer's request timed out; it sends the commit again on its own connection.
        assert producer.end(commit=True) == (0, pid, epoch + 1)
        assert producer.produce(topic, b"two") == 0
        proxy.release_requests()
        stale = late.receive()
        assert ErrorCode(stale.error_code) is ErrorCode.PRODUCER_FENCED
        assert (stale.producer_id, stale.producer_epoch) == (-1, -1)
    finally:
        late.close()
    # The transaction the stale commit met is still open, and still the producer's to end.
    described = producer.describe()
    assert (described.transaction_state, described.producer_epoch) == ("Ongoing", epoch + 1)
    assert producer.end(commit=False) == (0, pid, epoch + 2)
    assert committed(txn_broker.bootstrap, topic) == [b"one"]
    assert everything(txn_broker.bootstrap, topic) == [b"one", b"two"]


def test_epoch_overflow_moves_the_producer_to_a_new_producer_id(txn_broker, topic, producer):
    # Reaching epoch 32766 through 32766 InitProducerId calls would take minutes; the coordinator's
    # cache is set there instead, between transactions (the partitions only ever see epochs go up).
    def near_the_end():
        txn_broker.broker.coordinators.transactions.get(producer.transactional_id).producer_epoch = 32766

    txn_broker.call(near_the_end)
    producer.producer_epoch = 32766
    old_pid = producer.producer_id
    assert producer.produce(topic, b"last") == 0
    code, new_pid, new_epoch = producer.end(commit=True)
    assert code == 0 and new_pid not in (old_pid, -1) and new_epoch == 0
    # The markers fenced the old producer id at 32767: nothing of it lands any more.
    stale = V2Producer(txn_broker.bootstrap, producer.transactional_id)
    try:
        stale.producer_id, stale.producer_epoch = old_pid, 32766
        assert stale.produce(topic, b"zombie") in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
    finally:
        stale.close()
    assert producer.produce(topic, b"fresh") == 0
    assert producer.end(commit=True) == (0, new_pid, 1)
    assert committed(txn_broker.bootstrap, topic) == [b"last", b"fresh"]


def test_version_1_clients_keep_their_epoch(txn_broker, topic):
    """confluent-kafka speaks transaction version 1 even with version 2 finalized: no bump at EndTxn."""
    transactional_id = f"tv1-{uuid.uuid4().hex[:8]}"
    p = confluent_kafka.Producer({"bootstrap.servers": txn_broker.bootstrap, "transactional.id": transactional_id})
    p.init_transactions(30)
    epochs = []
    wire = BrokerConnection.from_bootstrap(txn_broker.bootstrap, client_id="tv1-describe")
    try:
        for value in (b"v1", b"v2"):
            p.begin_transaction()
            p.produce(topic, value, partition=0)
            p.commit_transaction(30)
            response = wire.request(DESCRIBE_TRANSACTIONS, 0, messages.DescribeTransactionsRequest(
                transactional_ids=[transactional_id]))
            epochs.append(response.transaction_states[0].producer_epoch)
    finally:
        wire.close()
    assert epochs[0] == epochs[1]
    assert committed(txn_broker.bootstrap, topic) == [b"v1", b"v2"]


def test_add_partitions_to_txn_v5_verifies_or_adds_for_a_partition_leader(txn_broker, topic, producer):
    """The brokers' form (KIP-890): one request, several transactions, each VerifyOnly (part 1) or an
    add (part 2: what a leader sends for a Produce v12 whose coordinator is elsewhere)."""
    Transaction = messages.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    Topic = messages.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic

    def ask(verify_only: bool, epoch: int) -> list[tuple[str, str, int, int]]:
        response = producer.wire.request(24, 5, messages.AddPartitionsToTxnRequest(transactions=[Transaction(
            transactional_id=producer.transactional_id, producer_id=producer.producer_id, producer_epoch=epoch,
            verify_only=verify_only, topics=[Topic(name=topic, partitions=[0])])]))
        assert response.error_code == 0
        return [(r.transactional_id, t.name, p.partition_index, p.partition_error_code)
                for r in response.results_by_transaction for t in r.topic_results for p in t.results_by_partition]

    tid, epoch = producer.transactional_id, producer.producer_epoch
    assert ask(True, epoch) == [(tid, topic, 0, ErrorCode.INVALID_TXN_STATE)]  # not in a transaction
    assert producer.describe().transaction_state == "Empty"  # and verifying added nothing
    assert ask(False, epoch) == [(tid, topic, 0, ErrorCode.NONE)]
    assert ask(True, epoch) == [(tid, topic, 0, ErrorCode.NONE)]
    assert producer.describe().transaction_state == "Ongoing"
    assert ask(False, epoch + 1) == [(tid, topic, 0, ErrorCode.PRODUCER_FENCED)]
    assert producer.produce(topic, b"in") == 0  # already added: the Produce needs no add of its own
    assert producer.end(commit=True)[0] == 0
    assert committed(txn_broker.bootstrap, topic) == [b"in"]
