"""The ``_schemas`` topic: the reader every instance runs, and the transactional writer the elected
instance holds.

Contract:
- ``SchemaStore.lock`` guards ``state`` and ``catalog``; the reader thread applies records under it, in
  the topic's order, and ``position`` is the offset after the last record applied.
- The reader reads committed records only (``isolation.level=read_committed``): a registration whose
  writer died before committing it is aborted by the next writer and never applied anywhere.
- ``Writer`` is this instance's transactional producer. All instances share one ``transactional.id``, so a
  new writer's ``init_transactions`` fences every earlier one (their next write fails) and aborts whatever
  transaction an earlier writer left open. Then it writes a NOOP and waits until the reader applied it:
  from then on the state holds every record any earlier writer committed, and no id is handed out twice.
  Each write is one transaction; the answer waits until the reader has applied it (prepare -> log -> apply).
"""

from __future__ import annotations

import logging
import threading
import time

from eoslog.schema_registry import errors
from eoslog.schema_registry.catalog import Catalog
from eoslog.schema_registry.errors import RegistryError
from eoslog.schema_registry.kafka_access import KafkaAccess
from eoslog.schema_registry.record_format import (
    Key,
    KeyType,
    RecordError,
    decode_key,
    decode_value,
    encode_key,
)
from eoslog.schema_registry.state import RegistryState

log = logging.getLogger(__name__)

TOPIC_CONFIGS = {"cleanup.policy": "compact"}
# A test fault, as the broker's eoslog.test.* properties: a writer stops for good just before (or just after)
# committing a write that names this subject, so a test can SIGKILL it there (test_writer_election.py).
# "before_commit:SUBJECT:MARKER" or "after_commit:SUBJECT:MARKER": only the first writer to create the file
# MARKER pauses, so the next writer completes the retried write.
TEST_PAUSE_ENV = "EOSLOG_SCHEMA_REGISTRY_TEST_PAUSE"
POLL_S = 0.1
_TOO_LARGE = frozenset({10, 18})  # MSG_SIZE_TOO_LARGE (broker and librdkafka alike), RECORD_LIST_TOO_LARGE
DEFAULT_TIMEOUT_S = 30.0


