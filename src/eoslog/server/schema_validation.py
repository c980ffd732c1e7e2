"""Schema id validation on the broker (``confluent.value.schema.validation`` / ``.key.``): wiring only. The
check itself is schema_registry/validation.py; this gives it to the partitions of the topics that turn it
on, through ``PartitionRegistry.record_checks_for`` (a topic without it gets no check and pays nothing),
and decides which registry state it reads:

- a broker that serves the registry itself (``eoslog.schema.registry.listen``) reads its registry's
  in-process state: the registry answers a registration only once its own reader has applied it, so a
  producer that registers and then produces is never refused for an id the registry just gave it;
- any other broker reads ``_schemas`` itself (``eoslog.schema.validation.topic``), with the registry's
  own reader (schema_registry/store.py) as a client of one of its listeners, started when a topic first
  turns validation on. It is the topic, not the registry's URL, because reading it needs nothing but
  this cluster, sees every registry instance's writes in one order, and never asks anything on the
  produce path. Such a copy lags the registry by a fetch (about 50 ms): see docs/schema-registry.md.

Either copy can lag: a broker's own copy always does, and a broker that serves the registry does too on a
cluster when another instance is the writer. So an id refused as unknown is asked again once the copy has
read ``_schemas`` to its end (:class:`CatchUp`; api/produce.py holds the batch, and its connection,
meanwhile): a producer that registers and then produces at once is not refused.

Nothing of the registry is imported until a topic turns validation on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from eoslog.cluster.topic_configs import schema_validation_on

if TYPE_CHECKING:
    from eoslog.schema_registry.validation import RegistryView, TopicValidation

log = logging.getLogger(__name__)


class SchemaValidation:
    """Owns the broker's schema id validation: the checks per topic, and the registry state they read.
    Called on the broker's event loop."""

    def __init__(self, broker) -> None:
        self.broker = broker
        broker.registry.record_checks_for = self.checks_for
        self.view: RegistryView | None = None
        self._store = None  # this broker's own reader of _schemas, when it does not serve the registry
        self._unavailable: str | None = None
        self._checks: dict[TopicValidation, tuple] = {}

    def checks_for(self, topic: str, configs: dict[str, str]) -> tuple:
        """The RecordChecks of a topic's partitions (cluster/registry.py asks on every open and config change)."""
        if not schema_validation_on(configs):
            return ()
        from eoslog.schema_registry.validation import TopicValidation, record_check

        try:
            validation = TopicValidation.from_configs(topic, configs)
        except Exception as exc:  # noqa: BLE001 - a strategy ZooKeeper holds that this broker does not know
            reason = f"Topic {topic} has schema validation on with a setting this broker cannot use: {exc}"
            log.error("%s", reason)
            return (lambda _header, _record, _index: reason,)
        if validation is None:
            return ()
        if validation not in self._checks:
            view = self._ensure_view()
            if view is None:
                reason = f"Topic {topic} has schema validation on, but this broker reads no schema registry: {self._unavailable}"
                self._checks[validation] = (lambda _header, _record, _index: reason,)
            else:
                self._checks[validation] = (record_check(validation, view),)
        return self._checks[validation]

    def _ensure_view(self) -> RegistryView | None:
        from eoslog.schema_registry.validation import RegistryView

        if self.view is not None or self._unavailable is not None:
            return self.view
        endpoint = self.broker.schema_registry
        if endpoint is not None and endpoint.server is not None:
            store = endpoint.server.registry.store
        else:
            store = self._start_reader()
            if store is None:
                return None
        self.view = RegistryView(store.state, lambda: store.ready, CatchUp(store))
        return self.view

    def _start_reader(self):
        config = self.broker.config
        try:
            from eoslog.schema_registry.kafka_access import KafkaAccess
            from eoslog.schema_registry.store import SchemaStore
            from eoslog.server.console import connect_address
            from eoslog.server.schema_registry import registry_listener

            listener = registry_listener(self.broker.listeners, None)
            bootstrap = connect_address(listener, self.broker.bound_ports[listener.name])
            store = SchemaStore(KafkaAccess(bootstrap), config.schema_validation_topic)
            store.start()
        except ModuleNotFoundError as exc:
            self._unavailable = f"it needs {exc.name}: pip install 'eoslog[schema-registry]'"
            log.error("schema validation: %s", self._unavailable)
            return None
        except Exception as exc:  # noqa: BLE001 - e.g. no PLAINTEXT listener to read _schemas through
            self._unavailable = f"cannot read {config.schema_validation_topic}: {exc}"
            log.error("schema validation: %s", self._unavailable)
            return None
        log.info("schema validation reads %s through %s", config.schema_validation_topic, bootstrap)
        self._store = store
        return store

    async def stop(self) -> None:
        await asyncio.to_thread(self.close)  # joins a reader whose fetches this broker's loop answers

    def close(self) -> None:
        if self._store is not None:
            self._store.stop()
            self._store = None


CATCH_UP_TIMEOUT_S = 5.0


class CatchUp:
    """Waits, off the event loop, until a registry copy (a SchemaStore) has applied everything committed to
    ``_schemas`` before the wait began: the topic's end offset is asked (one ListOffsets), then the
    copy's reader is awaited past it. Refusals that arrive together share one round; one that arrives
    after a round asked for the end offset starts the next, since the registration it may be waiting
    for can be newer than that offset. A round ends at its deadline whatever happens: the refused batch
    is then checked again, and refused if the id is still unknown."""

    def __init__(self, store, timeout_s: float = CATCH_UP_TIMEOUT_S) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self._next: asyncio.Future | None = None  # the round that has not asked for the end offset yet
        self._tasks: set[asyncio.Task] = set()
        self.rounds = 0  # rounds begun, for tests and logs

    def __call__(self) -> asyncio.Future:
        if self._next is None:
            loop = asyncio.get_running_loop()
            self._next = loop.create_future()
            task = loop.create_task(self._round(self._next))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return self._next

    async def _round(self, done: asyncio.Future) -> None:
        self._next = None  # from here on, a refusal needs a round of its own
        self.rounds += 1
        try:
            await asyncio.wait_for(asyncio.to_thread(self.store.catch_up, self.timeout_s), self.timeout_s + 1)
        except Exception as exc:  # noqa: BLE001 - the batch is checked again either way
            log.warning("schema validation could not read %s to its end: %s", self.store.topic, exc)
        finally:
            if not done.done():
                done.set_result(None)
