"""The registry served by ``eoslog serve`` itself (``eoslog.schema.registry.listen``, the property
``--schema-registry-listen`` sets): a real broker process, confluent-kafka's SchemaRegistryClient and
Avro serializers against it. That the flag's absence imports nothing of the registry is
tests/server/test_startup_imports.py's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eoslog.testing.process import BrokerProcess, free_port
from eoslog.testing.wait import wait_until

pytestmark = pytest.mark.interop

SCHEMA = {"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]}


def test_the_broker_serves_its_own_registry(tmp_path) -> None:
    port = free_port()
    properties = {"eoslog.schema.registry.listen": f"127.0.0.1:{port}"}
    with BrokerProcess(tmp_path / "data", properties=properties) as broker:
        client = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
        context = SerializationContext("readings", MessageField.VALUE)
        # the registry elects itself writer once the broker serves; until then a write may be refused
        serializer = AvroSerializer(client, json.dumps(SCHEMA))
        value = wait_until(lambda: _try(serializer, {"celsius": 21.5}, context), 60, "the first registration")
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("readings", value=value)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readings",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["readings"])
        message = wait_until(lambda: (m := consumer.poll(0.2)) is not None and not m.error() and m, 30,
                             "the record read back")
        consumer.close()
        assert AvroDeserializer(client)(message.value(), context) == {"celsius": 21.5}
        assert client.get_subjects() == ["readings-value"]
        # the schemas are in the broker's own compacted _schemas topic
        from confluent_kafka.admin import AdminClient, ConfigResource

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        [configs] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "_schemas")]).values()
        assert configs.result(10)["cleanup.policy"].value == "compact"


def _try(serializer, value, context):
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        return serializer(value, context)
    except SchemaRegistryError:
        return None


def test_serve_refuses_a_bad_listen_address(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-m", "eoslog", "serve", "--data-dir", str(tmp_path / "data"),
                             "--listen", "127.0.0.1:0", "--schema-registry-listen", "no-port"],
                            check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "schema.registry.listen" in result.stderr or "schema-registry-listen" in result.stderr, result.stderr