class SchemaStore:
    def __init__(self, access: KafkaAccess, topic: str = "_schemas", replication_factor: int | None = None,
                 default_compatibility: str = "BACKWARD", metrics=None, min_insync_replicas: int | None = None) -> None:
        self.access = access
        self.topic = topic
        self.replication_factor = replication_factor
        self.min_insync_replicas = min_insync_replicas
        self.lock = threading.RLock()
        self.applied = threading.Condition(self.lock)
        self.state = RegistryState(default_compatibility)
        self.catalog = Catalog(self.state)
        self.position = 0       # the offset after the last record applied
        self.ready = False      # the reader reached the end of the topic once
        self.failure: str | None = None
        self.metrics = metrics
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._admin = None  # for end_offset, made on first use

    # ---- the topic -------------------------------------------------------------------------------------

    def ensure_topic(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Creates the compacted single-partition topic unless it exists: with ``replication_factor``
        replicas (retried until that many brokers are up), or when none is given as many as there are
        brokers, up to three."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(self.access.librdkafka())
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                metadata = admin.list_topics(timeout=max(1.0, deadline - time.monotonic()))
                if self.topic in metadata.topics and not metadata.topics[self.topic].error:
                    return
                replicas = self.replication_factor or min(3, len(metadata.brokers))
                configs = dict(TOPIC_CONFIGS)
                if self.min_insync_replicas is not None:
                    configs["min.insync.replicas"] = str(self.min_insync_replicas)
                future = admin.create_topics([NewTopic(self.topic, 1, replicas, config=configs)])[self.topic]
                future.result(max(1.0, deadline - time.monotonic()))
                log.info("created %s (compacted, %d replica(s))", self.topic, replicas)
                return
            except KafkaException as exc:
                code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    return
                if time.monotonic() >= deadline:
                    raise RegistryError(errors.STORE_ERROR, f"cannot create {self.topic}: {exc}") from None
                time.sleep(0.2)

    # ---- reading ---------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._read, name="schema-registry-reader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _read(self) -> None:
        import uuid

        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        consumer = Consumer(self.access.librdkafka(**{
            "group.id": f"eoslog-schema-registry-reader-{uuid.uuid4()}",  # never joined: partitions are assigned
            "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
            "fetch.wait.max.ms": 50, "auto.offset.reset": "earliest"}))
        consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        try:
            while not self._stop.is_set():
                # poll waits for the first record only; consume(n, timeout) would wait for n or the timeout
                first = consumer.poll(POLL_S)
                if first is None:
                    continue
                messages = [first, *consumer.consume(499, 0)]
                with self.lock:
                    for message in messages:
                        error = message.error()
                        if error is not None:
                            if error.code() == KafkaError._PARTITION_EOF:
                                self.position = max(self.position, message.offset())
                                if not self.ready:
                                    log.info("%s read to its end: %d record(s) applied", self.topic,
                                             self.state.records_applied)
                                self.ready = True
                            else:
                                log.warning("reading %s: %s", self.topic, error)
                            continue
                        self._apply(message.key(), message.value(), message.offset())
                        self.position = message.offset() + 1
                    self.applied.notify_all()
        except Exception as exc:  # a dead reader makes the registry unready, loudly
            log.exception("the %s reader stopped", self.topic)
            with self.lock:
                self.failure = str(exc)
                self.applied.notify_all()
        finally:
            consumer.close()

    def _apply(self, key_bytes: bytes | None, value_bytes: bytes | None, offset: int) -> None:
        try:
            if key_bytes is None:
                raise RecordError("a record without a key")
            key = decode_key(key_bytes)
            if key is None:
                return
            had = set(self.state.contents)
            self.state.apply(key, decode_value(value_bytes))
            for gone in had - set(self.state.contents):
                self.catalog.forget(gone)
        except RecordError as exc:
            self.state.records_skipped += 1
            log.warning("%s offset %d skipped: %s", self.topic, offset, exc)

    def wait_for(self, offset: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Until the record at ``offset`` is applied here. Called with the lock held or not."""
        with self.lock:
            if not self.applied.wait_for(lambda: self.position > offset or self.failure is not None, timeout_s):
                raise RegistryError(errors.OPERATION_TIMEOUT, f"the {self.topic} reader did not reach offset "
                                    f"{offset} within {timeout_s:.0f} s")
            if self.failure is not None and self.position <= offset:
                raise RegistryError(errors.STORE_ERROR, f"the {self.topic} reader failed: {self.failure}")

    def end_offset(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
        """The topic's last stable offset now, as the reader's ``read_committed`` sees its end: a ListOffsets
        to the partition's leader. Blocks: called from a thread, never the broker's event loop."""
        from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        with self.lock:
            if self._admin is None:
                self._admin = AdminClient(self.access.librdkafka())
            admin = self._admin
        partition = TopicPartition(self.topic, 0)
        try:
            futures = admin.list_offsets({partition: OffsetSpec.latest()},
                                         isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout_s)
            return futures[partition].result(timeout_s).offset
        except (KafkaException, TimeoutError) as exc:
            raise RegistryError(errors.STORE_ERROR, f"cannot read the end offset of {self.topic}: {exc}") from None

    def catch_up(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Until this copy has applied everything committed to the topic before the call: what a broker's
        copy waits for before it refuses a schema id it does not know (docs/schema-registry.md). Blocks."""
        deadline = time.monotonic() + timeout_s
        end = self.end_offset(timeout_s)
        if end > 0:
            self.wait_for(end - 1, max(0.0, deadline - time.monotonic()))

    def wait_ready(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
        with self.lock:
            return self.applied.wait_for(lambda: self.ready or self.failure is not None, timeout_s) and self.ready


class Writer:
    """This instance's transactional producer, for as long as it is the elected writer."""

    def __init__(self, store: SchemaStore, transactional_id: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        from confluent_kafka import Producer

        self.store = store
        self.timeout_s = timeout_s
        self.broken = False  # a failed write could not be aborted: the producer's state is unknown
        self.producer = Producer(store.access.librdkafka(**{
            "transactional.id": transactional_id, "enable.idempotence": True, "acks": "all",
            "transaction.timeout.ms": 60_000, "linger.ms": 0}))
        try:
            self.producer.init_transactions(timeout_s)  # fences every earlier writer, aborts what it left open
            offset = self.write([(encode_key(Key(KeyType.NOOP)), None)])
        except BaseException:
            self.close()
            raise
        store.wait_for(offset, timeout_s)

    def write(self, records: list[tuple[bytes, bytes | None]]) -> int:
        """Appends ``records`` in one transaction; returns the last one's offset once committed. The state
        changes when the reader applies them (``SchemaStore.wait_for``)."""
        from confluent_kafka import KafkaError, KafkaException

        offsets: list[int] = []
        failures: list = []

        def delivered(error, message) -> None:
            if error is not None:
                failures.append(error)
            else:
                offsets.append(message.offset())

        try:
            self.producer.begin_transaction()
            try:
                for key, value in records:
                    self.producer.produce(self.store.topic, key=key, value=value, partition=0, on_delivery=delivered)
                self.producer.flush(self.timeout_s)
                if any(f.code() in _TOO_LARGE for f in failures):
                    raise RegistryError(errors.INVALID_SCHEMA, f"Invalid schema: too large for {self.store.topic} "
                                        f"(its max.message.bytes): {failures[0]}")
                if failures or len(offsets) != len(records):
                    raise RegistryError(errors.STORE_ERROR, f"writing to {self.store.topic}: "
                                        f"{'; '.join(map(str, failures)) or 'not delivered in time'}")
                self._test_pause("before_commit", records)
                self.producer.commit_transaction(self.timeout_s)
            except BaseException:
                # aborted before anything else is written: a transaction left open would refuse every later
                # write (the producer stays InTransaction). If it cannot be aborted, this writer is replaced.
                self._abort()
                raise
            self._test_pause("after_commit", records)
        except KafkaException as exc:
            if exc.args and isinstance(exc.args[0], KafkaError) and exc.args[0].code() in _TOO_LARGE:
                raise RegistryError(errors.INVALID_SCHEMA, f"Invalid schema: too large for {self.store.topic} "
                                    f"(its max.message.bytes): {exc.args[0]}") from None
            error = exc.args[0] if exc.args else None
            fenced = error is not None and (error.fatal() or "fenced" in str(error).lower())
            raise RegistryError(errors.UNKNOWN_LEADER if fenced else errors.STORE_ERROR,
                                f"writing to {self.store.topic}: {error or exc}") from None
        return max(offsets)

    def _abort(self) -> None:
        from confluent_kafka import KafkaException

        try:
            self.producer.abort_transaction(self.timeout_s)
        except KafkaException as exc:  # fenced, or a commit still in flight: SchemaRegistry replaces this writer
            self.broken = True
            log.warning("aborting a failed write to %s: %s", self.store.topic, exc)

    def close(self) -> None:
        self.producer.flush(1.0)

    @staticmethod
    def _test_pause(where: str, records: list[tuple[bytes, bytes | None]]) -> None:
        import os

        point, _, rest = os.environ.get(TEST_PAUSE_ENV, "").partition(":")
        subject, _, marker = rest.partition(":")
        if point == where and any(f'"subject":"{subject}"'.encode() in key for key, _ in records):
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
            except OSError:
                return
            log.warning("test fault: writer paused %s the write of subject %s", where.replace("_", " "), subject)
            threading.Event().wait()
