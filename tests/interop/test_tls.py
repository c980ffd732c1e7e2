"""TLS listeners on a real broker process, with real clients (issue 15, the TLS step).

The broker serves three listeners at once: PLAINTEXT; SSL with client certificates required; and
INTERNAL, an SSL listener whose ``listener.name.internal.ssl.client.auth=none`` overrides that. Each
client bootstraps on a TLS port and must be sent back to that same listener by Metadata: an address
on another listener would fail its handshake. Fetches on TLS go through the TLS stream, never
sendfile, or the records would arrive as garbage."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess

import confluent_kafka
import confluent_kafka.admin
import pytest

from eoslog.server.config import BrokerConfig, ConfigError
from eoslog.testing.certs import make_certs
from eoslog.testing.process import BrokerProcess, free_port
from tests.interop.clients import aiokafka_values, kafka_python_abort_then_commit, poll_values

pytestmark = pytest.mark.interop
COUNT = 300


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), ("alice",))


@pytest.fixture(scope="module")
def broker(certs, tmp_path_factory):
    ssl_port, internal_port = free_port(), free_port()
    properties = {
        "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port},INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL",
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "required",
        "listener.name.internal.ssl.client.auth": "none",
    }
    with BrokerProcess(data_dir=tmp_path_factory.mktemp("tls") / "data", properties=properties) as process:
        process.ssl_port, process.internal_port = ssl_port, internal_port
        yield process


def mutual(broker, certs) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{broker.ssl_port}", "security.protocol": "ssl",
            "ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(certs.client_cert("alice")),
            "ssl.key.location": str(certs.client_key("alice"))}


def client_context(certs, with_certificate: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if with_certificate:
        context.load_cert_chain(str(certs.client_cert("alice")), str(certs.client_key("alice")))
    return context


API_VERSIONS_V0 = b"\0\0\0\x0c\0\x12\0\0\0\0\0\x01\0\x02hi"  # size, ApiVersions v0, id 1, client "hi"


def refused(context: ssl.SSLContext, port: int) -> bool:
    """True when the broker fails the handshake or closes the connection instead of answering."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(API_VERSIONS_V0)
                return tls.recv(4) == b""
        except (ssl.SSLError, ConnectionError):
            return True


def values(prefix: str) -> list[bytes]:
    return [f"{prefix}-{i:05d}-".encode() + b"x" * (i % 200) for i in range(COUNT)]


def test_confluent_kafka_transactions_over_mutual_tls(broker, certs):
    config = mutual(broker, certs)
    producer = confluent_kafka.Producer({**config, "transactional.id": "tls-confluent", "linger.ms": 5})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values("aborted"):
        producer.produce("tls-confluent", value)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for value in values("committed"):
        producer.produce("tls-confluent", value)
    producer.commit_transaction(30)
    assert poll_values(config, "tls-confluent", COUNT) == values("committed")


def test_kafka_python_transactions_over_mutual_tls(broker, certs):
    common = {"bootstrap_servers": f"127.0.0.1:{broker.ssl_port}", "security_protocol": "SSL",
              "ssl_context": client_context(certs)}
    assert kafka_python_abort_then_commit(common, "tls-kafka-python", "tls-kafka-python", values("kp-aborted"),
                                          values("kp")) == values("kp")


def test_aiokafka_transactions_over_mutual_tls(broker, certs):
    from aiokafka import AIOKafkaProducer

    async def run() -> list[bytes]:
        common = {"bootstrap_servers": f"127.0.0.1:{broker.ssl_port}", "security_protocol": "SSL",
                  "ssl_context": client_context(certs)}
        producer = AIOKafkaProducer(transactional_id="tls-aiokafka", **common)
        await producer.start()
        try:
            async with producer.transaction():
                for value in values("aio"):
                    await producer.send("tls-aiokafka", value)
        finally:
            await producer.stop()
        return await aiokafka_values(common, "tls-aiokafka", COUNT)

    assert asyncio.run(run()) == values("aio")


