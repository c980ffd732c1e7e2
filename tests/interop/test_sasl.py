"""SASL on a real broker process, with real clients (issue 15, the SASL step).

The broker serves PLAINTEXT, SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and SASL_SSL
(SCRAM-SHA-512, PLAIN). Its first users are created before it starts, with ``eoslog users add
--data-dir`` (the bootstrap path); later ones through AlterUserScramCredentials. Every client produces
transactionally (an aborted batch, then a committed one) and reads back read_committed: only the
committed batch may come back. Then the ways in that must fail: a wrong password, an unknown mechanism,
a request before authentication, an oversized frame before authentication, a client that never
authenticates, garbage in the TLS handshake, an expired session (KIP-368). Each gets a clear error where
the protocol has one, loses its connection, and leaves the broker serving everyone else.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import time

import confluent_kafka
import confluent_kafka.admin
import pytest

from eoslog.client.connection import BrokerConnection
from eoslog.protocol import messages
from eoslog.security.client import ClientSecurity, ClientSecurityError
from eoslog.testing.certs import make_certs
from eoslog.testing.process import BrokerProcess, free_port
from tests.interop.clients import aiokafka_values, kafka_python_abort_then_commit, poll_values
from tests.interop.test_hostile_clients import read_exactly, rss, settled_rss

pytestmark = pytest.mark.interop
COUNT = 200
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
ALICE, ALICE_PASSWORD = "alice", "alice-secret \u00e9"  # a space and a non-ASCII letter, on purpose
MB = 1024 * 1024


def eoslog(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eoslog", *args], input=input, capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), ())


@pytest.fixture(scope="module")
def broker(certs, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("sasl") / "data"
    for user, password in ((ADMIN, ADMIN_PASSWORD), (ALICE, ALICE_PASSWORD)):
        done = eoslog("users", "add", user, "--data-dir", str(data_dir), "--password-file", "-", input=password + "\n")
        assert done.returncode == 0, done.stderr
    sasl_port, sasl_ssl_port = free_port(), free_port()
    properties = {
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                     f"SASL_SSL://127.0.0.1:{sasl_ssl_port}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "ssl.keystore.location": str(certs.broker),
        "eoslog.authentication.timeout.ms": "2000",
    }
    with BrokerProcess(data_dir=data_dir, properties=properties) as process:
        process.sasl_port, process.sasl_ssl_port = sasl_port, sasl_ssl_port
        yield process


def confluent(broker, certs, mechanism: str, tls: bool = False, user: str = ALICE,
              password: str = ALICE_PASSWORD) -> dict:
    config = {"bootstrap.servers": f"127.0.0.1:{broker.sasl_ssl_port if tls else broker.sasl_port}",
              "security.protocol": "sasl_ssl" if tls else "sasl_plaintext", "sasl.mechanism": mechanism,
              "sasl.username": user, "sasl.password": password}
    if tls:
        config["ssl.ca.location"] = str(certs.ca)
    return config


def values(prefix: str) -> list[bytes]:
    return [f"{prefix}-{i:05d}-".encode() + b"y" * (i % 150) for i in range(COUNT)]


def transact_confluent(config: dict, topic: str, transactional_id: str) -> None:
    producer = confluent_kafka.Producer({**config, "transactional.id": transactional_id, "linger.ms": 5})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values(f"{topic}-aborted"):
        producer.produce(topic, value)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for value in values(topic):
        producer.produce(topic, value)
    producer.commit_transaction(30)


@pytest.mark.parametrize("mechanism,tls", [("PLAIN", False), ("SCRAM-SHA-256", False), ("SCRAM-SHA-512", False),
                                           ("SCRAM-SHA-512", True), ("PLAIN", True)])
def test_confluent_kafka_transactions_over_sasl(broker, certs, mechanism, tls):
    config = confluent(broker, certs, mechanism, tls)
    topic = f"sasl-confluent-{mechanism.lower()}-{'ssl' if tls else 'plain'}"
    transact_confluent(config, topic, f"txn-{topic}")
    assert poll_values(config, topic, COUNT) == values(topic)
    # Metadata sends the client back to the SASL listener it came in on.
    metadata = confluent_kafka.admin.AdminClient(config).list_topics(timeout=30)
    port = broker.sasl_ssl_port if tls else broker.sasl_port
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", port)]


def kafka_python_config(broker, certs, mechanism: str, tls: bool) -> dict:
    config = {"bootstrap_servers": f"127.0.0.1:{broker.sasl_ssl_port if tls else broker.sasl_port}",
              "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
              "sasl_plain_username": ALICE, "sasl_plain_password": ALICE_PASSWORD}
    if tls:
        config["ssl_context"] = ssl.create_default_context(cafile=str(certs.ca))
    return config


@pytest.mark.parametrize("mechanism,tls", [("PLAIN", False), ("SCRAM-SHA-512", False), ("SCRAM-SHA-512", True)])
def test_kafka_python_transactions_over_sasl(broker, certs, mechanism, tls):
    common = kafka_python_config(broker, certs, mechanism, tls)
    topic = f"sasl-kafka-python-{mechanism.lower()}-{'ssl' if tls else 'plain'}"
    assert kafka_python_abort_then_commit(common, topic, f"txn-{topic}", values(f"{topic}-aborted"),
                                          values(topic)) == values(topic)


@pytest.mark.parametrize("mechanism,tls", [("PLAIN", False), ("SCRAM-SHA-512", False), ("SCRAM-SHA-512", True)])
def test_aiokafka_transactions_over_sasl(broker, certs, mechanism, tls):
    from aiokafka import AIOKafkaProducer

    topic = f"sasl-aiokafka-{mechanism.lower()}-{'ssl' if tls else 'plain'}"

    async def run() -> list[bytes]:
        common = kafka_python_config(broker, certs, mechanism, tls)
        producer = AIOKafkaProducer(transactional_id=f"txn-{topic}", **common)
        await producer.start()
        try:
            await producer.begin_transaction()
            for value in values(f"{topic}-aborted"):
                await producer.send(topic, value)
            await producer.abort_transaction()
            async with producer.transaction():
                for value in values(topic):
                    await producer.send(topic, value)
        finally:
            await producer.stop()
        return await aiokafka_values(common, topic, COUNT)

    assert asyncio.run(run()) == values(topic)


@pytest.mark.parametrize("mechanism,tls", [("PLAIN", False), ("SCRAM-SHA-512", False), ("SCRAM-SHA-512", True)])
def test_kcat_over_sasl(broker, certs, tmp_path, mechanism, tls):
    # kcat reads these from a librdkafka properties file, as a user's own config would carry them.
    topic = f"sasl-kcat-{mechanism.lower()}-{'ssl' if tls else 'plain'}"
    config = tmp_path / "kcat.conf"
    config.write_text("\n".join(f"{k}={v}" for k, v in confluent(broker, certs, mechanism, tls).items()
                                if k != "bootstrap.servers") + "\n")
    bootstrap = confluent(broker, certs, mechanism, tls)["bootstrap.servers"]
    lines = [v.decode() for v in values(topic)]
    produced = subprocess.run(["kcat", "-P", "-F", str(config), "-b", bootstrap, "-t", topic,
                               "-X", f"transactional.id=txn-{topic}"],
                              input="\n".join(lines) + "\n", text=True, timeout=60, capture_output=True, check=False)
    assert produced.returncode == 0, produced.stderr
    out = subprocess.run(["kcat", "-C", "-F", str(config), "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                          "-X", "isolation.level=read_committed"], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == lines


# --- what must fail ------------------------------------------------------------------------------------------------

def wire(port: int, **properties) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", port, timeout_s=10, security=ClientSecurity.from_properties(properties))


def closed_by_broker(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True once the broker has closed its end (EOF or reset) within the timeout; whatever it sent before
    (a response owed) is read and dropped."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            if sock.recv(65536) == b"":
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        pass
    return False


def frame(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    client = b"sasl-test"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    return struct.pack(">i", len(header) + len(body)) + header + body


def handshake_v1(mechanism: bytes) -> bytes:
    return frame(17, 1, struct.pack(">h", len(mechanism)) + mechanism)


def test_wrong_password_and_unknown_user_get_sasl_authentication_failed_then_the_connection_closes(broker):
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        for user, password in ((ALICE, "not-her-password"), ("nobody", ALICE_PASSWORD)):
            with pytest.raises(ClientSecurityError, match="SASL_AUTHENTICATION_FAILED") as failure:
                wire(broker.sasl_port, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                                          "sasl.username": user, "sasl.password": password})
            # The same words whatever was wrong: a client cannot tell which users exist.
            assert "invalid credentials" in str(failure.value)
    # A real client reports it as an authentication error, not a timeout.
    errors, delivered = [], []
    producer = confluent_kafka.Producer({**confluent(broker, None, "SCRAM-SHA-512", user=ALICE, password="nope"),
                                         "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce("never", b"x", on_delivery=lambda error, message: delivered.append(error))
    producer.flush(10)
    assert delivered and delivered[0] is not None  # never written
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors)
    assert broker.process.poll() is None


def test_unknown_mechanism_is_refused_with_the_enabled_ones(broker, certs):
    with socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=10) as sock:
        sock.sendall(handshake_v1(b"GSSAPI"))
        (size,) = struct.unpack(">i", read_exactly(sock, 4))
        body = read_exactly(sock, size)
        error_code, count = struct.unpack(">hi", body[4:10])
        assert error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        offered, rest = [], body[10:]
        for _ in range(count):
            (length,) = struct.unpack(">h", rest[:2])
            offered.append(rest[2:2 + length].decode())
            rest = rest[2 + length:]
        assert offered == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert closed_by_broker(sock)
    with pytest.raises(ClientSecurityError, match="UNSUPPORTED_SASL_MECHANISM"):
        wire(broker.sasl_ssl_port, **{"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca),
                                      "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": ALICE,
                                      "sasl.password": ALICE_PASSWORD})


def test_nothing_but_the_exchange_is_served_before_authentication(broker):
    metadata = frame(3, 1, struct.pack(">i", -1))
    for before in (b"", handshake_v1(b"PLAIN")):
        with socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=10) as sock:
            sock.sendall(before)
            if before:
                read_exactly(sock, struct.unpack(">i", read_exactly(sock, 4))[0])  # the handshake's answer
            sock.sendall(metadata)
            assert closed_by_broker(sock)
    # ApiVersions is answered (clients ask it first), and a stranger may not announce a large frame.
    with socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=10) as sock:
        sock.sendall(frame(18, 0, b""))
        assert struct.unpack(">hi", read_exactly(sock, struct.unpack(">i", read_exactly(sock, 4))[0])[4:10])[0] == 0
        sock.sendall(struct.pack(">i", 1 * MB) + b"\0" * 1024)  # over sasl.server.max.receive.size (512 KiB)
        assert closed_by_broker(sock)


def test_kafka_0_10_style_bare_tokens_after_a_v0_handshake(broker):
    """SaslHandshake v0, then the PLAIN token as a bare size-prefixed frame, answered the same way."""
    def login(password: str) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=10)
        sock.sendall(frame(17, 0, struct.pack(">h", 5) + b"PLAIN"))
        body = read_exactly(sock, struct.unpack(">i", read_exactly(sock, 4))[0])
        assert struct.unpack(">h", body[4:6])[0] == 0
        token = b"\0" + ALICE.encode() + b"\0" + password.encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        return sock

    with login(ALICE_PASSWORD) as sock:
        assert read_exactly(sock, 4) == b"\0\0\0\0"  # PLAIN's empty answer, bare
        sock.sendall(frame(3, 1, struct.pack(">i", -1), correlation_id=9))
        body = read_exactly(sock, struct.unpack(">i", read_exactly(sock, 4))[0])
        assert struct.unpack(">i", body[:4])[0] == 9  # Metadata answered: authenticated
    with login("wrong") as sock:
        assert closed_by_broker(sock)  # v0 has no way to say why


def test_a_client_that_does_not_authenticate_in_time_is_dropped(broker):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=10) as sock:
        sock.sendall(handshake_v1(b"SCRAM-SHA-512"))
        read_exactly(sock, struct.unpack(">i", read_exactly(sock, 4))[0])
        assert closed_by_broker(sock, timeout=10)  # eoslog.authentication.timeout.ms=2000
    assert 1.5 < time.monotonic() - started < 8


def test_garbage_in_the_tls_handshake_of_a_sasl_ssl_listener_closes_only_that_connection(broker, certs):
    for junk in (b"\x16\x03\x01\x00\x05hello", handshake_v1(b"PLAIN"), os.urandom(3000)):
        with socket.create_connection(("127.0.0.1", broker.sasl_ssl_port), timeout=10) as raw:
            raw.sendall(junk)
            raw.settimeout(10)
            try:
                while raw.recv(4096):
                    pass  # an alert, then EOF
            except ConnectionResetError:
                pass
    config = confluent(broker, certs, "SCRAM-SHA-512", tls=True)
    assert confluent_kafka.admin.AdminClient(config).list_topics(timeout=30).brokers


def test_a_handshake_flood_costs_bounded_memory_and_is_cleared_by_the_deadline(broker, certs):
    """2,000 connections that each start SASL and stall, and 300 that start TLS and stall: the broker's
    RSS stays within 60 MB of where it was, an authenticated client is served throughout, and the
    authentication deadline closes every one of them."""
    base = settled_rss(broker.process.pid)
    stalled = []
    try:
        for i in range(2000):
            sock = socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=10)
            sock.sendall(handshake_v1(b"SCRAM-SHA-512") if i % 2 else frame(18, 0, b""))
            stalled.append(sock)
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", broker.sasl_ssl_port), timeout=10)
            sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello that never ends
            stalled.append(sock)
        peak = rss(broker.process.pid)
        config = confluent(broker, certs, "SCRAM-SHA-512")
        producer = confluent_kafka.Producer({**config, "enable.idempotence": True})
        for value in values("during-flood"):
            producer.produce("sasl-flood", value)
        assert producer.flush(30) == 0
        assert peak - base < 60 * MB, f"RSS grew {(peak - base) / MB:.0f} MB for 2,300 stalled handshakes"
        # The deadline (eoslog.authentication.timeout.ms, 2 s here, for TLS handshakes too) ends them all.
        deadline = time.monotonic() + 30
        for sock in stalled:
            assert closed_by_broker(sock, timeout=max(0.1, deadline - time.monotonic())), "a stalled handshake survived"
    finally:
        for sock in stalled:
            sock.close()
    assert poll_values(config, "sasl-flood", COUNT) == values("during-flood")


# --- users, through the broker ---------------------------------------------------------------------------------------

def test_users_are_managed_over_the_protocol_and_stored_salted(broker, certs, tmp_path):
    admin = tmp_path / "admin.properties"
    admin.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nssl.ca.location={certs.ca}\n"
                     f'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                     f'username="{ADMIN}" password="{ADMIN_PASSWORD}";\n')
    bootstrap = f"127.0.0.1:{broker.sasl_ssl_port}"
    done = eoslog("users", "add", "bob", "--mechanism", "SCRAM-SHA-256", "--bootstrap-server", bootstrap,
                  "--command-config", str(admin), "--password-file", "-", input="bob-secret\n")
    assert done.returncode == 0, done.stderr
    bob = confluent(broker, certs, "SCRAM-SHA-256", user="bob", password="bob-secret")
    producer = confluent_kafka.Producer({**bob, "enable.idempotence": True})
    producer.produce("sasl-bob", b"from bob")
    assert producer.flush(30) == 0
    # confluent-kafka's admin API reads the same (KIP-554), without any key.
    client = confluent_kafka.admin.AdminClient(confluent(broker, certs, "SCRAM-SHA-512", True, ADMIN, ADMIN_PASSWORD))
    described = client.describe_user_scram_credentials(["bob"])["bob"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (confluent_kafka.admin.ScramMechanism.SCRAM_SHA_256, 8192)]
    listed = eoslog("users", "list", "--bootstrap-server", bootstrap, "--command-config", str(admin))
    assert listed.returncode == 0 and ["bob", "SCRAM-SHA-256 (8192 iterations)"] in [
        line.split(None, 1) for line in listed.stdout.splitlines()]
    # The other admin tools take the same client properties (Kafka's --command-config).
    for tool in (("transactions", "list"), ("groups", "list")):
        done = eoslog(*tool, "--bootstrap-server", bootstrap, "--command-config", str(admin))
        assert done.returncode == 0, done.stderr
    transact_confluent(confluent(broker, certs, "SCRAM-SHA-512", tls=True), "sasl-tools", "txn-sasl-tools")
    listed = eoslog("transactions", "list", "--bootstrap-server", bootstrap, "--command-config", str(admin))
    assert "txn-sasl-tools" in listed.stdout
    # On disk: salted keys only, readable by the broker's user alone.
    stored = (broker.data_dir / "scram-credentials.json")
    assert oct(stored.stat().st_mode & 0o777) == "0o600"
    text = stored.read_text()
    assert "bob-secret" not in text and ALICE_PASSWORD not in text and ADMIN_PASSWORD not in text
    assert set(json.loads(text)["users"]["bob"]) == {"SCRAM-SHA-256"}
    # Without the client settings, a clear word instead of a traceback.
    bare = eoslog("users", "list", "--bootstrap-server", f"127.0.0.1:{broker.sasl_port}")
    assert bare.returncode != 0 and "--command-config" in bare.stderr and "Traceback" not in bare.stderr
    # The offline tool refuses a directory a broker holds.
    refused = eoslog("users", "list", "--data-dir", str(broker.data_dir))
    assert refused.returncode != 0 and "a broker is running" in refused.stderr
    # Deleted: bob can no longer log in.
    done = eoslog("users", "delete", "bob", "--bootstrap-server", bootstrap, "--command-config", str(admin))
    assert done.returncode == 0, done.stderr
    with pytest.raises(ClientSecurityError, match="SASL_AUTHENTICATION_FAILED"):
        wire(broker.sasl_port, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                                  "sasl.username": "bob", "sasl.password": "bob-secret"})
    # Kafka's refusals for bad changes, per user.
    request = messages.AlterUserScramCredentialsRequest(upsertions=[
        messages.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name="carol", mechanism=1, iterations=100, salt=b"s" * 16, salted_password=b"p" * 32),
        messages.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name="dave", mechanism=9, iterations=8192, salt=b"s" * 16, salted_password=b"p" * 32)],
        deletions=[messages.AlterUserScramCredentialsRequest.ScramCredentialDeletion(name="erin", mechanism=2)])
    connection = wire(broker.sasl_ssl_port, **{"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca),
                                               "sasl.mechanism": "PLAIN", "sasl.username": ADMIN,
                                               "sasl.password": ADMIN_PASSWORD})
    try:
        results = {r.user: r.error_code for r in connection.request(51, 0, request).results}
    finally:
        connection.close()
    assert results == {"carol": 93, "dave": 33, "erin": 91}  # UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_..., NOT_FOUND


# --- KIP-368 -------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("reauth") / "data"
    done = eoslog("users", "add", ALICE, "--data-dir", str(data_dir), "--password-file", "-",
                  input=ALICE_PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    sasl_port = free_port()
    properties = {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                  "connections.max.reauth.ms": "2000"}
    with BrokerProcess(data_dir=data_dir, properties=properties) as process:
        process.sasl_port = sasl_port
        yield process


SCRAM_ALICE = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ALICE,
               "sasl.password": ALICE_PASSWORD}


def metadata_ok(connection: BrokerConnection) -> bool:
    try:
        connection.request(3, 1, messages.MetadataRequest(topics=[]))
        return True
    except (ConnectionError, OSError):
        return False


def test_an_expired_session_is_closed_unless_the_client_reauthenticates(reauth_broker):
    stale = wire(reauth_broker.sasl_port, **SCRAM_ALICE)
    renewed = wire(reauth_broker.sasl_port, **SCRAM_ALICE)
    try:
        assert metadata_ok(stale) and metadata_ok(renewed)
        expires = time.monotonic() + 2.0
        time.sleep(1.0)
        ClientSecurity.from_properties(SCRAM_ALICE).authenticate(renewed.request)  # KIP-368: on the same connection
        while time.monotonic() < expires + 0.3:
            time.sleep(0.1)  # past the first session's end, on purpose: that is what is tested
        assert metadata_ok(renewed), "a re-authenticated connection must live on"
        assert not metadata_ok(stale), "an expired session must be closed"
    finally:
        stale.close()
        renewed.close()


def test_clients_reauthenticate_by_themselves_and_lose_nothing(reauth_broker):
    """confluent-kafka re-authenticates before its 2 s sessions end; a transactional producer that spans
    several sessions commits every record once."""
    config = {"bootstrap.servers": f"127.0.0.1:{reauth_broker.sasl_port}", "security.protocol": "sasl_plaintext",
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ALICE, "sasl.password": ALICE_PASSWORD}
    producer = confluent_kafka.Producer({**config, "transactional.id": "reauth-txn"})
    producer.init_transactions(30)
    expected = []
    ends = time.monotonic() + 5  # two and a half sessions
    batch = 0
    while time.monotonic() < ends:
        producer.begin_transaction()
        for i in range(20):
            value = f"b{batch}-{i}".encode()
            producer.produce("reauth", value)
            expected.append(value)
        producer.commit_transaction(30)
        batch += 1
    assert poll_values(config, "reauth", len(expected)) == expected
    # The broker saw at least one re-authentication on a connection that stayed open.
    reauthenticated = [line for line in reauth_broker.log_path.read_text().splitlines() if "re-authenticated" in line]
    assert reauthenticated, reauth_broker.log_tail()
