"""Acknowledging share-group records inside a transaction (issue 37 step 6; docs/share-groups.md, "Step 6"):
a transactional producer whose transaction may also acknowledge records a share consumer acquired, so its
output and those acknowledgements commit or abort together. A work-queue worker's loop is::

    with ShareTxnProducer(bootstrap, "worker-1") as producer:
        while True:
            records = consumer.poll(1.0)                    # a ShareConsumer, explicit acknowledgement
            for record in records:
                producer.send("results", handle(record.value()))
            producer.acknowledge("workers", [(r.topic(), r.partition(), r.offset(), ACCEPT, r.delivery_count())
                                             for r in records])
            producer.commit()                               # or abort(): the records come back

:meth:`ShareTxnProducer.acknowledge` is the one call: it registers each new share partition with the
transaction (AddSharePartitionsToTxn, at the transaction coordinator) and then sends ShareAcknowledgeTxn to
each partition's leader. The member is not named (librdkafka's ShareConsumer does not tell its member id):
the leader takes the records from whichever one member holds them under a live lock, at the delivery count
given (a record handed out again since, to anyone, is refused). The consumer must not acknowledge those
records itself.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Self

from eoslog.client.checkback import END_TXN, END_TXN_VERSION, _Producer
from eoslog.client.connection import BrokerConnection
from eoslog.client.producer import ProducerError
from eoslog.client.txn_groups import CLIENT_ID
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import SimpleRecord
from eoslog.records.murmur2 import partition_for_key

ADD_SHARE_PARTITIONS_TO_TXN, SHARE_ACKNOWLEDGE_TXN = 0x7E20, 0x7E21
METADATA, METADATA_TOPIC_IDS_VERSION = 3, 12
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
_RETRY = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_ENOUGH_REPLICAS,
                    ErrorCode.REQUEST_TIMED_OUT})
_BACKOFF_S = (0.02, 0.5)
_ZERO = uuid.UUID(int=0)


class ShareAcknowledgeError(ProducerError):
    """The broker refused a transactional acknowledgement for good (fenced, records not held, ...)."""


class ShareTxnProducer:
    """A transactional producer (eoslog's own, client/producer.py) with share acknowledgements. Not
    thread-safe. A transaction begins with the first send or acknowledgement after :meth:`init` or the
    previous commit or abort."""

    def __init__(self, bootstrap: str, transactional_id: str, *, transaction_timeout_ms: int = 60_000,
                 timeout_s: float = 60.0, security=None) -> None:
        self._producer = _Producer(bootstrap, transactional_id, transaction_timeout_ms=transaction_timeout_ms,
                                   timeout_s=timeout_s, security=security)
        self.timeout_s = timeout_s
        self._registered: set[tuple[str, uuid.UUID, int]] = set()
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._leaders: dict[tuple[str, int], tuple[str, int]] = {}
        self._connections: dict[tuple[str, int], BrokerConnection] = {}

    @property
    def producer_id(self) -> int:
        return self._producer.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer.producer_epoch

    def init(self) -> None:
        """InitProducerId: fences an earlier holder of the transactional id (its open transaction aborts)."""
        self._producer.init()

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None) -> None:
        if partition is None:
            partition = 0 if key is None else partition_for_key(key, self._producer._partition_count(topic))
        self._producer.send_records(topic, partition, [SimpleRecord(key, value)])

    def send_batch(self, topic: str, partition: int, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        """(key, value) records to one partition as one batch: one Produce for them all, where :meth:`send`
        costs one each (a worker's outputs for one poll's records, written before their locks run out)."""
        batch = [SimpleRecord(key, value) for key, value in records]
        if batch:
            self._producer.send_records(topic, partition, batch)

    def acknowledge(self, group_id: str, acknowledgements: Iterable[tuple], member_id: str | None = None) -> None:
        """Acknowledges (topic, partition, offset, type[, delivery count]) records of ``group_id`` inside the
        open transaction (type ACCEPT, RELEASE, REJECT or GAP). The delivery count is the one the record
        came with (confluent-kafka's ``Message.delivery_count()``): with it the leader refuses a record
        handed out again since (this consumer's lock ran out), which it cannot tell otherwise when
        ``member_id`` is None. Raises ShareAcknowledgeError when a partition refuses."""
        ranges: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
        for topic, partition, offset, ack_type, *rest in sorted(acknowledgements):
            count = rest[0] if rest and rest[0] is not None else -1
            runs = ranges.setdefault((topic, partition), [])
            if runs and runs[-1][1] + 1 == offset and runs[-1][2:] == (ack_type, count):
                runs[-1] = (runs[-1][0], offset, ack_type, count)
            else:
                runs.append((offset, offset, ack_type, count))
        if not ranges:
            return
        self._lookup({topic for topic, _ in ranges})
        self._register(group_id, list(ranges))
        pending = dict(ranges)
        deadline = time.monotonic() + self.timeout_s
        delay = _BACKOFF_S[0]
        while pending:
            by_leader: dict[tuple[str, int], list[tuple[str, int]]] = {}
            for tp in pending:
                by_leader.setdefault(self._leaders[tp], []).append(tp)
            retry: dict[tuple[str, int], ErrorCode] = {}
            for address, tps in by_leader.items():
                for tp, code, message in self._send_acknowledgements(address, group_id, member_id, tps, pending):
                    if code is ErrorCode.NONE:
                        del pending[tp]
                    elif code in _RETRY:
                        retry[tp] = code
                    else:
                        raise ShareAcknowledgeError(
                            f"ShareAcknowledgeTxn of {tp[0]}-{tp[1]} for {group_id!r}: {message or ''}", int(code))
            if not pending:
                return
            if time.monotonic() + delay > deadline:
                raise TimeoutError(f"ShareAcknowledgeTxn for {group_id!r} did not succeed within {self.timeout_s} s:"
                                   f" {retry}")
            time.sleep(delay)
            delay = min(delay * 2, _BACKOFF_S[1])
            self._lookup({topic for topic, _ in pending}, refresh=True)

    def commit(self) -> None:
        """Waits for every record sent, then commits: the output and the acknowledgements together."""
        self._producer.flush()
        self._end(True)

    def abort(self) -> None:
        """Aborts: the output is never read (read_committed) and the acknowledged records come back."""
        self._producer.flush()
        self._end(False)

    def close(self) -> None:
        self._producer.close()
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def __enter__(self) -> Self:
        self.init()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- the calls -----------------------------------------------------------------------------------

    def _end(self, commit: bool) -> None:
        producer = self._producer
        producer._coordinator_call(END_TXN, END_TXN_VERSION, messages.EndTxnRequest(
            transactional_id=producer.transactional_id, producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch, committed=commit), lambda r: r.error_code, "EndTxn")
        producer._added.clear()  # the next transaction registers its partitions again
        self._registered.clear()

    def _register(self, group_id: str, tps: list[tuple[str, int]]) -> None:
        new = sorted({(group_id, self._topic_ids[t], p) for t, p in tps} - self._registered)
        if not new:
            return
        producer = self._producer
        by_topic: dict[uuid.UUID, list[int]] = {}
        for _, topic_id, partition in new:
            by_topic.setdefault(topic_id, []).append(partition)
        Request = messages.AddSharePartitionsToTxnRequest
        request = Request(transactional_id=producer.transactional_id, producer_id=producer.producer_id,
                          producer_epoch=producer.producer_epoch, group_id=group_id,
                          topics=[Request.SharePartitionsTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()])
        producer._coordinator_call(ADD_SHARE_PARTITIONS_TO_TXN, 0, request, lambda r: r.error_code,
                                   "AddSharePartitionsToTxn")
        self._registered.update(new)

    def _send_acknowledgements(self, address, group_id, member_id, tps, ranges):
        producer = self._producer
        Request = messages.ShareAcknowledgeTxnRequest
        topics: dict[uuid.UUID, list] = {}
        for topic, partition in tps:
            topics.setdefault(self._topic_ids[topic], []).append(Request.AcknowledgePartition(
                partition_index=partition, acknowledgement_batches=[
                    Request.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=[t],
                                                 delivery_count=count)
                    for f, la, t, count in ranges[(topic, partition)]]))
        request = Request(group_id=group_id, member_id=member_id, transactional_id=producer.transactional_id,
                          producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
                          transaction_timeout_ms=producer.transaction_timeout_ms,
                          topics=[Request.AcknowledgeTopic(topic_id=t, partitions=ps) for t, ps in topics.items()])
        names = {topic_id: name for name, topic_id in self._topic_ids.items()}
        try:
            response = self._connection(address).request(SHARE_ACKNOWLEDGE_TXN, 0, request)
        except (OSError, ConnectionError):
            self._drop(address)
            return [(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER, "connection lost") for tp in tps]
        if response.error_code:
            return [(tp, ErrorCode(response.error_code), response.error_message) for tp in tps]
        return [((names[t.topic_id], p.partition_index), ErrorCode(p.error_code), p.error_message)
                for t in response.responses for p in t.partitions]

    def _lookup(self, topics: set[str], refresh: bool = False) -> None:
        """Topic ids and partition leaders (Metadata v12, which names topic ids)."""
        if not refresh and all(t in self._topic_ids for t in topics):
            return
        conn = self._producer._coordinator._bootstrap_connection()
        try:
            Topic = messages.MetadataRequest.MetadataRequestTopic
            response = conn.request(METADATA, METADATA_TOPIC_IDS_VERSION, messages.MetadataRequest(
                topics=[Topic(topic_id=_ZERO, name=t) for t in sorted(topics)], allow_auto_topic_creation=False,
                include_topic_authorized_operations=False))
        finally:
            conn.close()
        nodes = {b.node_id: (b.host, b.port) for b in response.brokers}
        for topic in response.topics:
            if topic.error_code:
                continue
            self._topic_ids[topic.name] = topic.topic_id
            for p in topic.partitions:
                if p.leader_id in nodes:
                    self._leaders[(topic.name, p.partition_index)] = nodes[p.leader_id]
        missing = topics - set(self._topic_ids)
        if missing:
            raise ShareAcknowledgeError(f"no metadata for {sorted(missing)}", int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))

    def _connection(self, address: tuple[str, int]) -> BrokerConnection:
        conn = self._connections.get(address)
        if conn is None:
            conn = self._connections[address] = BrokerConnection(
                address[0], address[1], client_id=CLIENT_ID, timeout_s=min(self.timeout_s, 30.0),
                security=self._producer.security)
        return conn

    def _drop(self, address: tuple[str, int]) -> None:
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.close()
