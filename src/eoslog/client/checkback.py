"""Local transactions with check-back: "send these records if and only if my database transaction
commits" (eoslog's extension; docs/transactions.md, "Check-back transactions", "The Python client").

    producer = CheckBackProducer("127.0.0.1:9092", "orders-app", resolver=resolve)
    with producer.local_transaction() as txn:
        txn.send("orders", b"order 42")          # written (acks=all) but invisible to read_committed
        with db:                                  # the business row and txn.id in ONE local transaction
            db.execute("INSERT INTO orders VALUES (42, ?)", (txn.id,))
    # leaving the block commits the Kafka transaction; an exception aborts it

If the process dies between the database commit and the Kafka commit, the broker does not abort the
transaction when its timeout passes: it asks the producer group ``check_back_group`` instead. Every live
:class:`CheckBackProducer` of the group long-polls for such checks in a background thread and answers
``resolver(txn_id)``: ``"commit"``, ``"rollback"`` or ``"unknown"`` (asked again later; an exception in the
resolver counts as unknown). ``txn_id`` is the ``txn.id`` the transaction was stored under.

Each local transaction starts with InitProducerId, so its (producer id, epoch) -- and with it ``txn.id`` --
names exactly that transaction: a stale answer or a zombie can never decide a later one. For the same reason
every producer instance needs a transactional id of its own (the default is the group plus a random
suffix): a second instance with the same id would fence the first one's open transactions.

Built on eoslog's own producer (``client/producer.py``, which the Spark sink's native writer uses too). On a cluster each broker hands out
the checks of the transactions it coordinates, so the background thread polls every broker (one poller
thread each, the broker list refreshed from Metadata), and answers go to each transactional id's coordinator.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import Self

from eoslog.client.connection import BrokerConnection
from eoslog.client.producer import Batch, Producer, ProducerError
from eoslog.client.txn_groups import CLIENT_ID, METADATA, METADATA_VERSION, TxnGroupClient
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.records.murmur2 import partition_for_key

__all__ = ["COMMIT", "ROLLBACK", "UNKNOWN", "CheckBackProducer", "LocalTransaction", "ProducerError"]

log = logging.getLogger(__name__)

BROKER_REFRESH_S = 10.0  # how often the poller looks for brokers added to the cluster
COMMIT, ROLLBACK, UNKNOWN = "commit", "rollback", "unknown"
_ANSWERS = {COMMIT: 0, ROLLBACK: 1, UNKNOWN: 2}
BEGIN_CHECK_BACK, POLL_CHECK_BACK, ANSWER_CHECK_BACK = 0x7E10, 0x7E11, 0x7E12
INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION = 22, 4  # v3+: the current identity asks for its own bump
END_TXN, END_TXN_VERSION = 26, 3

Resolver = Callable[[str], str]


def txn_id_of(transactional_id: str, producer_id: int, producer_epoch: int) -> str:
    return f"{transactional_id}:{producer_id}:{producer_epoch}"


class _Producer(Producer):
    """Producer plus plain records and the calls that begin and end a transaction."""

    def init_transaction(self) -> None:
        """InitProducerId with the current identity (KIP-360): a fresh epoch for every transaction."""
        request = messages.InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch)
        response = self._coordinator_call(INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSION, request,
                                          lambda r: r.error_code, "InitProducerId")
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self._added.clear()
        self._sequences.clear()  # sequences restart at 0 with every epoch

    def begin_check_back(self, group: str) -> None:
        self._coordinator_call(BEGIN_CHECK_BACK, 0, messages.BeginCheckBackRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, check_back_group=group), lambda r: r.error_code, "BeginCheckBack")

    def end_transaction(self, commit: bool) -> None:
        self._coordinator_call(END_TXN, END_TXN_VERSION, messages.EndTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, committed=commit), lambda r: r.error_code, "EndTxn")

    def send_records(self, topic: str, partition: int, records: list[SimpleRecord]) -> None:
        """One batch of ``records`` to ``topic``-``partition`` in the open transaction (not yet acknowledged)."""
        count = self._partition_count(topic)
        if not 0 <= partition < count:
            raise ProducerError(f"partition {partition} of {topic}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        self._add_partitions([(topic, partition)])
        tp = (topic, partition)
        sequence = self._sequences.get(tp, 0)
        self._sequences[tp] = (sequence + len(records)) & 0x7FFFFFFF
        data = build_batch(records, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           base_sequence=sequence, is_transactional=True)
        self._send(self._leaders[tp], [Batch(topic, partition, sequence, len(records), data)])


class LocalTransaction:
    """The Kafka side of one local transaction. ``id`` is what to store with the business row."""

    def __init__(self, producer: _Producer) -> None:
        self._producer = producer
        self.id = txn_id_of(producer.transactional_id, producer.producer_id, producer.producer_epoch)

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None,
             *, wait: bool = True) -> None:
        """Writes one record into the transaction. ``wait`` (the default) returns only once it is
        acknowledged by every in-sync replica: commit the database only after that, or a crash could
        leave a committed row whose record never reached the broker."""
        if partition is None:
            partition = self._partition_of(topic, key)
        self._producer.send_records(topic, partition, [SimpleRecord(key, value)])
        if wait:
            self.flush()

    def flush(self) -> None:
        """Waits until every record sent is acknowledged (acks=all)."""
        self._producer.flush()

    def _partition_of(self, topic: str, key: bytes | None) -> int:
        if key is None:
            return 0
        return partition_for_key(key, self._producer._partition_count(topic))  # Kafka's default partitioner


class CheckBackProducer:
    """A transactional producer whose transactions are resolved by ``check_back_group`` when it cannot
    end them itself. Not thread-safe (one local transaction at a time); the checks are answered by background
    threads (one per broker), so ``resolver`` may run on several threads at once and must open its own
    database connection per call, as the example's does."""

    def __init__(self, bootstrap: str, check_back_group: str, *, resolver: Resolver | None = None,
                 transactional_id: str | None = None, transaction_timeout_ms: int = 60_000,
                 poll_wait_ms: int = 1_000, security=None, timeout_s: float = 60.0) -> None:
        self.bootstrap = bootstrap
        self.check_back_group = check_back_group
        self.transactional_id = transactional_id or f"{check_back_group}.{uuid.uuid4().hex[:12]}"
        self.poll_wait_ms = poll_wait_ms
        self.security = security
        self.timeout_s = timeout_s
        self._producer = _Producer(bootstrap, self.transactional_id, transaction_timeout_ms=transaction_timeout_ms,
                                   security=security, timeout_s=timeout_s)
        self._resolver = resolver
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        # (txn_id, answer, error code) of the latest answers, for tools and tests; bounded for long-lived producers
        self.answered: deque[tuple[str, str, int]] = deque(maxlen=1000)
        # The txn id whose EndTxn(commit) failed: left to the group's check-back. This instance must not
        # open another one, because its InitProducerId would fence (abort) that transaction while the
        # database may already hold its row.
        self._left_to_check_back: str | None = None
        if resolver is not None:
            self._start_poller()

    # ---- the local transaction -------------------------------------------------------------------------

    @contextlib.contextmanager
    def local_transaction(self, check: Resolver | None = None) -> Iterator[LocalTransaction]:
        """Opens a check-back transaction; commits it when the block ends, aborts it on an exception.
        ``check`` replaces the group resolver this instance answers with."""
        if self._left_to_check_back is not None:
            raise RuntimeError(f"{self._left_to_check_back} could not be committed and is left to check-back; "
                               f"use a new CheckBackProducer (its own transactional id) for new transactions")
        if check is not None:
            self._resolver = check
            self._start_poller()
        self._producer.init_transaction()
        self._producer.begin_check_back(self.check_back_group)
        txn = LocalTransaction(self._producer)
        try:
            yield txn
            txn.flush()
        except BaseException:
            try:
                self._producer.end_transaction(commit=False)
            except Exception as exc:  # noqa: BLE001 - the original error matters more; the broker aborts anyway
                log.warning("could not abort %s: %s", txn.id, exc)
            raise
        try:
            self._producer.end_transaction(commit=True)
        except BaseException:
            self._left_to_check_back = txn.id
            raise

    # ---- answering checks ------------------------------------------------------------------------------

    def _start_poller(self) -> None:
        if self._poller is None:
            self._poller = threading.Thread(target=self._poll_loop, name=f"check-back-{self.transactional_id}",
                                            daemon=True)
            self._poller.start()

    def _poll_loop(self) -> None:
        """Keeps one poller thread per broker of the cluster (one, on a single node)."""
        pollers: dict[tuple[str, int], threading.Thread] = {}
        while not self._stop.is_set():
            try:
                addresses = self._broker_addresses()
            except Exception as exc:  # noqa: BLE001 - the bootstrap may be restarting: try again soon
                log.warning("check-back: no broker list from %s: %s", self.bootstrap, exc)
                self._stop.wait(0.5)
                continue
            for address in addresses:
                poller = pollers.get(address)
                if poller is None or not poller.is_alive():
                    pollers[address] = threading.Thread(target=self._poll_broker, args=(address,), daemon=True,
                                                        name=f"check-back-{self.transactional_id}-{address[1]}")
                    pollers[address].start()
            self._stop.wait(BROKER_REFRESH_S)
        for poller in pollers.values():
            poller.join(self.poll_wait_ms / 1000 + 5)

    def _broker_addresses(self) -> list[tuple[str, int]]:
        with TxnGroupClient(self.bootstrap, self.timeout_s, security=self.security) as client:
            conn = client._bootstrap_connection()
            try:
                response = conn.request(METADATA, METADATA_VERSION, messages.MetadataRequest(
                    topics=[], allow_auto_topic_creation=False))
            finally:
                conn.close()
        return sorted((b.host, b.port) for b in response.brokers)

    def _poll_broker(self, address: tuple[str, int]) -> None:
        """Long-polls one broker; gives up after a few failures in a row (the loop above starts it again
        while Metadata still lists the broker)."""
        conn = None
        failures = 0
        try:
            while not self._stop.is_set() and failures < 3:
                try:
                    if conn is None:
                        timeout_s = min(self.timeout_s, 30.0) + self.poll_wait_ms / 1000
                        conn = BrokerConnection(*address, client_id=CLIENT_ID, timeout_s=timeout_s,
                                                security=self.security)
                    response = conn.request(POLL_CHECK_BACK, 0, messages.PollCheckBackRequest(
                        check_back_group=self.check_back_group, member_id=self.transactional_id,
                        max_wait_ms=self.poll_wait_ms, max_checks=16))
                    if response.error_code:
                        raise ProducerError("PollCheckBack", response.error_code)
                    failures = 0
                    for check in response.checks:
                        if self._stop.is_set():
                            return
                        self._answer(check)
                except Exception as exc:  # noqa: BLE001 - keep polling: the broker asks again
                    if conn is not None:
                        conn.close()
                        conn = None
                    if self._stop.is_set():
                        return
                    failures += 1
                    log.warning("check-back poll of %r at %s:%d failed: %s", self.check_back_group, *address, exc)
                    self._stop.wait(0.5)
        finally:
            if conn is not None:
                conn.close()

    def _answer(self, check) -> None:
        txn_id = txn_id_of(check.transactional_id, check.producer_id, check.producer_epoch)
        try:
            answer = self._resolver(txn_id) if self._resolver is not None else UNKNOWN
            if answer not in _ANSWERS:
                raise ValueError(f"resolver answered {answer!r}")
        except Exception as exc:  # noqa: BLE001 - "unknown": the broker asks again after its back-off
            log.warning("check-back resolver failed for %s: %s", txn_id, exc)
            answer = UNKNOWN
        with TxnGroupClient(self.bootstrap, self.timeout_s, security=self.security) as client:
            response = client._call(check.transactional_id, ANSWER_CHECK_BACK, messages.AnswerCheckBackRequest(
                transactional_id=check.transactional_id, producer_id=check.producer_id,
                producer_epoch=check.producer_epoch, check_number=check.check_number, answer=_ANSWERS[answer]),
                lambda r: r.error_code)
        self.answered.append((txn_id, answer, response.error_code))
        if response.error_code:
            # PRODUCER_FENCED / INVALID_TXN_STATE: someone else decided first; nothing to do.
            log.info("check-back answer %s for %s: %s", answer, txn_id, ErrorCode(response.error_code).name)

    def close(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(self.poll_wait_ms / 1000 + 5)
        self._producer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
