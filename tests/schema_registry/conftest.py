"""A real broker and a real registry on loopback, shared by a test module: an embedded broker, and the
registry serving HTTP in front of it as ``eoslog schema-registry --bootstrap`` would. Tests use subjects of
their own, so they share one registry without seeing each other."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from eoslog.testing.wait import wait_until


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from eoslog.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("eoslog-data")) as embedded:
        yield embedded


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """An embedded broker serving its own registry (so schema validation reads the registry's in-process
    state), and that registry's URL once it is the writer."""
    from eoslog.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("validation"),
                        properties={"eoslog.schema.registry.listen": "127.0.0.1:0"}) as embedded:
        server = embedded.broker.schema_registry.server
        wait_until(lambda: server.registry.is_writer and server.registry._writer is not None, 60,
                   "the broker's registry elected itself writer")
        yield embedded, server.url


@pytest.fixture(scope="module")
def admin(served):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": served[0].bootstrap})


@pytest.fixture(scope="module")
def client(served):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": served[1]})


@pytest.fixture(scope="module")
def registry(broker):
    from eoslog.schema_registry.kafka_access import KafkaAccess
    from eoslog.schema_registry.server import RegistryServer

    server = RegistryServer(KafkaAccess(broker.bootstrap), "127.0.0.1:0", session_timeout_ms=6000).start()
    wait_until(lambda: server.registry.is_writer and server.registry._writer is not None, 30,
               "the only registry instance elected itself writer")
    yield server
    server.stop()


class Http:
    """Plain HTTP to the registry: status and decoded JSON, whatever the status."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode()

    def get(self, path: str):
        return self.call("GET", path)

    def post(self, path: str, body: object):
        return self.call("POST", path, body)

    def put(self, path: str, body: object):
        return self.call("PUT", path, body)

    def delete(self, path: str):
        return self.call("DELETE", path)


@pytest.fixture
def http(registry) -> Http:
    return Http(registry.url)