def test_kcat_transactions_over_mutual_tls(broker, certs):
    tls = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={certs.ca}",
           "-X", f"ssl.certificate.location={certs.client_cert('alice')}",
           "-X", f"ssl.key.location={certs.client_key('alice')}"]
    lines = [v.decode() for v in values("kcat")]
    subprocess.run(["kcat", "-P", "-b", f"127.0.0.1:{broker.ssl_port}", "-t", "tls-kcat", *tls,
                    "-X", "transactional.id=tls-kcat"],  # kcat commits its input as one transaction
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=60)
    out = subprocess.run(["kcat", "-C", "-b", f"127.0.0.1:{broker.ssl_port}", "-t", "tls-kcat", "-o", "beginning",
                          "-e", "-q", "-X", "isolation.level=read_committed", *tls],
                         capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == lines


def test_listeners_advertise_themselves_and_a_listener_may_not_ask_for_certificates(broker, certs):
    # INTERNAL is TLS without client certificates: a client with only the CA is served there...
    config = {"bootstrap.servers": f"127.0.0.1:{broker.internal_port}", "security.protocol": "ssl",
              "ssl.ca.location": str(certs.ca)}
    metadata = confluent_kafka.admin.AdminClient(config).list_topics(timeout=30)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", broker.internal_port)]
    producer = confluent_kafka.Producer({**config, "enable.idempotence": True})
    for value in values("internal"):
        producer.produce("tls-internal", value)
    assert producer.flush(30) == 0
    assert poll_values(config, "tls-internal", COUNT) == values("internal")
    # ...and PLAINTEXT clients are told the PLAINTEXT address.
    plain = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    assert [(b.host, b.port) for b in plain.brokers.values()] == [("127.0.0.1", broker.port)]


def test_required_client_certificates_refuse_strangers_and_garbage_without_hurting_the_broker(broker, certs):
    # TLS without a client certificate where one is required, or with one from another CA: the broker
    # ends the connection (TLS 1.3 finds out after the client's side of the handshake) and never
    # answers a request on it.
    assert not refused(client_context(certs), broker.ssl_port)  # alice is answered
    assert refused(client_context(certs, with_certificate=False), broker.ssl_port)
    stranger = make_certs(broker.data_dir.parent / "stranger", ("mallory",))
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(str(stranger.client_cert("mallory")), str(stranger.client_key("mallory")))
    assert refused(context, broker.ssl_port)
    # Garbage instead of a handshake, and plaintext Kafka on the TLS port: closed.
    for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", API_VERSIONS_V0):
        with socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=10) as raw:
            raw.sendall(junk)
            assert raw.recv(4096) is not None  # an alert or EOF, never a Kafka response
            raw.settimeout(10)
            while raw.recv(4096):
                pass  # the broker closes it
    # The broker is unaffected: a proper client is served at once.
    assert broker.process.poll() is None
    metadata = confluent_kafka.admin.AdminClient(mutual(broker, certs)).list_topics(timeout=30)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", broker.ssl_port)]


def test_tls_configuration_errors_are_clear(tmp_path, certs):
    from eoslog.server.broker import Broker

    cases = [
        ({"listeners": "SSL://127.0.0.1:0"}, "needs ssl.keystore.location"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(tmp_path / "missing.pem")}, "cannot load"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(certs.broker), "ssl.client.auth": "required"},
         "needs ssl.truststore.location"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(certs.broker), "ssl.keystore.type": "JKS"},
         "only PEM"),
        ({"listeners": "SECRET://127.0.0.1:0"}, "no security protocol"),
        ({"listeners": "SASL_SSL://127.0.0.1:0"}, "needs ssl.keystore.location"),  # SASL_SSL is TLS too
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI is not supported"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "listener.name.sasl_plaintext.sasl.enabled.mechanisms": " "},
         "no SASL mechanism enabled"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "zookeeper.connect": "127.0.0.1:2181"},
         "logs in with SCRAM-SHA-512: set"),  # a cluster member's own login between brokers is missing
    ]
    for properties, message in cases:
        config = BrokerConfig(data_dir=tmp_path / "data")
        with pytest.raises(ConfigError, match=message):
            config.apply_properties(properties)
            Broker(config)
    with pytest.raises(ConfigError, match="unknown broker property"):
        BrokerConfig().apply_properties({"ssl.keystore.lcation": "x"})
