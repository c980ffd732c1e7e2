"""eoslog's own producer, spoken straight in the Kafka protocol: the Spark sink's native writer
(spark/native_producer.py feeds it whole Arrow batches; docs/spark.md, "The native writer") and the
check-back client (client/checkback.py) are built on it.

What it does, in the order a Java transactional producer does it:

1. FindCoordinator for the transactional id, then InitProducerId(transactional_id, timeout): the
   coordinator aborts whatever an earlier holder of the id left open and bumps the epoch, so a
   retried task attempt *fences* the failed one (its later Produce and its commit member are refused).
2. Metadata for the topics the records name: partition counts and each partition's leader.
3. Before the first batch to a partition: AddPartitionsToTxn (the broker refuses transactional batches
   to a partition the transaction has not registered).
4. Produce, acks=all, to each partition's leader; each partition's batches carry consecutive sequence
   numbers from 0. Up to ``max_in_flight`` requests per connection are outstanding; a request holds at
   most one batch per partition (Kafka's rule for Produce v3+), so at most ``max_in_flight`` batches of a
   partition are in flight, which the broker's duplicate check covers (its last five batches).
5. :meth:`flush` waits for every answer. Batches refused with a retriable error, and batches of a lost
   connection, are sent again *with the same bytes* (same sequence numbers) after a metadata refresh,
   oldest first, one at a time: a duplicate answers DUPLICATE_SEQUENCE_NUMBER (written already), and a
   later batch refused OUT_OF_ORDER_SEQUENCE_NUMBER because an earlier one failed simply goes again
   behind it. An epoch or authorization refusal ends the producer with an error.

The transaction is never ended here: its owner ends it (the Spark driver commits it by identity,
transactional_id, producer_id and producer_epoch, exactly as with the librdkafka writer; the check-back
client sends EndTxn itself).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from eoslog.client.connection import BrokerConnection
from eoslog.client.txn_groups import (
    CLIENT_ID,
    METADATA,
    METADATA_VERSION,
    Retry,
    TxnGroupClient,
)
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode

PRODUCE, PRODUCE_VERSION = 0, 8  # the last non-flexible version
INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION = 22, 1
ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_VERSION = 24, 1
ACKS_ALL = -1
MAX_IN_FLIGHT = 5
REQUEST_TIMEOUT_MS = 30_000
_RETRY_BACKOFF_S = (0.01, 0.5)
# Answers after which a batch goes again; a metadata refresh first when leadership may have moved.
_REFRESH = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
                      ErrorCode.UNKNOWN_LEADER_EPOCH})
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


class ProducerError(RuntimeError):
    """The broker refused the producer for good (fenced, unauthorized, invalid request)."""

    def __init__(self, what: str, code: int) -> None:
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        super().__init__(f"{what}: {name}")
        self.code = code


def _retriable(code: int) -> bool:
    return code in ErrorCode._value2member_map_ and ErrorCode(code).retriable


@dataclass
class Batch:
    topic: str
    partition: int
    base_sequence: int
    count: int
    records: bytes
    out_of_order: bool = False  # its last answer was OUT_OF_ORDER_SEQUENCE_NUMBER


@dataclass
class _Leader:
    """One connection to a partition leader and its requests awaiting an answer, oldest first."""

    connection: BrokerConnection
    in_flight: deque = field(default_factory=deque)  # (correlation_id, [Batch])


class Producer:
    """One producer (a Spark task's, a check-back transaction's). Not thread-safe. ``transactional_id`` None: idempotent only, no transaction."""

    def __init__(self, bootstrap: str, transactional_id: str | None, *, transaction_timeout_ms: int = 60_000,
                 security=None, timeout_s: float = 120.0, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.security = security
        self.timeout_s = timeout_s
        self.max_in_flight = max_in_flight
        self.producer_id = -1
        self.producer_epoch = -1
        self._coordinator = TxnGroupClient(bootstrap, timeout_s, security=security)
        self._partition_counts: dict[str, int] = {}
        self._leaders: dict[tuple[str, int], int] = {}  # (topic, partition) -> node id
        self._nodes: dict[int, tuple[str, int]] = {}
        self._connections: dict[int, _Leader] = {}
        self._added: set[tuple[str, int]] = set()
        self._sequences: dict[tuple[str, int], int] = {}
        self._failed: list[Batch] = []

    # ---- lifecycle -----------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the connections; an open transaction stays open (the driver ends it)."""
        self._coordinator.close()
        for leader in self._connections.values():
            leader.connection.close()
        self._connections.clear()

    def init(self) -> None:
        """InitProducerId (at the transaction coordinator when transactional), retried until the deadline."""
        request = messages.InitProducerIdRequest(transactional_id=self.transactional_id,
                                                 transaction_timeout_ms=self.transaction_timeout_ms)
        response = self._coordinator_call(INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, request,
                                          lambda r: r.error_code, "InitProducerId")
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch

    def _coordinator_call(self, api_key: int, version: int, request, error_of, what: str):
        deadline = time.monotonic() + self.timeout_s
        delay = _RETRY_BACKOFF_S[0]
        while True:
            try:
                if self.transactional_id is None:
                    conn = self._coordinator._bootstrap_connection()
                    try:
                        response = conn.request(api_key, version, request)
                    finally:
                        conn.close()
                else:
                    response = self._coordinator._coordinator(self.transactional_id).request(
                        api_key, version, request)
                code = error_of(response)
                if code == 0:
                    return response
                if not _retriable(code):
                    raise ProducerError(f"{what} for {self.transactional_id}", code)
                if code in _COORDINATOR_MOVED:
                    self._coordinator.close()
                failure: Exception = ProducerError(what, code)
            except (OSError, ConnectionError, Retry) as exc:  # Retry: FindCoordinator's retriable answers
                self._coordinator.close()
                failure = exc
            if time.monotonic() + delay > deadline:
                raise TimeoutError(f"{what} for {self.transactional_id} did not succeed within "
                                   f"{self.timeout_s} s: {failure}") from failure
            time.sleep(delay)
            delay = min(delay * 2, _RETRY_BACKOFF_S[1])

    # ---- metadata ------------------------------------------------------------------------------------

    def _refresh_metadata(self, topics) -> None:
        deadline = time.monotonic() + self.timeout_s
        delay = _RETRY_BACKOFF_S[0]
        wanted = sorted(set(topics) | {t for t, _ in self._leaders})
        while True:
            failure = None
            try:
                conn = self._coordinator._bootstrap_connection()
                try:
                    response = conn.request(METADATA, METADATA_VERSION, messages.MetadataRequest(
                        topics=[messages.MetadataRequest.MetadataRequestTopic(name=t) for t in wanted],
                        allow_auto_topic_creation=True))
                finally:
                    conn.close()
                self._nodes = {b.node_id: (b.host, b.port) for b in response.brokers}
                for topic in response.topics:
                    if topic.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                        raise ProducerError(f"metadata of {topic.name}", topic.error_code)
                    if topic.error_code != 0 or not topic.partitions:
                        failure = ProducerError(f"metadata of {topic.name}", topic.error_code)
                        continue
                    self._partition_counts[topic.name] = len(topic.partitions)
                    for p in topic.partitions:
                        if p.leader_id < 0 or p.leader_id not in self._nodes:
                            failure = ProducerError(f"leader of {topic.name}-{p.partition_index}",
                                                    ErrorCode.LEADER_NOT_AVAILABLE)
                        self._leaders[(topic.name, p.partition_index)] = p.leader_id
            except (OSError, ConnectionError) as exc:
                failure = exc
            if failure is None and all(t in self._partition_counts for t in topics):
                return
            if time.monotonic() + delay > deadline:
                raise TimeoutError(f"metadata for {wanted} did not settle within {self.timeout_s} s: {failure}")
            time.sleep(delay)
            delay = min(delay * 2, _RETRY_BACKOFF_S[1])

    def _partition_count(self, topic: str) -> int:
        if topic not in self._partition_counts:
            self._refresh_metadata([topic])
        return self._partition_counts[topic]

    # ---- the transaction's partitions ----------------------------------------------------------------

    def _add_partitions(self, partitions: list[tuple[str, int]]) -> None:
        new = sorted(tp for tp in set(partitions) if tp not in self._added)
        if not new or self.transactional_id is None:
            return
        by_topic: dict[str, list[int]] = {}
        for topic, partition in new:
            by_topic.setdefault(topic, []).append(partition)
        request = messages.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[messages.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                 for t, ps in by_topic.items()])

        def error_of(response) -> int:
            codes = [p.partition_error_code for t in response.results_by_topic_v3_and_below
                     for p in t.results_by_partition if p.partition_error_code != 0]
            if response.error_code:
                codes.append(response.error_code)
            refused = [c for c in codes if c != ErrorCode.OPERATION_NOT_ATTEMPTED and not _retriable(c)]
            return refused[0] if refused else next((c for c in codes if c != ErrorCode.OPERATION_NOT_ATTEMPTED),
                                                   codes[0] if codes else 0)

        self._coordinator_call(ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_TO_TXN_VERSION, request, error_of,
                               "AddPartitionsToTxn")
        self._added.update(new)

    # ---- producing -----------------------------------------------------------------------------------

    def _leader(self, node: int) -> _Leader:
        leader = self._connections.get(node)
        if leader is None:
            host, port = self._nodes[node]
            leader = self._connections[node] = _Leader(BrokerConnection(
                host, port, client_id=CLIENT_ID, timeout_s=min(self.timeout_s, 30.0), security=self.security))
        return leader

    def _send(self, node: int, batches: list[Batch]) -> None:
        try:
            leader = self._leader(node)
            while len(leader.in_flight) >= self.max_in_flight:
                self._receive(node, leader)
            topics: dict[str, list] = {}
            for b in batches:
                topics.setdefault(b.topic, []).append(
                    messages.ProduceRequest.PartitionProduceData(index=b.partition, records=b.records))
            request = messages.ProduceRequest(
                transactional_id=self.transactional_id, acks=ACKS_ALL, timeout_ms=REQUEST_TIMEOUT_MS,
                topic_data=[messages.ProduceRequest.TopicProduceData(name=t, partition_data=ps)
                            for t, ps in topics.items()])
            leader.in_flight.append((leader.connection.send(PRODUCE, PRODUCE_VERSION, request), batches))
        except (OSError, ConnectionError):
            self._lose(node)
            self._failed.extend(batches)

    def _receive(self, node: int, leader: _Leader) -> None:
        _, batches = leader.in_flight[0]
        response = leader.connection.receive()  # the answer to in_flight[0]: answers come in request order
        leader.in_flight.popleft()
        codes = {(t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses}
        for b in batches:
            code = codes.get((b.topic, b.partition), ErrorCode.UNKNOWN_SERVER_ERROR)
            if code in (0, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                continue
            if _retriable(code) or code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                # OUT_OF_ORDER: an earlier batch of the partition failed; flush resends it behind that one.
                b.out_of_order = code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                self._failed.append(b)
                continue
            raise ProducerError(f"Produce to {b.topic}-{b.partition} by {self.transactional_id or 'idempotent'} "
                                f"producer {self.producer_id} epoch {self.producer_epoch}", code)

    def _lose(self, node: int) -> None:
        """A connection failed: its unanswered batches go back to the retry list, in order."""
        leader = self._connections.pop(node, None)
        if leader is None:
            return
        leader.connection.close()
        for _, batches in leader.in_flight:
            self._failed.extend(batches)

    def _drain(self) -> None:
        for node, leader in list(self._connections.items()):
            while leader.in_flight:
                try:
                    self._receive(node, leader)
                except (OSError, ConnectionError):
                    self._lose(node)
                    break

    def flush(self) -> None:
        """Returns once every batch sent is acknowledged by all in-sync replicas (acks=all)."""
        deadline = time.monotonic() + self.timeout_s
        delay = _RETRY_BACKOFF_S[0]
        self._drain()
        while self._failed:
            if time.monotonic() + delay > deadline:
                raise TimeoutError(f"{len(self._failed)} batches of {self.transactional_id} not acknowledged "
                                   f"within {self.timeout_s} s")
            time.sleep(delay)
            delay = min(delay * 2, _RETRY_BACKOFF_S[1])
            failed = sorted(self._failed, key=lambda b: (b.topic, b.partition, b.base_sequence))
            self._failed = []
            self._refresh_metadata({b.topic for b in failed})
            blocked: set[tuple[str, int]] = set()
            for b in failed:
                tp = (b.topic, b.partition)
                if tp in blocked:
                    self._failed.append(b)  # an earlier batch of its partition failed again: keep the order
                    continue
                b.out_of_order = False
                before = len(self._failed)
                self._send(self._leaders[tp], [b])
                self._drain()
                if len(self._failed) > before:
                    blocked.add(tp)
                    if b.out_of_order:
                        # The oldest unacknowledged batch of its partition, refused as out of order: the
                        # broker lost this producer's sequence (its state expired); resending cannot help.
                        raise ProducerError(f"Produce to {b.topic}-{b.partition} sequence {b.base_sequence}",
                                            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
