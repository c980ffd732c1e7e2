"""Schema id validation on a broker that does not serve the registry itself: the registry runs in front of it
(conftest.py, as ``eoslog schema-registry --bootstrap`` would), and the broker reads ``_schemas`` with a
reader of its own, started when a topic first turns validation on (server/schema_validation.py)."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from test_broker_validation import PAYMENT, deliveries, produce_raw, wire

from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop


def test_the_broker_reads_schemas_itself_and_follows_registrations_and_deletes(broker, registry):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"read-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1, config={"confluent.value.schema.validation": "true"})])[topic].result(30)
    assert broker.broker.schema_registry is None  # not served here: validation reads _schemas itself
    client = SchemaRegistryClient({"url": registry.url})
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(PAYMENT), "AVRO"))
    view = broker.broker.schema_validation.view
    # the broker's copy follows the topic a fetch behind the registry (docs/schema-registry.md)
    wait_until(lambda: schema_id in view.ids(f"{topic}-value") and view.loaded(), 30,
               "the broker read the registration, and _schemas to its end")
    assert deliveries(broker.bootstrap, topic, [(b"k", wire(schema_id)), (b"k", None)]) == ["delivered"] * 2
    refused = produce_raw(broker.bootstrap, topic, [(b"k", wire(schema_id + 1000))])
    assert [e.batch_index_error_message for e in refused.record_errors] == [
        (f"Schema id {schema_id + 1000} of the record's value is not valid for topic {topic}: it is not "
         f"registered under subject {topic}-value (TopicNameStrategy)")]
    # a soft delete reaches the broker through _schemas too: the id is refused from then on
    client.delete_subject(f"{topic}-value")
    wait_until(lambda: schema_id not in view.ids(f"{topic}-value"), 30, "the broker read the delete")
    assert deliveries(broker.bootstrap, topic, [(b"k", wire(schema_id))]) == ["INVALID_RECORD"]


def test_a_just_registered_id_is_accepted_at_once_and_an_unknown_one_refused_as_before(broker, registry):
    """The broker's copy of _schemas can lag the registry (by a fetch; here, on purpose, by as long as the
    test holds that copy's lock, so its reader applies nothing): a refusal of an id the copy does not know
    waits until the copy has read the topic to its end, then checks again (server/schema_validation.py
    CatchUp, api/produce.py). So registering and producing at once is accepted, every time."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"at-once-{uuid.uuid4().hex[:8]}"
    plain = f"plain-{topic}"
    created = admin.create_topics([NewTopic(topic, 1, 1, config={"confluent.value.schema.validation": "true"}),
                                   NewTopic(plain, 1, 1)])
    for future in created.values():
        future.result(30)
    client = SchemaRegistryClient({"url": registry.url})
    subject = f"{topic}-value"
    fields = list(PAYMENT["fields"])

    def register_next(round_: int) -> int:
        fields.append({"name": f"note{round_}", "type": ["null", "string"], "default": None})
        return client.register_schema(subject, Schema(json.dumps({**PAYMENT, "fields": fields}), "AVRO"))

    wait_until(lambda: broker.broker.schema_validation.view is not None, 30, "the broker reads _schemas")
    validation = broker.broker.schema_validation
    view, store = validation.view, validation._store
    with ThreadPoolExecutor(1) as pool:
        for round_ in range(5):
            rounds = view.catch_up.rounds
            with store.lock:  # the broker's copy applies nothing: it lags the registry
                schema_id = register_next(round_)
                assert schema_id not in view.ids(subject)
                produced = pool.submit(produce_raw, broker.bootstrap, topic, [(b"k", wire(schema_id))])
                wait_until(lambda r=rounds, p=produced: view.catch_up.rounds > r or p.done(), 30,
                           "the refused batch waits for the copy")
                assert not produced.done(), produced.result().record_errors  # held, not refused
                if round_ == 0:  # held off the event loop: other produce requests go on meanwhile
                    assert produce_raw(broker.bootstrap, plain, [(b"k", b"anything")]).error_code == 0
            partition = produced.result(30)
            assert (partition.error_code, partition.record_errors) == (0, []), (round_, partition.error_message)
    for round_ in range(5, 30):  # and as fast as a client goes
        partition = produce_raw(broker.bootstrap, topic, [(b"k", wire(register_next(round_)))])
        assert (partition.error_code, partition.record_errors) == (0, []), (round_, partition.error_message)
    unknown = schema_id + 1000
    partition = produce_raw(broker.bootstrap, topic, [(b"k", wire(unknown))])
    assert [e.batch_index_error_message for e in partition.record_errors] == [
        (f"Schema id {unknown} of the record's value is not valid for topic {topic}: it is not registered under "
         f"subject {topic}-value (TopicNameStrategy)")]
