"""Schema id validation on a broker that does not serve the registry itself: the registry runs in front of it
(conftest.py, as ``eoslog schema-registry --bootstrap`` would), and the broker reads ``_schemas`` with a
reader of its own, started when a topic first turns validation on (server/schema_validation.py)."""

from __future__ import annotations

import json
import uuid

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
