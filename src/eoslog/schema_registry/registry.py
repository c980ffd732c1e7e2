"""One registry instance: the store (every instance reads ``_schemas``), the election (which instance
writes) and, while elected, the writer. The HTTP layer asks it to ``read`` or ``write``; a write on an
instance that is not the writer is forwarded by the HTTP layer to the writer's URL (``writer_url``).

Contract: writes are serialized by ``_write_lock`` and each is decide (under the store's lock) -> append
in one transaction -> wait until the reader applied it -> answer, so a decision always sees every earlier
write. Becoming the writer happens on a thread of its own (``init_transactions`` may wait for an earlier
writer's transaction to be aborted), and a write that arrives meanwhile waits for it, up to a deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from eoslog.schema_registry import errors
from eoslog.schema_registry.decisions import Outcome, SchemaRequest
from eoslog.schema_registry.election import DEFAULT_GROUP, Assignment, Identity, WriterElection
from eoslog.schema_registry.errors import RegistryError
from eoslog.schema_registry.formats import ParsedSchema, SchemaInvalid, parse
from eoslog.schema_registry.kafka_access import KafkaAccess
from eoslog.schema_registry.store import SchemaStore, Writer

log = logging.getLogger(__name__)

WRITER_WAIT_S = 30.0


class SchemaRegistry:
    def __init__(self, access: KafkaAccess, identity: Identity, *, group: str = DEFAULT_GROUP,
                 topic: str = "_schemas", session_timeout_ms: int = 10_000, default_compatibility: str = "BACKWARD",
                 replication_factor: int | None = None, metrics=None, min_insync_replicas: int | None = None) -> None:
        self.identity = identity
        self.group = group
        self.metrics = metrics
        self.store = SchemaStore(access, topic, replication_factor, default_compatibility, metrics,
                                 min_insync_replicas)
        self.election = WriterElection(access, identity, self._on_assignment, group, session_timeout_ms)
        self.transactional_id = f"eoslog-schema-registry-{group}"
        self.assignment: Assignment | None = None
        self._writer: Writer | None = None
        self._writer_changed = threading.Condition()
        self._write_lock = threading.Lock()
        self._round = 0
        self.started = False
        self._stopping = threading.Event()
        self.forward_ssl_context = None  # set by server.py when the instances speak HTTPS

    def start(self) -> None:
        self.store.ensure_topic()
        self.store.start()
        self.election.start()
        threading.Thread(target=self._warm_up, name="schema-registry-warm-up", daemon=True).start()
        self.started = True

    def _warm_up(self) -> None:
        if self.store.wait_ready(WRITER_WAIT_S * 10):
            started = time.monotonic()
            parsed = self.store.catalog.warm_up(self.store.lock, self._stopping)
            if parsed:
                log.info("schema registry: %d stored schema(s) parsed in %.1f s", parsed, time.monotonic() - started)

    def stop(self) -> None:
        self._stopping.set()
        if not self.started:
            return
        self.election.stop()
        with self._writer_changed:
            writer, self._writer = self._writer, None
            self._round += 1
        if writer is not None:
            writer.close()
        self.store.stop()

    # ---- who writes --------------------------------------------------------------------------------------

    def _on_assignment(self, assignment: Assignment | None) -> None:
        with self._writer_changed:
            self.assignment = assignment
            self._round += 1
            old, self._writer = self._writer, None
            self._writer_changed.notify_all()
            this_round = self._round
        if old is not None and not (assignment and assignment.me):
            old.close()
            log.info("schema registry: no longer the writer")
        if assignment is not None and assignment.me:
            if old is not None:
                with self._writer_changed:
                    self._writer = old
                    self._writer_changed.notify_all()
                return
            threading.Thread(target=self._become_writer, args=(this_round,), name="schema-registry-writer",
                             daemon=True).start()

    def _become_writer(self, this_round: int) -> None:
        if not self.store.wait_ready(WRITER_WAIT_S):
            log.warning("schema registry: elected, but %s is not read yet", self.store.topic)
        delay = 0.2
        while True:
            try:
                writer = Writer(self.store, self.transactional_id)
                break
            except Exception as exc:  # noqa: BLE001 - retried while this instance stays elected
                log.warning("schema registry: elected, but cannot write to %s yet: %s", self.store.topic, exc)
            with self._writer_changed:
                if self._round != this_round or self._writer_changed.wait_for(
                        lambda: self._round != this_round, delay):
                    return
            delay = min(delay * 2, 5.0)
        with self._writer_changed:
            if self._round != this_round:
                writer.close()
                return
            self._writer = writer
            self._writer_changed.notify_all()
        log.info("schema registry: this instance writes %s (%s)", self.store.topic, self.identity.url)

    def _replace_writer(self, writer: Writer) -> None:
        with self._writer_changed:
            if self._writer is not writer:
                return
            self._writer = None
            this_round = self._round
        writer.close()
        log.warning("schema registry: replacing the writer after a write it could not abort")
        threading.Thread(target=self._become_writer, args=(this_round,), name="schema-registry-writer",
                         daemon=True).start()

    @property
    def is_writer(self) -> bool:
        return self.assignment is not None and self.assignment.me

    def writer_url(self) -> str | None:
        assignment = self.assignment
        if assignment is None or assignment.writer is None:
            return None
        return assignment.writer.url

    # ---- requests ----------------------------------------------------------------------------------------

    def read(self, query: Callable):
        """``query(state, catalog)`` under the store's lock, once the topic has been read to its end."""
        self.require_ready()
        with self.store.lock:
            return query(self.store.state, self.store.catalog)

    def parse_request(self, body: object) -> tuple[SchemaRequest, ParsedSchema]:
        """A registration's schema parsed outside the store's lock (a Protobuf parse is a protoc run, which
        reads would otherwise wait for); its references resolved under it."""
        request = SchemaRequest.from_json(body)
        catalog = self.store.catalog
        with self.store.lock:
            dependencies = catalog.dependencies(request.references)
            key = catalog.candidate_key(request.schema_type, request.schema, request.references)
        try:
            parsed = parse(request.schema_type, request.schema, dependencies)
        except SchemaInvalid as exc:
            raise errors.invalid_schema(str(exc)) from None
        with self.store.lock:
            catalog.remember(key, parsed)  # for a lookup or compatibility check answered under the lock
        return request, parsed

    def require_ready(self) -> None:
        if not self.store.wait_ready(WRITER_WAIT_S):
            raise RegistryError(errors.STORE_ERROR, f"the registry has not read {self.store.topic} yet"
                                + (f": {self.store.failure}" if self.store.failure else ""))

    def write(self, decide: Callable[..., Outcome], prepare: Callable | None = None) -> tuple[object, int | None]:
        """``decide(state, catalog)`` and its records appended; returns the answer and the last record's
        offset (None when nothing was written). RegistryError UNKNOWN_LEADER when this is not the writer.
        With ``prepare``, its result is ``decide``'s third argument: work done before the store's lock is
        taken (parsing a schema), still in this instance's write order."""
        self.require_ready()
        with self._write_lock:
            writer = self._wait_for_writer()
            prepared = prepare() if prepare is not None else None
            with self.store.lock:
                state, catalog = self.store.state, self.store.catalog
                outcome = decide(state, catalog) if prepare is None else decide(state, catalog, prepared)
            if not outcome.records:
                return outcome.answer, None
            try:
                offset = writer.write(outcome.records)
            except RegistryError as exc:
                if exc.error_code == errors.UNKNOWN_LEADER:  # fenced: another instance writes now
                    with self._writer_changed:
                        if self._writer is writer:
                            self._writer = None
                elif writer.broken:  # still elected: a new producer fences this one and aborts what it left
                    self._replace_writer(writer)
                raise
            self.store.wait_for(offset)
            if outcome.parsed is not None:
                with self.store.lock:
                    self.store.catalog.seed(*outcome.parsed)
            if self.metrics is not None:
                self.metrics.records_written(len(outcome.records))
            return outcome.answer, offset

    def _wait_for_writer(self) -> Writer:
        with self._writer_changed:
            self._writer_changed.wait_for(lambda: self._writer is not None or not self.is_writer, WRITER_WAIT_S)
            if self._writer is None:
                if self.is_writer:
                    raise RegistryError(errors.UNKNOWN_LEADER, "this instance was elected writer and cannot write "
                                        f"to {self.store.topic} yet")
                raise RegistryError(errors.UNKNOWN_LEADER, "this instance is not the writer")
            return self._writer
